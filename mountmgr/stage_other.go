//go:build !linux

package mountmgr

import (
	"context"
	"errors"
)

var errNotLinux = errors.New("the sandbox needs Linux")

// MaybeRunStage does nothing off Linux.
func MaybeRunStage() {}

// InDaemon is always false off Linux.
func InDaemon() bool { return false }

// RunDaemon fails off Linux.
func RunDaemon(DaemonOptions) (int, error) { return 125, errNotLinux }

// PrivateMountDir fails off Linux.
func PrivateMountDir(...string) (string, func(), error) { return "", nil, errNotLinux }

// StartServer fails off Linux.
func StartServer(context.Context, *Spec, ServerOptions) (*Server, error) { return nil, errNotLinux }

// FUSEFinding reports that FUSE needs Linux.
func FUSEFinding() Finding {
	return Finding{Name: "fuse", Fatal: true, Detail: "FUSE mounts need Linux"}
}

// Preflight reports that the sandbox needs Linux.
func Preflight() []Finding {
	return []Finding{{Name: "sandbox", Fatal: true, Detail: "rootfs run needs Linux"}}
}
