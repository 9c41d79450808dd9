// Package seccomp builds and installs the filter that confines the wrapped
// server (reference: security-battery.md §3, "Recommended filter").
//
// The filter is a deny-list over an allowed default, so an unknown but
// harmless syscall a runtime needs keeps working; what it refuses is what a
// confined program has no business with. Layout of the BPF program:
//
//	arch != AUDIT_ARCH_X86_64 (or the build's native arch)  -> KILL_PROCESS (no i386/int 0x80 bypass)
//	nr >= 0x40000000 (x32 ABI)                               -> ENOSYS
//	ioctl with (arg1 & 0xffffffff) in {TIOCSTI, TIOCLINUX}    -> EPERM   (masked: CVE-2019-10063)
//	mknod/mknodat with S_IFCHR or S_IFBLK                     -> EPERM
//	personality other than 0, 8, 0x20000, 0x20008, 0xffffffff -> EPERM
//	socket with a family other than unix, inet, inet6, netlink -> EAFNOSUPPORT
//	socket(AF_NETLINK) with a protocol other than NETLINK_ROUTE -> EPROTONOSUPPORT
//	clone with any CLONE_NEW* flag                            -> EPERM
//	the ENOSYS list (clone3, new mount API, io_uring)         -> ENOSYS (libc and libuv fall back)
//	the EPERM list (mount, unshare, setns, ptrace, bpf, ...)  -> EPERM
//	otherwise                                                 -> ALLOW
//
// The name lists are assembled by github.com/elastic/go-seccomp-bpf; the
// argument rules that need a masked 32-bit compare are written here, since
// that library compares the full 64 bits.
//
// # Reported refusals
//
// An ERRNO return is reported by the kernel only to its own audit
// subsystem. NotifyProgram is the same filter with every EPERM return
// (the EPERM list and the EPERM argument rules) replaced by
// SECCOMP_RET_USER_NOTIF, and seccomp(2) with NEW_LISTENER refused with
// EBUSY (a listener of the server's own could let its refused calls run);
// InstallNotify loads it with a listener, and Listen, in the process that
// reads the listener (rootfs's daemon), answers each notification with
// EPERM and reports it. The answer is always the refusal: the call never
// runs (no SECCOMP_USER_NOTIF_FLAG_CONTINUE), waits while nobody reads,
// and fails with ENOSYS once every copy of the listener is closed. The
// ENOSYS list and the
// socket rules stay plain returns: they are probes that libc and libuv
// make on every thread start or event loop, fall back from, and that
// would cost each a round trip to report nothing a reader needs.
//
// # Connect
//
// With Notify.Connect the filter also refers every connect(2) to the
// listener (ListenOptions.Connect), which is the network's fast path
// (netpolicy/netstack): the listener reads the address once
// (Call.ReadMem), takes a copy of the socket (Call.FD), and either
// carries the call out itself on that copy or lets it run as made
// (Answer.Continue), where the network's stack judges it. Letting a
// connect run is safe only because the fast path is not the boundary and
// never gives the server a socket of rootfs's namespace: the call may
// then run on another descriptor than the one checked (another thread
// can dup2 over the number meanwhile), and that one is the server's too.
// The filter is loaded with WAIT_KILLABLE_RECV (Linux 5.19; without it,
// no Connect), so a call the listener has carried out is not restarted
// by a signal.
package seccomp
