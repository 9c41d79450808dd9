package mountmgr

import (
	"encoding/json"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// The hand-overs from P2 to P1 (the network's TUN and listeners,
// net_linux.go; the seccomp listener, seccompnotify_linux.go) are each one
// message on a SOCK_SEQPACKET socketpair, queued before P2's stage
// report: a JSON payload and the descriptors, as SCM_RIGHTS.

// handoverPair returns P1's and P2's ends of a hand-over socket.
func handoverPair(name string) (parent, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	return os.NewFile(uintptr(fds[0]), name+"-parent"), os.NewFile(uintptr(fds[1]), name+"-child"), nil
}

// sendHandover is P2's part: payload as JSON, with fds.
func sendHandover(sock int, payload any, fds ...int) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	var rights []byte
	if len(fds) > 0 {
		rights = unix.UnixRights(fds...)
	}
	return os.NewSyscallError("sendmsg", unix.Sendmsg(sock, b, rights, nil, 0))
}

// errBadHandover is a message whose payload is not what P2 sends.
var errBadHandover = errors.New("bad hand-over message from the sandbox")

// recvHandover is P1's part: the one message P2 queued, its payload
// decoded into v and its descriptors (close-on-exec, at most maxFDs).
// A payload that does not decode closes them and is errBadHandover.
func recvHandover(sock *os.File, v any, maxFDs int) ([]int, error) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*maxFDs))
	n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("recvmsg", err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	if err := json.Unmarshal(buf[:n], v); err != nil {
		closeFDs(fds)
		return nil, errBadHandover
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
