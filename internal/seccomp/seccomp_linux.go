package seccomp

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	libseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// EPERMList are refused with EPERM.
var EPERMList = []string{
	"mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
	"open_by_handle_at", "name_to_handle_at",
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
	"fanotify_init", "lookup_dcookie", "syslog",
	"iopl", "ioperm", "modify_ldt", "vhangup", "uselib", "ustat", "sysfs", "_sysctl", "nfsservctl",
	"mbind", "set_mempolicy", "get_mempolicy", "migrate_pages", "move_pages",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"sethostname", "setdomainname",
}

// ENOSYSList are refused with ENOSYS so that callers fall back to an older
// interface (glibc clone3 → clone, libuv io_uring → threads).
var ENOSYSList = []string{
	"clone3", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "openat2",
}

const setID = unix.S_ISUID | unix.S_ISGID

var setIDVals = []uint32{unix.S_ISUID, unix.S_ISGID, unix.S_ISUID | unix.S_ISGID}

// CloneNSFlags is Docker's mask of namespace flags refused in clone(2).
const CloneNSFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

func ret(errno syscall.Errno) bpf.Instruction {
	return bpf.RetConstant{Val: uint32(libseccomp.ActionErrno) | uint32(errno)}
}

// refuse is the filter's action for a call it refuses with errno: the
// errno itself, or, with notify and EPERM, a referral to the listener
// (SECCOMP_RET_USER_NOTIF), which answers EPERM (Listen).
func refuse(errno syscall.Errno, notify bool) bpf.Instruction {
	if notify && errno == unix.EPERM {
		return bpf.RetConstant{Val: uint32(libseccomp.ActionUserNotify)}
	}
	return ret(errno)
}

// seccomp_data offsets.
const (
	offNr   = 0
	offArch = 4
)

func offArgLo(i int) uint32 { return 16 + 8*uint32(i) } // little-endian low word

type rule struct {
	name  string
	errno syscall.Errno // refused with it (refuse)
	// in: match when (argLo & mask) is one of vals; when not is set,
	// match when it is none of them.
	arg  int
	mask uint32
	vals []uint32
	not  bool
}

func argRules() []rule {
	return []rule{
		{name: "ioctl", errno: unix.EPERM, arg: 1, mask: 0xffffffff, vals: []uint32{unix.TIOCSTI, unix.TIOCLINUX}},
		{name: "mknod", errno: unix.EPERM, arg: 1, mask: unix.S_IFMT, vals: []uint32{unix.S_IFCHR, unix.S_IFBLK}},
		{name: "mknodat", errno: unix.EPERM, arg: 2, mask: unix.S_IFMT, vals: []uint32{unix.S_IFCHR, unix.S_IFBLK}},
		{name: "personality", errno: unix.EPERM, arg: 0, mask: 0xffffffff, vals: []uint32{0, 8, 0x20000, 0x20008, 0xffffffff}, not: true},
		{name: "socket", errno: unix.EAFNOSUPPORT, arg: 0, mask: 0xffffffff, vals: []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}, not: true},
		{name: "clone", errno: unix.EPERM, arg: 0, mask: CloneNSFlags, vals: []uint32{0}, not: true},
		// No set-user-ID or set-group-ID bits on anything the server makes: files it creates in a
		// root are real host files, owned by uid 0 when rootfs runs as root, so such a bit would
		// hand host users root (security-battery A12). openat2 hides its mode in a struct the
		// filter cannot read, so it is ENOSYS (callers fall back to openat).
		{name: "chmod", errno: unix.EPERM, arg: 1, mask: setID, vals: setIDVals},
		{name: "fchmod", errno: unix.EPERM, arg: 1, mask: setID, vals: setIDVals},
		{name: "fchmodat", errno: unix.EPERM, arg: 2, mask: setID, vals: setIDVals},
		{name: "fchmodat2", errno: unix.EPERM, arg: 2, mask: setID, vals: setIDVals},
		{name: "creat", errno: unix.EPERM, arg: 1, mask: setID, vals: setIDVals},
		{name: "open", errno: unix.EPERM, arg: 2, mask: setID, vals: setIDVals},
		{name: "openat", errno: unix.EPERM, arg: 3, mask: setID, vals: setIDVals},
		{name: "mknod", errno: unix.EPERM, arg: 1, mask: setID, vals: setIDVals},
		{name: "mknodat", errno: unix.EPERM, arg: 2, mask: setID, vals: setIDVals},
	}
}

