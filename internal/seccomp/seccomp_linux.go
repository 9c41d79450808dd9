package seccomp

import (
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

// seccomp_data offsets.
const (
	offNr   = 0
	offArch = 4
)

func offArgLo(i int) uint32 { return 16 + 8*uint32(i) } // little-endian low word

type rule struct {
	name   string
	action bpf.Instruction
	// in: match when (argLo & mask) is one of vals; when not is set,
	// match when it is none of them.
	arg  int
	mask uint32
	vals []uint32
	not  bool
}

func argRules() []rule {
	return []rule{
		{name: "ioctl", action: ret(unix.EPERM), arg: 1, mask: 0xffffffff, vals: []uint32{unix.TIOCSTI, unix.TIOCLINUX}},
		{name: "mknod", action: ret(unix.EPERM), arg: 1, mask: unix.S_IFMT, vals: []uint32{unix.S_IFCHR, unix.S_IFBLK}},
		{name: "mknodat", action: ret(unix.EPERM), arg: 2, mask: unix.S_IFMT, vals: []uint32{unix.S_IFCHR, unix.S_IFBLK}},
		{name: "personality", action: ret(unix.EPERM), arg: 0, mask: 0xffffffff, vals: []uint32{0, 8, 0x20000, 0x20008, 0xffffffff}, not: true},
		{name: "socket", action: ret(unix.EAFNOSUPPORT), arg: 0, mask: 0xffffffff, vals: []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}, not: true},
		{name: "clone", action: ret(unix.EPERM), arg: 0, mask: CloneNSFlags, vals: []uint32{0}, not: true},
		// No set-user-ID or set-group-ID bits on anything the server makes: files it creates in a
		// root are real host files, owned by uid 0 when rootfs runs as root, so such a bit would
		// hand host users root (security-battery A12). openat2 hides its mode in a struct the
		// filter cannot read, so it is ENOSYS (callers fall back to openat).
		{name: "chmod", action: ret(unix.EPERM), arg: 1, mask: setID, vals: setIDVals},
		{name: "fchmod", action: ret(unix.EPERM), arg: 1, mask: setID, vals: setIDVals},
		{name: "fchmodat", action: ret(unix.EPERM), arg: 2, mask: setID, vals: setIDVals},
		{name: "fchmodat2", action: ret(unix.EPERM), arg: 2, mask: setID, vals: setIDVals},
		{name: "creat", action: ret(unix.EPERM), arg: 1, mask: setID, vals: setIDVals},
		{name: "open", action: ret(unix.EPERM), arg: 2, mask: setID, vals: setIDVals},
		{name: "openat", action: ret(unix.EPERM), arg: 3, mask: setID, vals: setIDVals},
		{name: "mknod", action: ret(unix.EPERM), arg: 1, mask: setID, vals: setIDVals},
		{name: "mknodat", action: ret(unix.EPERM), arg: 2, mask: setID, vals: setIDVals},
	}
}

// Program returns the assembled filter for the native architecture.
func Program() ([]bpf.RawInstruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp arch: %w", err)
	}
	policy := libseccomp.Policy{
		DefaultAction: libseccomp.ActionAllow,
		Syscalls: []libseccomp.SyscallGroup{
			{Names: known(info, ENOSYSList), Action: libseccomp.ActionErrno | libseccomp.Action(unix.ENOSYS)},
			{Names: known(info, EPERMList), Action: libseccomp.ActionErrno | libseccomp.Action(unix.EPERM)},
		},
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
	for _, r := range argRules() {
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
		if r.not {
			block = append(block, r.action)
		} else {
			// no value matched: skip the action
			block = append(block, bpf.Jump{Skip: 1}, r.action)
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
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_SET_NO_NEW_PRIVS)", err)
	}
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if e != 0 {
		return os.NewSyscallError("seccomp(SECCOMP_SET_MODE_FILTER, TSYNC)", e)
	}
	return nil
}
