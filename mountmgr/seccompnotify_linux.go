package mountmgr

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/seccomp"
)

// The seccomp listener's hand-over. With ServerOptions.SyscallRefused, P1
// adds one end of a SOCK_SEQPACKET socketpair to the stage protocol
// (ROOTFS_SECCOMP_FD). P2 loads the filter last, as always, but with a
// listener (seccomp.InstallNotify), sends the listener on the socket and
// keeps its own copy (close-on-exec) before it forks the server:
//
//	P1                                              P2 (after Landlock)
//	  <--- seccomp socket: payload seccompHandover, ---  seccomp(SET_MODE_FILTER, TSYNC|TSYNC_ESRCH|NEW_LISTENER)
//	       SCM_RIGHTS [listener]                          keep a copy
//	  <--- sync pipe: stageReport ----------------------  (the server runs)
//	  answer every notification EPERM (seccomp.Listen)
//
// When the kernel refuses a listener (EBUSY under a filter that has one,
// as in some containers; EINVAL before Linux 5.7), P2 loads the plain
// filter and the message says why, with no descriptor; on any other
// error P2 fails. Until P1 answers, a refused call waits, and if P1 is
// gone it waits for the sandbox's end (P2 dies with P1): never does a
// refused call run. The filter also refuses the server a listener of its
// own (seccomp.NotifyProgram), which could otherwise let the calls run.

// seccompHandover is the payload of the hand-over message.
type seccompHandover struct {
	Err string `json:"err,omitempty"` // no listener: why
	// Connect says the filter refers connect(2) (the fast path); asked
	// for, a kernel before 5.19 loads the filter without.
	Connect bool `json:"connect,omitempty"`
}

// installSeccomp is P2's last step: the plain filter without a socket,
// else the one with a listener, sent back on sock.
func installSeccomp(sock int, notify seccomp.Notify) error {
	if sock < 3 || !notify.Refusals && !notify.Connect {
		if sock >= 3 {
			// Asked for the fast path only, which has no engine here: the
			// message says so.
			if err := sendHandover(sock, seccompHandover{Err: "no network engine to carry connect(2)"}); err != nil {
				return fmt.Errorf("seccomp: %w", err)
			}
			unix.Close(sock)
		}
		return seccomp.Install()
	}
	var h seccompHandover
	var fds []int
	lf, connect, err := seccomp.InstallNotify(notify)
	switch {
	case err != nil && !seccomp.Fallback(err):
		return err // fail closed: no server without a filter
	case err != nil:
		if err := seccomp.Install(); err != nil {
			return err
		}
		h.Err = err.Error()
	default:
		// A copy kept open for this init's life, as a bare descriptor
		// (no finalizer closes it; close-on-exec, and this process is out
		// of the server's reach): while a copy lives, the kernel gives no
		// one else a listener, and with rootfs gone a refused call waits
		// for the sandbox's end instead of failing.
		if _, err := unix.FcntlInt(lf.Fd(), unix.F_DUPFD_CLOEXEC, 3); err != nil {
			return fmt.Errorf("seccomp: keep the listener: %w", err)
		}
		defer lf.Close()
		fds = append(fds, int(lf.Fd()))
		h.Connect = connect
	}
	if err := sendHandover(sock, h, fds...); err != nil {
		return fmt.Errorf("seccomp: hand the listener to rootfs: %w", err)
	}
	unix.Close(sock)
	return nil
}

// recvSeccomp is P1's part: the one message P2 queued before its report.
// It returns the listener, or why there is none, and whether the filter
// refers connect(2).
func recvSeccomp(sock *os.File) (*os.File, string, bool, error) {
	var h seccompHandover
	fds, err := recvHandover(sock, &h, 1)
	if errors.Is(err, errBadHandover) {
		return nil, "", false, fmt.Errorf("seccomp: %w", err)
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("seccomp: no listener from the sandbox: %w", err)
	}
	if (h.Err == "") != (len(fds) == 1) || len(fds) > 1 {
		closeFDs(fds)
		return nil, "", false, fmt.Errorf("seccomp: %w", errBadHandover)
	}
	if h.Err != "" {
		return nil, h.Err, false, nil
	}
	return os.NewFile(uintptr(fds[0]), "seccomp-listener"), "", h.Connect, nil
}

// listenSeccomp answers and reports the listener's refusals until the
// sandbox is gone (done).
func listenSeccomp(lf *os.File, opts ServerOptions, done <-chan struct{}) error {
	lo := seccomp.ListenOptions{Lost: opts.SyscallsLost, Connect: opts.Connect, Busy: opts.ConnectBusy}
	if opts.SyscallRefused != nil {
		lo.Refused = func(r seccomp.Refusal) { opts.SyscallRefused(r.Syscall, r.PID, r.Comm) }
	}
	l, err := seccomp.Listen(lf, lo)
	if err != nil {
		return err
	}
	go func() {
		<-done
		l.Close()
	}()
	return nil
}