// Program returns the assembled filter for the native architecture.
func Program() ([]bpf.RawInstruction, error) { return program(Notify{}, false) }

// Notify says which calls NotifyProgram's filter refers to its listener.
type Notify struct {
	// Refusals: every EPERM refusal (the EPERM list and the argument
	// rules that answer EPERM), answered EPERM by the listener and
	// reported (--audit-log).
	Refusals bool
	// Connect: every connect(2), which the listener may carry out itself
	// or let run (SECCOMP_USER_NOTIF_FLAG_CONTINUE): the network's fast
	// path (ListenOptions.Connect).
	Connect bool
}

// NotifyProgram is Program with the calls n names referred to a listener
// instead, and one rule more: seccomp(2) with
// SECCOMP_FILTER_FLAG_NEW_LISTENER fails with EBUSY, so the server never
// has a listener of its own. The ENOSYS list, the socket rules'
// EAFNOSUPPORT and EPROTONOSUPPORT, the x32 ENOSYS and the foreign-arch
// kill are as in Program.
func NotifyProgram(n Notify) ([]bpf.RawInstruction, error) { return program(n, true) }

// program assembles the filter; n.Refusals refers EPERM refusals to a
// listener and n.Connect connect(2); guard refuses the server a listener
// of its own (only a test leaves it out, to show what it stops).
func program(n Notify, guard bool) ([]bpf.RawInstruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp arch: %w", err)
	}
	notify := n.Refusals
	epermAction := libseccomp.ActionErrno | libseccomp.Action(unix.EPERM)
	if notify {
		epermAction = libseccomp.ActionUserNotify
	}
	policy := libseccomp.Policy{
		DefaultAction: libseccomp.ActionAllow,
		Syscalls: []libseccomp.SyscallGroup{
			{Names: known(info, ENOSYSList), Action: libseccomp.ActionErrno | libseccomp.Action(unix.ENOSYS)},
			{Names: known(info, EPERMList), Action: epermAction},
		},
	}
	if n.Connect {
		policy.Syscalls = append(policy.Syscalls, libseccomp.SyscallGroup{Names: known(info, []string{"connect"}), Action: libseccomp.ActionUserNotify})
	}
	lib, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp assemble: %w", err)
	}
	// Prefix: our own arch check (the library jumps to its default action,
	// ALLOW, on a foreign arch) and the argument rules.
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(libseccomp.ActionKillProcess)},
	}
	rules := argRules()
	if (n.Refusals || n.Connect) && guard {
		// The server's own listener would take the refused calls (the
		// newest filter's USER_NOTIF wins) and could let them run
		// (SECCOMP_USER_NOTIF_FLAG_CONTINUE). The kernel refuses a second
		// listener while ours is open (EBUSY); this says the same for as
		// long as the filter lives, whatever becomes of ours.
		rules = append(rules, rule{name: "seccomp", errno: unix.EBUSY, arg: 1, mask: unix.SECCOMP_FILTER_FLAG_NEW_LISTENER,
			vals: []uint32{unix.SECCOMP_FILTER_FLAG_NEW_LISTENER}})
	}
	for _, r := range rules {
		nr, ok := info.SyscallNames[r.name]
		if !ok {
			continue
		}
		// ld nr; jne nr -> next; ld arg; and mask; jeq v1..vn
		block := []bpf.Instruction{
			bpf.LoadAbsolute{Off: offNr, Size: 4},
			nil, // jne placeholder
			bpf.LoadAbsolute{Off: offArgLo(r.arg), Size: 4},
			bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: r.mask},
		}
		n := len(r.vals)
		for i, v := range r.vals {
			// distance to the action/skip instructions after the compares
			left := uint8(n - 1 - i)
			if r.not {
				// equal -> skip action (jump over remaining compares + action)
				block = append(block, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: left + 1})
			} else {
				// equal -> action (jump over remaining compares and the skip)
				block = append(block, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: left + 1})
			}
		}
		action := refuse(r.errno, notify)
		if r.not {
			block = append(block, action)
		} else {
			// no value matched: skip the action
			block = append(block, bpf.Jump{Skip: 1}, action)
		}
		block[1] = bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(nr | info.SeccompMask), SkipTrue: uint8(len(block) - 2)}
		prog = append(prog, block...)
	}
	// socket(AF_NETLINK, _, proto): only NETLINK_ROUTE (glibc's
	// getaddrinfo and getifaddrs use it); not audit, uevent, netfilter...
	if nr, ok := info.SyscallNames["socket"]; ok {
		prog = append(prog,
			bpf.LoadAbsolute{Off: offNr, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(nr | info.SeccompMask), SkipTrue: 5},
			bpf.LoadAbsolute{Off: offArgLo(0), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.AF_NETLINK, SkipTrue: 3},
			bpf.LoadAbsolute{Off: offArgLo(2), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.NETLINK_ROUTE, SkipTrue: 1},
			ret(unix.EPROTONOSUPPORT),
		)
	}
	prog = append(prog, lib...)
	return bpf.Assemble(prog)
}

