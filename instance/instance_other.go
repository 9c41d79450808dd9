//go:build !linux

package instance

import (
	"errors"
	"io/fs"
	"net"
	"syscall"
)

var errConnRefused = syscall.ECONNREFUSED

// peerUID is not known off Linux, where rootfs runs no session.
func peerUID(*net.UnixConn) (int, error) { return -1, errors.New("needs Linux") }

func statOwner(fs.FileInfo) (int, bool) { return -1, false }
