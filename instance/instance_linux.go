//go:build linux

package instance

import (
	"io/fs"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

var errConnRefused = syscall.ECONNREFUSED

// peerUID is the uid of c's peer, as the kernel gave it when it connected.
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	err = raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}

func statOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}
