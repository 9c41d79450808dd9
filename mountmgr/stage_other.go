//go:build !linux

package mountmgr

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"go.uber.org/zap"
)

var errNotLinux = errors.New("the sandbox needs Linux")

// MaybeRunStage does nothing off Linux.
func MaybeRunStage() {}

// InDaemon is always false off Linux.
func InDaemon() bool { return false }

// DaemonOptions configures RunDaemon.
type DaemonOptions struct {
	Args       []string
	Env        []string
	ExtraFiles []*os.File
	Logger     *zap.Logger
}

// RunDaemon fails off Linux.
func RunDaemon(DaemonOptions) (int, error) { return 125, errNotLinux }

// PrivateMountDir fails off Linux.
func PrivateMountDir() (string, func(), error) { return "", nil, errNotLinux }

// ExecError is a server that could not be exec'd.
type ExecError struct {
	Code int
	Msg  string
}

func (e *ExecError) Error() string { return "exec server: " + e.Msg }

// ServerOptions are the optional knobs of StartServer.
type ServerOptions struct {
	Stderr *os.File
	Logger *zap.Logger
}

// Server is the running sandbox.
type Server struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
}

func (s *Server) Pid() int               { return 0 }
func (s *Server) Wait() int              { return 125 }
func (s *Server) Signal(os.Signal) error { return errNotLinux }
func (s *Server) Stop(time.Duration) int { return 125 }

// StartServer fails off Linux.
func StartServer(context.Context, *Spec, ServerOptions) (*Server, error) { return nil, errNotLinux }

// Finding is one preflight result.
type Finding struct {
	Name   string
	OK     bool
	Fatal  bool
	Detail string
	Fix    string
}

func (f Finding) String() string { return f.Name + ": " + f.Detail }

// Preflight reports that the sandbox needs Linux.
func Preflight() []Finding {
	return []Finding{{Name: "sandbox", Fatal: true, Detail: "rootfs run needs Linux"}}
}

// PreflightError returns the first fatal finding.
func PreflightError(fs []Finding) error {
	for _, f := range fs {
		if !f.OK && f.Fatal {
			return errors.New(f.String())
		}
	}
	return nil
}
