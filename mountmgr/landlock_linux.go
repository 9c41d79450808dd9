package mountmgr

import (
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
)

// landlockRuleset is the Landlock layer P2 puts on itself, and so on the
// server, for spec on a kernel whose Landlock ABI is abi (0: none). Its
// paths are the sandbox's, after pivot_root.
//
// Always, from ABI 6: the server cannot connect to abstract unix sockets
// or signal processes outside the sandbox (scopes).
//
// Unless spec.AllowUnixSockets, it also keeps the roots from becoming a
// channel to host processes. On the kernel data path a root is a bind of
// the host directory, so a socket file there is the host's own inode:
//
//   - bind() may make a socket file only beneath the private /tmp and
//     /dev/shm and beneath the binds (MAKE_SOCK, ABI 1), never in a root,
//     where a host process could connect to it. A rule is an inode and
//     holds for everything mounted below it, so the rule on /tmp also
//     covers the roots below /tmp, whose entries are mounted on /tmp/X
//     (tmproots_linux.go): Landlock cannot except them.
//   - connect() and sendmsg() reach a pathname socket only when the
//     sandbox made it or it lies beneath a bind (RESOLVE_UNIX, ABI 9,
//     Linux 7.1). Before ABI 9 nothing refuses a connect to a host
//     socket in a root on the kernel data path (through the FUSE view,
//     with --strict, the socket is another inode and connect() gets
//     ECONNREFUSED whatever Landlock does).
//
// Handling any file-system right makes the kernel refuse every link or
// rename across directories unless REFER is handled too and allowed
// (ABI 2); it is allowed beneath /, so renames work as before (between
// places with different MAKE_SOCK rules a directory may only move to
// where it gains nothing, but every such pair is on two mounts, where a
// rename is EXDEV anyway). ABI 1 has no REFER, so there no file-system
// right is handled at all.
func landlockRuleset(spec *Spec, abi int) linux.LandlockRuleset {
	var r linux.LandlockRuleset
	if abi >= 6 {
		r.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	if spec.AllowUnixSockets || abi < 2 {
		return r
	}
	sock := uint64(unix.LANDLOCK_ACCESS_FS_MAKE_SOCK)
	if abi >= 9 {
		sock |= unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
	}
	r.HandledFS = sock | unix.LANDLOCK_ACCESS_FS_REFER
	r.Rules = []linux.LandlockRule{
		{Path: "/", Access: unix.LANDLOCK_ACCESS_FS_REFER},
		{Path: "/tmp", Access: sock},
		{Path: "/dev/shm", Access: sock},
	}
	// What the user (or auto-bind) shows the server is the server's to
	// use, sockets included. None lies over a root: a root that would be
	// inside a bind's destination appears under its own name instead.
	for _, b := range spec.Binds {
		r.Rules = append(r.Rules, linux.LandlockRule{Path: b.Dest, Access: sock})
	}
	return r
}

// logUnixSockets says in one line what the sandbox will refuse, on this
// kernel, of the unix sockets in the roots.
func logUnixSockets(log *zap.Logger, spec *Spec, abi int) {
	switch {
	case spec.AllowUnixSockets:
		log.Debug("unix sockets in roots allowed: the server may make socket files there and, on the kernel data path, connect to host sockets there", zap.Int("landlock_abi", abi))
	case abi >= 9:
		log.Debug("landlock refuses socket files in roots and connecting to host sockets there", zap.Int("landlock_abi", abi))
	case abi >= 2:
		log.Debug("landlock refuses socket files in roots; on the kernel data path the server can still connect to host sockets there (refusing that needs landlock abi 9, Linux 7.1)", zap.Int("landlock_abi", abi))
	default:
		log.Info("no landlock here (needs abi 2, Linux 5.19): the server may make socket files in its roots, and on the kernel data path connect to host sockets there", zap.Int("landlock_abi", abi))
	}
}
