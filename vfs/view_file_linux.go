//go:build linux

package vfs

// A node's regular-file operations: open, create and O_TMPFILE, the flags
// of the daemon's own descriptor, truncation, and the set-ID and file
// capability clearing every data change does first (killPriv). The open
// handle's own operations are in view_handle_linux.go.

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/internal/control"
)

// truncateAt sets the size through a writable handle, or else through a
// descriptor reopened for writing from fd (pinned). It first does what a
// size change does to set-ID bits and file capabilities (killPriv), whether
// or not the kernel asked (FATTR_KILL_SUIDGID).
func (n *node) truncateAt(fd int, fh *fileHandle, in *fuse.SetAttrIn) error {
	size, _ := in.GetSize()
	switch n.kind {
	case syscall.S_IFDIR:
		return syscall.EISDIR
	case syscall.S_IFREG:
	default:
		return syscall.EINVAL
	}
	if fh != nil && fh.writable {
		if err := killPriv(fh.fd); err != nil {
			return err
		}
		return syscall.Ftruncate(fh.fd, int64(size))
	}
	wfd, err := openat(unix.AT_FDCWD, procPath(fd), unix.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(wfd)
	if err := killPriv(wfd); err != nil {
		return err
	}
	return syscall.Ftruncate(wfd, int64(size))
}

// capXattr is the file capability attribute (vfs_cap_data).
const capXattr = "security.capability"

// killPriv does to the regular file open on fd what the kernel does before
// a change to a file's data or size by a caller without CAP_FSETID: it
// removes the file capability (security.capability), clears S_ISUID, and
// clears S_ISGID when the file is group-executable (without group execute
// the bit marks mandatory locking and grants nothing). Under
// CAP_HANDLE_KILLPRIV_V2 the kernel leaves that to the daemon, which holds
// CAP_FSETID and so would keep the bits on its own writes. It runs before
// every write, fallocate, copy_file_range and truncation, whoever the
// caller: the kernel flags some of those requests for callers without
// CAP_FSETID (FUSE_WRITE_KILL_SUIDGID, FATTR_KILL_SUIDGID,
// FUSE_OPEN_KILL_SUIDGID) but flags no fallocate or copy_file_range, so the
// view treats every caller as one without CAP_FSETID (package
// documentation, Set-ID bits and file capabilities).
//
// EPERM is ignored: a root daemon meets it only on an immutable or
// append-only file, whose data cannot change either, and a daemon that is
// neither root nor the owner lacks CAP_FSETID, so the host kernel clears
// the bits on the daemon's own change.
func killPriv(fd int) error {
	if control.On(control.NoKillPriv) {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil
	}
	err := unix.Fremovexattr(fd, capXattr)
	if err != nil && !errors.Is(err, syscall.ENODATA) && !errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.EPERM) {
		return err
	}
	m := st.Mode
	clear := uint32(0)
	if m&syscall.S_ISUID != 0 {
		clear |= syscall.S_ISUID
	}
	if m&(syscall.S_ISGID|syscall.S_IXGRP) == syscall.S_ISGID|syscall.S_IXGRP {
		clear |= syscall.S_ISGID
	}
	if clear == 0 {
		return nil
	}
	if err := syscall.Fchmod(fd, m&07777&^clear); err != nil && !errors.Is(err, syscall.EPERM) {
		return err
	}
	return nil
}

