package mountmgr

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/internal/seccomp"
)

// ExecError is a server that P2 could not exec (Code 126 or 127). It wraps
// ErrCommandNotFound or ErrCommandNotExecutable.
type ExecError struct {
	Code int
	Msg  string
}

func (e *ExecError) Error() string { return "exec server: " + e.Msg }

func (e *ExecError) Unwrap() error {
	if e.Code == 127 {
		return ErrCommandNotFound
	}
	return ErrCommandNotExecutable
}

// ServerOptions are the optional knobs of StartServer.
type ServerOptions struct {
	// Stderr receives the server's stderr and P2's; nil means os.Stderr.
	Stderr *os.File
	// Logger receives lifecycle messages; nil means none.
	Logger *zap.Logger
	// AuditGroup, when set, is a fanotify group (audit.KernelWatch) that
	// the sandbox's init reads, where the kernel numbers processes as the
	// sandbox does, and passes on (audit.Forward) to Server.AuditEvents.
	AuditGroup *os.File
	// SyscallRefused, when set, gets each system call that the seccomp
	// filter refused with EPERM, after the call was answered: name is
	// the call's, pid the caller's number in the sandbox's PID namespace
	// (0 when it could not be told), comm its command. The sandbox's
	// init then loads the filter with a listener (seccomp user
	// notification) and hands it to this process, which answers every
	// refusal with EPERM; when the kernel refuses a listener, the plain
	// filter is loaded and Server.SyscallsUnreported says why. Calls come
	// from one goroutine and must not block.
	SyscallRefused func(name string, pid int, comm string)
	// SyscallsLost gets the number of refusals answered but not given to
	// SyscallRefused (its queue was full).
	SyscallsLost func(n int64)
	// Connect, with Spec.Net, answers every connect(2) of the sandbox
	// (the network's fast path: netstack.Engine.SeccompConnect), from
	// the time StartServer returns; it is then the seccomp listener's
	// (seccomp.ListenOptions.Connect). The filter refers connect(2) to it
	// only when P1 runs an engine (with the TUN, or on lo alone:
	// NetFiles.FastPath says whether it does); a kernel that gives no
	// listener leaves every connect to the TUN, as without it.
	Connect func(*seccomp.Call) seccomp.Answer
	// ConnectBusy answers the connect(2) calls beyond those Connect is
	// answering at once (seccomp.ListenOptions.Busy); nil lets them run.
	ConnectBusy func(*seccomp.Call) seccomp.Answer
}

// Server is the running sandbox (P2, with the wrapped server P3 under it).
// Wait, Signal and Stop may be called from any goroutine.
type Server struct {
	// Stdin is the server's standard input; close it to tell it to finish.
	Stdin io.WriteCloser
	// Stdout is the server's standard output (the protocol stream).
	Stdout io.ReadCloser
	// Net is the sandbox's TUN device and loopback listeners, with
	// Spec.Net; the caller owns and closes them.
	Net *NetFiles
	// AuditEvents are the events of ServerOptions.AuditGroup that the
	// sandbox's init passed on; the caller owns it.
	AuditEvents io.ReadCloser
	// SyscallsUnreported says why the seccomp filter's refusals are not
	// reported although ServerOptions.SyscallRefused asked for them (the
	// kernel refused a listener); "" otherwise.
	SyscallsUnreported string

	cmd       *exec.Cmd
	serverPid int // P3's pid inside the PID namespace
	log       *zap.Logger
	tail      stderrTail    // the last lines of the server's stderr
	done      chan struct{} // closed when P2 has been reaped
	code      int
}

// Pid returns P2's pid (in P1's PID namespace). Signals sent to it are
// forwarded to the server; SIGKILL tears the whole sandbox down.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Wait blocks until the sandbox exits and returns the server's exit status
// (128+n when it died of signal n).
func (s *Server) Wait() int {
	<-s.done
	return s.code
}

// WaitFor waits at most d for the sandbox to exit and returns the server's
// exit status and true, or -1 and false if it is still running.
func (s *Server) WaitFor(d time.Duration) (int, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.done:
		return s.code, true
	case <-t.C:
		return -1, false
	}
}

// LastStderr returns the last line of the server's stderr that says
// something (not blank, not a stack frame), cleaned up to fit in one line
// of a message; "" when there is none. The server's stderr still goes to
// ServerOptions.Stderr in full: this is the line a client that only shows
// an error message should see. Once Wait has returned, it holds
// everything the server wrote.
func (s *Server) LastStderr() string { return s.tail.last() }

// Signal forwards sig to the server (through P2).
func (s *Server) Signal(sig os.Signal) error {
	select {
	case <-s.done:
		return os.ErrProcessDone
	default:
	}
	return s.cmd.Process.Signal(sig)
}

// Stop ends the server: it waits up to grace for it to exit (the caller
// has usually closed Stdin already), then sends SIGTERM and waits up to
// grace again, then SIGKILLs P2, which kills everything in the PID
// namespace. It returns the exit status. A grace of 0 means 500ms, so Stop
// takes at most about 1s by default.
func (s *Server) Stop(grace time.Duration) int {
	if grace <= 0 {
		grace = 500 * time.Millisecond
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.done:
		return s.code
	case <-t.C:
	}
	s.log.Debug("server did not exit, sending sigterm")
	_ = s.Signal(syscall.SIGTERM)
	t.Reset(grace)
	select {
	case <-s.done:
		return s.code
	case <-t.C:
	}
	s.log.Debug("server did not exit, sending sigkill")
	_ = s.cmd.Process.Kill()
	return s.Wait()
}
