//go:build linux

package main

// The syscalls the seccomp filter refuses, each tried harmlessly.

import (
	"strings"

	"golang.org/x/sys/unix"
)

// trySyscalls calls each syscall with arguments that make an allowed call
// fail harmlessly (bad pointer, bad fd, bad flags): EPERM or ENOSYS means
// it was refused before the kernel looked at it; anything else means it
// was reached. Escaped when any was reached.
func trySyscalls() (bool, string) {
	bad := uintptr(1) // an invalid user pointer
	calls := []struct {
		name string
		nr   uintptr
		a    [6]uintptr
	}{
		{"bpf", unix.SYS_BPF, [6]uintptr{0xffff, 0, 0}},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, [6]uintptr{bad, 0, ^uintptr(0), ^uintptr(0), 0}},
		{"userfaultfd", unix.SYS_USERFAULTFD, [6]uintptr{0xffffffff}},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, [6]uintptr{1, bad}},
		{"kexec_load", unix.SYS_KEXEC_LOAD, [6]uintptr{0, 0, 0, 0xffffffff}},
		{"finit_module", unix.SYS_FINIT_MODULE, [6]uintptr{^uintptr(0), bad, 0}},
		{"delete_module", unix.SYS_DELETE_MODULE, [6]uintptr{bad, 0}},
		{"reboot", unix.SYS_REBOOT, [6]uintptr{0, 0, 0, 0}},
		{"swapon", unix.SYS_SWAPON, [6]uintptr{bad, 0}},
		{"acct", unix.SYS_ACCT, [6]uintptr{bad}},
		{"syslog", unix.SYS_SYSLOG, [6]uintptr{9999, 0, 0}},
		{"quotactl", unix.SYS_QUOTACTL, [6]uintptr{0xffffffff, bad, 0, 0}},
		{"mount", unix.SYS_MOUNT, [6]uintptr{bad, bad, bad, 0, 0}},
		{"umount2", unix.SYS_UMOUNT2, [6]uintptr{bad, 0}},
		{"pivot_root", unix.SYS_PIVOT_ROOT, [6]uintptr{bad, bad}},
		{"chroot", unix.SYS_CHROOT, [6]uintptr{bad}},
		{"setns", unix.SYS_SETNS, [6]uintptr{^uintptr(0), 0}},
		{"unshare", unix.SYS_UNSHARE, [6]uintptr{0xffffffff}},
		{"clone3", unix.SYS_CLONE3, [6]uintptr{0, 0}},
		{"ptrace", unix.SYS_PTRACE, [6]uintptr{0xffff, 0}},
		{"kcmp", unix.SYS_KCMP, [6]uintptr{0, 0, 0xffff, 0, 0}},
		{"pidfd_getfd", unix.SYS_PIDFD_GETFD, [6]uintptr{^uintptr(0), 0, 0}},
		{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT, [6]uintptr{^uintptr(0), bad, bad, bad, 0}},
		{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, [6]uintptr{^uintptr(0), bad, 0}},
		{"keyctl", unix.SYS_KEYCTL, [6]uintptr{0xffff}},
		{"add_key", unix.SYS_ADD_KEY, [6]uintptr{bad, bad, 0, 0, 0}},
		{"request_key", unix.SYS_REQUEST_KEY, [6]uintptr{bad, bad, 0, 0}},
		{"fsopen", unix.SYS_FSOPEN, [6]uintptr{bad, 0}},
		{"fsmount", unix.SYS_FSMOUNT, [6]uintptr{^uintptr(0), 0, 0}},
		{"fsconfig", unix.SYS_FSCONFIG, [6]uintptr{^uintptr(0), 0, 0, 0, 0}},
		{"fspick", unix.SYS_FSPICK, [6]uintptr{^uintptr(0), bad, 0}},
		{"move_mount", unix.SYS_MOVE_MOUNT, [6]uintptr{^uintptr(0), bad, ^uintptr(0), bad, 0}},
		{"open_tree", unix.SYS_OPEN_TREE, [6]uintptr{^uintptr(0), bad, 0}},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR, [6]uintptr{^uintptr(0), bad, 0, 0, 0}},
		{"settimeofday", unix.SYS_SETTIMEOFDAY, [6]uintptr{bad, 0}},
		{"clock_settime", unix.SYS_CLOCK_SETTIME, [6]uintptr{9999, bad}},
		{"sethostname", unix.SYS_SETHOSTNAME, [6]uintptr{bad, 1}},
		{"iopl", unix.SYS_IOPL, [6]uintptr{4}},
		{"ioperm", unix.SYS_IOPERM, [6]uintptr{0x10000, 1, 1}},
		{"ioctl_tiocsti", unix.SYS_IOCTL, [6]uintptr{^uintptr(0), unix.TIOCSTI, 0}},
		{"ioctl_tioclinux", unix.SYS_IOCTL, [6]uintptr{^uintptr(0), unix.TIOCLINUX, 0}},
		{"socket_packet", unix.SYS_SOCKET, [6]uintptr{unix.AF_PACKET, 0xff, 0}},
		{"personality", unix.SYS_PERSONALITY, [6]uintptr{0x0040000}},
		{"mbind", unix.SYS_MBIND, [6]uintptr{0, 0, 0xffff, 0, 0, 0}},
		{"migrate_pages", unix.SYS_MIGRATE_PAGES, [6]uintptr{0, 0, bad, bad}},
	}
	var reached, refused []string
	for _, c := range calls {
		_, _, e := unix.Syscall6(c.nr, c.a[0], c.a[1], c.a[2], c.a[3], c.a[4], c.a[5])
		s := c.name + "=" + errs(errno(0, 0, e))
		if e == unix.EPERM || e == unix.ENOSYS || e == unix.EAFNOSUPPORT {
			refused = append(refused, s)
		} else {
			reached = append(reached, s)
		}
	}
	return len(reached) > 0, "reached: " + strings.Join(reached, " ") + " | refused: " + strings.Join(refused, " ")
}