// known keeps the names this architecture has (aarch64 lacks some).
func known(info *arch.Info, names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := info.SyscallNames[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// Install sets no_new_privs and loads the filter on every thread of the
// process (SECCOMP_FILTER_FLAG_TSYNC). The filter is inherited by every
// child and cannot be removed.
func Install() error {
	raw, err := Program()
	if err != nil {
		return err
	}
	_, err = load(raw, unix.SECCOMP_FILTER_FLAG_TSYNC)
	return err
}

// Fallback says whether InstallNotify's error means the kernel will not
// give a listener here (EBUSY: an outer filter has one; EINVAL: a kernel
// before 5.7), so that Install's filter is the right one to load; on any
// other error the caller fails closed.
func Fallback(err error) bool {
	return errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EINVAL)
}

// InstallNotify is Install with NotifyProgram(n), loaded with
// SECCOMP_FILTER_FLAG_NEW_LISTENER (and TSYNC_ESRCH, without which the
// kernel refuses TSYNC with a listener): it returns the listener, a
// close-on-exec descriptor whose reader must answer every refusal
// (Listen). When the kernel refuses (EBUSY: a filter this process
// already has, such as a container's, has a listener; EINVAL before
// Linux 5.7), nothing is loaded and the caller loads Install's filter.
//
// Until the listener is read, a refused call waits; once every copy of
// it is closed, the kernel fails the calls waiting and every later one
// with ENOSYS. The sandbox's init keeps a copy for its whole life, so the
// calls wait rather than fail while it lives. Either way none runs.
//
// With n.Connect the filter is loaded with
// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19): a connect(2) the
// listener has taken is not interrupted by a signal (Go's preemption,
// say), which would restart it as a new call after the listener had
// already carried it out. A kernel without the flag gets the filter
// without Connect; connect says whether the filter refers connect(2).
func InstallNotify(n Notify) (f *os.File, connect bool, err error) {
	raw, err := NotifyProgram(n)
	if err != nil {
		return nil, false, err
	}
	flags := uintptr(listenerFlags)
	if n.Connect {
		f, err := installNotify(raw, flags|unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
		if !errors.Is(err, unix.EINVAL) {
			return f, err == nil, err
		}
		n.Connect = false
		if raw, err = NotifyProgram(n); err != nil {
			return nil, false, err
		}
	}
	f, err = installNotify(raw, flags)
	return f, false, err
}

// listenerFlags load a filter with a listener.
const listenerFlags = unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH | unix.SECCOMP_FILTER_FLAG_NEW_LISTENER

func installNotify(raw []bpf.RawInstruction, flags uintptr) (*os.File, error) {
	fd, err := load(raw, flags)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "seccomp-listener"), nil
}

// load sets no_new_privs and loads raw with flags; it returns what
// seccomp(2) returned (the listener with NEW_LISTENER).
func load(raw []bpf.RawInstruction, flags uintptr) (int, error) {
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, os.NewSyscallError("prctl(PR_SET_NO_NEW_PRIVS)", err)
	}
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	name := "seccomp(SECCOMP_SET_MODE_FILTER, TSYNC)"
	if flags&unix.SECCOMP_FILTER_FLAG_NEW_LISTENER != 0 {
		name = "seccomp(SECCOMP_SET_MODE_FILTER, TSYNC|TSYNC_ESRCH|NEW_LISTENER)"
	}
	if flags&unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV != 0 {
		name = "seccomp(SECCOMP_SET_MODE_FILTER, TSYNC|TSYNC_ESRCH|NEW_LISTENER|WAIT_KILLABLE_RECV)"
	}
	if e != 0 {
		return -1, os.NewSyscallError(name, e)
	}
	if flags&unix.SECCOMP_FILTER_FLAG_NEW_LISTENER == 0 && r != 0 {
		// TSYNC without TSYNC_ESRCH: the id of a thread that could not
		// be synchronised, and nothing loaded.
		return -1, fmt.Errorf("%s: thread %d has a filter of its own; nothing loaded", name, r)
	}
	return int(r), nil
}
