//go:build linux

package vfs

// A node's extended attributes. They go through /proc/self/fd/N, which
// names the inode. Symlinks have none that the view exposes (the magic link
// could not name the symlink itself without following it).

import (
	"context"
	"errors"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/internal/control"
)

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if err := n.live(); err != nil {
		return 0, n.errno("getxattr", err)
	}
	if n.kind == syscall.S_IFLNK {
		return 0, syscall.ENODATA
	}
	if unsupportedXattr(attr) {
		return 0, syscall.EOPNOTSUPP
	}
	fd, err := n.pin()
	if err != nil {
		return 0, n.errno("getxattr", err)
	}
	defer n.unpin(fd)
	sz, err := unix.Getxattr(procPath(fd), attr, dest)
	return uint32(max(sz, 0)), n.errno("getxattr", err)
}

// unsupportedXattr names the attributes the view does not support, and so
// answers EOPNOTSUPP for, as a file system without them would:
//   - POSIX ACLs: the kernel checks only mode bits on the view (the daemon
//     does not negotiate FUSE_POSIX_ACL) and the view refuses to set them,
//     so showing a host ACL would claim a protection that is not applied;
//   - SELinux labels: where SELinux runs, the kernel labels the FUSE mount
//     itself and never asks the daemon; elsewhere a host label means
//     nothing inside the sandbox.
//
// It is also what makes "ls -l" cheap: ls and libacl remember a file
// system that answered EOPNOTSUPP and stop asking, where ENODATA costs two
// GETXATTR round trips per file listed.
func unsupportedXattr(attr string) bool {
	switch attr {
	case "system.posix_acl_access", "system.posix_acl_default", "security.selinux":
		return true
	}
	return false
}

// filterXattrs drops the unsupported names from a NUL-separated list.
func filterXattrs(list []byte) []byte {
	out := list[:0]
	for len(list) > 0 {
		i := 0
		for i < len(list) && list[i] != 0 {
			i++
		}
		name := list[:i]
		if i < len(list) {
			i++ // the NUL
		}
		if !unsupportedXattr(string(name)) {
			out = append(out, list[:i]...)
		}
		list = list[i:]
	}
	return out
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	if err := n.live(); err != nil {
		return 0, n.errno("listxattr", err)
	}
	if n.kind == syscall.S_IFLNK {
		return 0, 0
	}
	fd, err := n.pin()
	if err != nil {
		return 0, n.errno("listxattr", err)
	}
	defer n.unpin(fd)
	var list []byte
	for {
		sz, err := unix.Listxattr(procPath(fd), nil)
		if err != nil {
			return 0, n.errno("listxattr", err)
		}
		list = make([]byte, sz)
		sz, err = unix.Listxattr(procPath(fd), list)
		if errors.Is(err, syscall.ERANGE) {
			continue // grew in between
		}
		if err != nil {
			return 0, n.errno("listxattr", err)
		}
		list = filterXattrs(list[:sz])
		break
	}
	switch {
	case len(dest) == 0:
		return uint32(len(list)), 0
	case len(dest) < len(list):
		return uint32(len(list)), syscall.ERANGE
	}
	return uint32(copy(dest, list)), 0
}

// userXattr: only the "user." namespace may be changed through the view; a
// root daemon setting security.capability or trusted.* for a sandboxed
// caller would hand out privileges.
func userXattr(attr string) error {
	if len(attr) > 5 && attr[:5] == "user." {
		return nil
	}
	return syscall.EPERM
}

// xattrChangeable refuses a set or remove of attr unless the view is
// writable, the name is in "user.", and the node is not a symlink.
func (n *node) xattrChangeable(attr string) error {
	if err := n.mutable(); err != nil {
		return err
	}
	if err := userXattr(attr); err != nil {
		return err
	}
	if n.kind == syscall.S_IFLNK {
		return syscall.EPERM
	}
	return nil
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	err := func() error {
		if err := n.xattrChangeable(attr); err != nil {
			return err
		}
		fd, err := n.pin()
		if err != nil {
			return err
		}
		defer n.unpin(fd)
		return unix.Setxattr(procPath(fd), attr, data, int(flags))
	}()
	errno := n.errno("setxattr", err)
	n.audit(ctx, audit.OpAttr, "", errno)
	return errno
}

// Removexattr also removes security.capability from a regular file: the
// kernel asks for that when a write or truncation must drop the file's
// capability (cap_inode_killpriv, whoever writes), as on a native file
// system. A removexattr(2) of it is checked by the kernel before it gets
// here (CAP_SETFCAP, cap_inode_removexattr), so a sandboxed caller cannot
// remove it otherwise; nothing in "security." but this one removal is
// allowed, and nothing may be set.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	err := func() error {
		if attr == capXattr && n.kind == syscall.S_IFREG && !control.On(control.NoKillPriv) {
			if err := n.mutable(); err != nil {
				return err
			}
		} else if err := n.xattrChangeable(attr); err != nil {
			return err
		}
		fd, err := n.pin()
		if err != nil {
			return err
		}
		defer n.unpin(fd)
		err = unix.Removexattr(procPath(fd), attr)
		if attr == capXattr && errors.Is(err, syscall.EPERM) && n.v.euid != 0 {
			// A daemon without CAP_SETFCAP: the host kernel drops the
			// capability on the daemon's own change that follows, as
			// it does for any writer (killPriv).
			return nil
		}
		return err
	}()
	errno := n.errno("removexattr", err)
	n.audit(ctx, audit.OpAttr, "", errno)
	return errno
}