// truncOpened truncates the regular file just opened on fd (with the open
// flags of) to zero, as O_TRUNC would, after killPriv.
func truncOpened(fd int, of int) error {
	if err := killPriv(fd); err != nil {
		return err
	}
	if of&unix.O_ACCMODE != unix.O_RDONLY {
		return syscall.Ftruncate(fd, 0)
	}
	wfd, err := openat(unix.AT_FDCWD, procPath(fd), unix.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(wfd)
	return syscall.Ftruncate(wfd, 0)
}

// openFlags are the open(2) flags the view passes on when it reopens a file.
func openFlags(flags uint32) int {
	return int(flags) &^ (syscall.O_CREAT | syscall.O_EXCL | syscall.O_NOCTTY | syscall.O_NOFOLLOW | syscall.O_DIRECTORY)
}

func writes(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, err := n.open(flags)
	errno := n.errno("open", err)
	if writes(flags) {
		n.audit(ctx, audit.OpWrite, "", errno)
	} else if err == nil {
		n.auditRead(ctx)
	}
	if err != nil {
		return nil, 0, errno
	}
	fh.prefill()
	return fh, fh.replyFlags(ctx), 0
}

func (n *node) open(flags uint32) (*fileHandle, error) {
	if err := n.live(); err != nil {
		return nil, err
	}
	if writes(flags) && n.v.opts.ReadOnly {
		return nil, syscall.EROFS
	}
	switch n.kind {
	case syscall.S_IFREG:
	case syscall.S_IFDIR:
		return nil, syscall.EISDIR
	case syscall.S_IFLNK:
		return nil, syscall.ELOOP
	default:
		return nil, syscall.EACCES
	}
	// The kernel sends no O_TRUNC (the view does not negotiate
	// FUSE_ATOMIC_O_TRUNC: it truncates with SETATTR), but should one
	// come, the bits go before the data, as in truncateAt.
	trunc := flags&syscall.O_TRUNC != 0
	fd, err := n.v.withFDs(func() (int, error) { return n.reopen(flags &^ syscall.O_TRUNC) })
	if err != nil {
		return nil, err
	}
	if trunc {
		if err := truncOpened(fd, n.handleFlags(flags)); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	return n.newHandle(fd, flags), nil
}

// handleFlags are the open(2) flags of the daemon's own descriptor. Under
// the writeback cache the kernel does appends itself (O_APPEND is dropped)
// and may read pages of a file opened write-only to fill partial pages, so
// write-only becomes read-write: the data read goes to the page cache, never
// to the write-only caller (the kernel checked the caller's access at open).
func (n *node) handleFlags(flags uint32) int {
	of := openFlags(flags)
	if n.v.writeback() {
		of &^= unix.O_APPEND
		if of&unix.O_ACCMODE == unix.O_WRONLY {
			of = of&^unix.O_ACCMODE | unix.O_RDWR
		}
	}
	return of
}

// reopen opens the node's inode through /proc/self/fd/N, which names the
// inode the O_PATH descriptor holds wherever it has moved: no path is
// resolved on the host. A daemon that may not read a write-only file opens
// it write-only; the kernel's page fill then fails (EIO) on partial pages.
func (n *node) reopen(flags uint32) (int, error) {
	pfd, err := n.pin()
	if err != nil {
		return -1, err
	}
	defer n.unpin(pfd)
	of := n.handleFlags(flags)
	fd, err := openat(unix.AT_FDCWD, procPath(pfd), of, 0)
	if errors.Is(err, syscall.EACCES) && of&unix.O_ACCMODE != openFlags(flags)&unix.O_ACCMODE {
		fd, err = openat(unix.AT_FDCWD, procPath(pfd), of&^unix.O_ACCMODE|unix.O_WRONLY, 0)
	}
	return fd, err
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, err := n.create(ctx, name, flags, mode, out)
	errno := n.errno("create", err)
	n.audit(ctx, audit.OpCreate, name, errno)
	if err != nil {
		return nil, nil, 0, errno
	}
	return ch, fh, fh.replyFlags(ctx), 0
}

func (n *node) create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, *fileHandle, error) {
	if err := n.mutable(); err != nil {
		return nil, nil, err
	}
	of := n.handleFlags(flags) | unix.O_NOFOLLOW
	var fd int
	var err error
	created := false
	for range 8 {
		fd, err = openat(n.fd, name, of|unix.O_CREAT|unix.O_EXCL, mode&07777)
		if err == nil {
			created = true
			break
		}
		if !errors.Is(err, syscall.EEXIST) || flags&syscall.O_EXCL != 0 {
			return nil, nil, err
		}
		// It exists and the caller did not ask for O_EXCL: open it, and do
		// not take it over. O_NONBLOCK so that a FIFO the host put there
		// cannot block the daemon; only a regular file is kept, and it is
		// truncated (O_TRUNC) only then, after killPriv.
		fd, err = openat(n.fd, name, of&^unix.O_TRUNC|unix.O_NONBLOCK, 0)
		if errors.Is(err, syscall.EACCES) && of&unix.O_ACCMODE != openFlags(flags)&unix.O_ACCMODE {
			of = of&^unix.O_ACCMODE | unix.O_WRONLY // see reopen
			fd, err = openat(n.fd, name, of&^unix.O_TRUNC|unix.O_NONBLOCK, 0)
		}
		if err == nil {
			var st syscall.Stat_t
			if err = syscall.Fstat(fd, &st); err == nil && st.Mode&syscall.S_IFMT != syscall.S_IFREG {
				err = syscall.EACCES
			}
			if err == nil && of&unix.O_TRUNC != 0 {
				err = truncOpened(fd, of)
			}
			if err == nil && of&unix.O_NONBLOCK == 0 {
				_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, of&^(unix.O_ACCMODE|unix.O_CREAT|unix.O_EXCL|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC))
			}
			if err != nil {
				unix.Close(fd)
			}
			break
		}
		if !errors.Is(err, syscall.ENOENT) {
			break
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if created {
		if err := n.settle(ctx, fd, mode, syscall.S_IFREG); err != nil {
			unix.Close(fd)
			unix.Unlinkat(n.fd, name, 0)
			return nil, nil, err
		}
	}
	return n.adoptOpened(ctx, name, fd, flags, out)
}

// adoptOpened makes the child node and the handle of fd, a regular file
// just created or opened in n under name ("" for O_TMPFILE) with flags: the
// node holds an O_PATH descriptor of the inode fd is open on (pinOpened), so
// it needs no name to be pinned. fd is closed on error.
func (n *node) adoptOpened(ctx context.Context, name string, fd int, flags uint32, out *fuse.EntryOut) (*fs.Inode, *fileHandle, error) {
	pfd, st, err := pinOpened(fd)
	if err != nil {
		return nil, nil, err
	}
	out.Attr.FromStat(st)
	ch, cn := n.v.newChild(ctx, n.EmbeddedInode(), n, name, n.inc, pfd, st, false, out)
	return ch, cn.newHandle(fd, flags), nil
}

var _ = (fs.NodeTmpfiler)((*node)(nil))

// Tmpfile makes an unnamed file in n (O_TMPFILE); linking it anywhere but
// this root is EXDEV like any other link.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, err := func() (*fs.Inode, *fileHandle, error) {
		if err := n.mutable(); err != nil {
			return nil, nil, err
		}
		fd, err := openat(n.fd, ".", n.handleFlags(flags)|unix.O_TMPFILE, mode&07777)
		if err != nil {
			return nil, nil, err
		}
		if err := n.settle(ctx, fd, mode, syscall.S_IFREG); err != nil {
			unix.Close(fd)
			return nil, nil, err
		}
		return n.adoptOpened(ctx, "", fd, flags, out)
	}()
	if err != nil {
		return nil, nil, 0, n.errno("tmpfile", err)
	}
	return ch, fh, fh.replyFlags(ctx), 0
}

func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if fh, ok := f.(*fileHandle); ok && fh != nil {
		return fh.Fsync(ctx, flags)
	}
	if err := n.live(); err != nil {
		return n.errno("fsync", err)
	}
	return 0
}

func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	in, ok1 := fhIn.(*fileHandle)
	o, ok2 := fhOut.(*fileHandle)
	if !ok1 || !ok2 {
		return 0, syscall.EBADF
	}
	if err := in.n.live(); err != nil {
		return 0, n.errno("copy_file_range", err)
	}
	if err := o.beforeChange(); err != nil {
		return 0, n.errno("copy_file_range", err)
	}
	ri, ro := int64(offIn), int64(offOut)
	k, err := unix.CopyFileRange(in.fd, &ri, o.fd, &ro, int(length), int(flags))
	return uint32(max(k, 0)), n.errno("copy_file_range", err)
}
