//go:build linux

package vfs

import (
	"context"
	"errors"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	g := n.v.hostGen()
	ch, err := n.lookup(ctx, name, out)
	if n.shortCache() || n.v.hostGen() != g {
		// The directory is not watched (or the watcher stopped), or a
		// host change raced this lookup: this reply (or this negative
		// entry) is cached for the short timeout only. (hostGen moves
		// only with a watcher.)
		out.SetEntryTimeout(n.v.shortTimeout())
		out.SetAttrTimeout(n.v.shortTimeout())
	}
	return ch, n.errno("lookup", err)
}

// lookup stats name beneath n without following it. Only a directory is
// opened (O_PATH|O_NOFOLLOW|O_DIRECTORY) and kept; the identity the node
// records for anything else is the one fstatat saw, and pin checks it
// again at each use.
func (n *node) lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, error) {
	if err := n.live(); err != nil {
		return nil, err
	}
	for range 8 {
		var st syscall.Stat_t
		err := retryEINTR(func() error {
			return unix.Fstatat(n.fd, name, (*unix.Stat_t)(unsafe.Pointer(&st)), unix.AT_SYMLINK_NOFOLLOW)
		})
		if err != nil {
			return nil, err
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			if st.Dev != n.dev {
				// A file of another file system, bind-mounted here on
				// the host: refused if that is a kernel file system,
				// as a directory would be.
				if err := n.checkForeignFile(name, &st); err != nil {
					return nil, err
				}
			}
			return n.adopt(ctx, name, -1, &st, out)
		}
		fd, err := n.v.withFDs(func() (int, error) {
			return openat(n.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
		})
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOENT) {
			continue // replaced on the host between the two calls
		}
		if err != nil {
			return nil, err
		}
		if err := syscall.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, err
		}
		return n.adopt(ctx, name, fd, &st, out)
	}
	return nil, syscall.EAGAIN
}

// checkForeignFile refuses name (beneath n, described by st) when it lives
// on a kernel file system (deniedFS).
func (n *node) checkForeignFile(name string, st *syscall.Stat_t) error {
	fd, err := n.v.withFDs(func() (int, error) { return openat(n.fd, name, unix.O_PATH|unix.O_NOFOLLOW, 0) })
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	var again syscall.Stat_t
	if err := unix.Fstatfs(fd, &sfs); err != nil || deniedFS[int64(sfs.Type)] {
		return syscall.EACCES
	}
	if err := syscall.Fstat(fd, &again); err != nil || again.Dev != st.Dev || again.Ino != st.Ino {
		return syscall.EAGAIN // replaced in between; the kernel retries
	}
	return nil
}

// stat fstats the handle's descriptor when there is one, else the node's
// inode (for a node without a descriptor, by its name beneath the parent,
// checked against the node's identity).
func (n *node) stat(f fs.FileHandle, st *syscall.Stat_t) error {
	if fh, ok := f.(*fileHandle); ok && fh != nil {
		return syscall.Fstat(fh.fd, st)
	}
	if n.fd >= 0 {
		return syscall.Fstat(n.fd, st)
	}
	name, pn, err := n.parentNode()
	if err == nil {
		err = retryEINTR(func() error {
			return unix.Fstatat(pn.fd, name, (*unix.Stat_t)(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW)
		})
		runtime.KeepAlive(pn)
		if err == nil && !n.same(st) {
			err = syscall.ESTALE
		}
	}
	if err != nil {
		fd, ok := n.pinOpen() // unlinked or renamed, but still open
		if !ok {
			return staleIfGone(err)
		}
		defer unix.Close(fd)
		return syscall.Fstat(fd, st)
	}
	return nil
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if err := n.live(); err != nil {
		return n.errno("getattr", err)
	}
	var st syscall.Stat_t
	if err := n.stat(f, &st); err != nil {
		return n.errno("getattr", err)
	}
	out.FromStat(&st)
	n.attrTimes(out)
	return 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if err := n.setattr(f, in); err != nil {
		return n.errno("setattr", err)
	}
	var st syscall.Stat_t
	if err := n.stat(f, &st); err != nil {
		return n.errno("setattr", err)
	}
	out.FromStat(&st)
	n.seen(&st)
	n.attrTimes(out)
	return 0
}

func (n *node) setattr(f fs.FileHandle, in *fuse.SetAttrIn) error {
	if err := n.mutable(); err != nil {
		return err
	}
	fh, _ := f.(*fileHandle)
	if _, size := in.GetSize(); size && fh != nil && fh.writable &&
		in.Valid&^(fuse.FATTR_FH|fuse.FATTR_SIZE|fuse.FATTR_KILL_SUIDGID|fuse.FATTR_LOCKOWNER) == 0 {
		// ftruncate: the writable handle is all it needs, even for a
		// file that has lost its name.
		return n.truncateAt(-1, fh, in)
	}
	fd, err := n.pin()
	if err != nil {
		return err
	}
	defer n.unpin(fd)
	if mode, ok := in.GetMode(); ok {
		if n.kind == syscall.S_IFLNK {
			return syscall.EOPNOTSUPP
		}
		if err := syscall.Chmod(procPath(fd), mode); err != nil {
			return err
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		u, g := -1, -1
		if uok {
			u = int(uid)
		}
		if gok {
			g = int(gid)
		}
		if err := unix.Fchownat(fd, "", u, g, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if _, ok := in.GetSize(); ok {
		if err := n.truncateAt(fd, fh, in); err != nil {
			return err
		}
	}
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if mok || aok {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if aok {
			ts[0] = timespec(atime)
		}
		if mok {
			ts[1] = timespec(mtime)
		}
		if err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

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

func timespec(t time.Time) unix.Timespec { return unix.NsecToTimespec(t.UnixNano()) }

// capXattr is the file capability attribute (vfs_cap_data).
const capXattr = "security.capability"

// testNoKillPriv restores the view as it was before it handled set-ID bits
// and file capabilities on data changes, for the negative controls of the
// set-ID tests: no killPriv (the daemon changes data with its own
// CAP_FSETID), passthrough for every file with the daemon's credentials
// (PassthroughFd, lowerForBacking), and security.capability never removed.
// Set in export_test.go.
var testNoKillPriv = false

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
	if testNoKillPriv {
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
	if err != nil {
		return nil, 0, n.errno("open", err)
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

// caller returns the uid and gid to give a new file, or ok=false when the
// daemon cannot (or need not) chown.
func (n *node) owner(ctx context.Context) (uid, gid int, ok bool) {
	if n.v.euid != 0 {
		return 0, 0, false
	}
	c, found := fuse.FromContext(ctx)
	if !found {
		return 0, 0, false
	}
	uid, gid = int(c.Uid), int(c.Gid)
	var st syscall.Stat_t
	if err := syscall.Fstat(n.fd, &st); err == nil && st.Mode&syscall.S_ISGID != 0 {
		gid = -1 // inherit the set-group-ID directory's group, as the kernel did
	}
	if uid == 0 && (gid == -1 || gid == 0) {
		return 0, 0, false
	}
	return uid, gid, true
}

// settle gives a newly created inode (O_PATH or open fd) to the caller and
// undoes the daemon's umask, so the mode is the one the caller asked for
// (already masked by the caller's umask in the kernel).
func (n *node) settle(ctx context.Context, fd int, mode uint32, kind uint32) error {
	if uid, gid, ok := n.owner(ctx); ok {
		if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if kind == syscall.S_IFLNK {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err
	}
	want := mode & 07777
	if kind == syscall.S_IFDIR {
		want |= st.Mode & syscall.S_ISGID
	}
	if st.Mode&07777 != want {
		return syscall.Chmod(procPath(fd), want)
	}
	return nil
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, err := n.create(ctx, name, flags, mode, out)
	if err != nil {
		return nil, nil, 0, n.errno("create", err)
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
	pfd, st, err := pinOpened(fd)
	if err != nil {
		return nil, nil, err
	}
	out.Attr.FromStat(st)
	ch, cn := n.v.newChild(ctx, n.EmbeddedInode(), n, name, n.inc, pfd, st, false, out)
	return ch, cn.newHandle(fd, flags), nil
}

// made finishes Mkdir, Mknod and Symlink: it opens what was just created
// without following it, gives it to the caller and returns its Inode.
func (n *node) made(ctx context.Context, name string, mode, kind uint32, out *fuse.EntryOut) (*fs.Inode, error) {
	fd, err := openat(n.fd, name, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != kind {
		unix.Close(fd)
		return nil, syscall.EIO // replaced on the host in between; never touch it
	}
	if err := n.settle(ctx, fd, mode, kind); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := syscall.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return n.adopt(ctx, name, fd, &st, out)
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, err := func() (*fs.Inode, error) {
		if err := n.mutable(); err != nil {
			return nil, err
		}
		if err := unix.Mkdirat(n.fd, name, mode&07777); err != nil {
			return nil, err
		}
		ch, err := n.made(ctx, name, mode, syscall.S_IFDIR, out)
		if err != nil {
			unix.Unlinkat(n.fd, name, unix.AT_REMOVEDIR)
		}
		return ch, err
	}()
	return ch, n.errno("mkdir", err)
}

func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, err := func() (*fs.Inode, error) {
		if err := n.mutable(); err != nil {
			return nil, err
		}
		kind := mode & syscall.S_IFMT
		switch kind {
		case syscall.S_IFREG, syscall.S_IFIFO, syscall.S_IFSOCK:
		default:
			return nil, syscall.EPERM // no device nodes through the view
		}
		if err := unix.Mknodat(n.fd, name, mode, 0); err != nil {
			return nil, err
		}
		ch, err := n.made(ctx, name, mode, kind, out)
		if err != nil {
			unix.Unlinkat(n.fd, name, 0)
		}
		return ch, err
	}()
	return ch, n.errno("mknod", err)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, err := func() (*fs.Inode, error) {
		if err := n.mutable(); err != nil {
			return nil, err
		}
		if err := unix.Symlinkat(target, n.fd, name); err != nil {
			return nil, err
		}
		ch, err := n.made(ctx, name, 0o777, syscall.S_IFLNK, out)
		if err != nil {
			unix.Unlinkat(n.fd, name, 0)
		}
		return ch, err
	}()
	return ch, n.errno("symlink", err)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if err := n.live(); err != nil {
		return nil, n.errno("readlink", err)
	}
	fd, err := n.pin()
	if err != nil {
		return nil, n.errno("readlink", err)
	}
	defer n.unpin(fd)
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		k, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return nil, n.errno("readlink", err)
		}
		if k < size {
			return buf[:k], 0
		}
	}
}

// peer returns the node of other when it belongs to the same root
// incarnation as n: links and renames never cross roots (EXDEV), so no inode
// of one root becomes reachable from another and revocation cannot be
// bypassed.
func (n *node) peer(other fs.InodeEmbedder) (*node, error) {
	switch o := other.(type) {
	case *node:
		if o.inc != n.inc {
			return nil, syscall.EXDEV
		}
		return o, nil
	case *rootDir:
		return nil, syscall.EPERM
	}
	return nil, syscall.EXDEV
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, err := func() (*fs.Inode, error) {
		if err := n.mutable(); err != nil {
			return nil, err
		}
		t, err := n.peer(target)
		if err != nil {
			return nil, err
		}
		tfd, err := t.pin()
		if err != nil {
			return nil, err
		}
		defer t.unpin(tfd)
		err = unix.Linkat(tfd, "", n.fd, name, unix.AT_EMPTY_PATH)
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EPERM) {
			// No CAP_DAC_READ_SEARCH: go through the inode's magic link.
			err = unix.Linkat(unix.AT_FDCWD, procPath(tfd), n.fd, name, unix.AT_SYMLINK_FOLLOW)
		}
		if err != nil {
			return nil, err
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(tfd, &st); err != nil {
			return nil, err
		}
		out.Attr.FromStat(&st)
		t.cacheTimes(out)
		return t.EmbeddedInode(), nil
	}()
	return ch, n.errno("link", err)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if err := n.mutable(); err != nil {
		return n.errno("unlink", err)
	}
	return n.errno("unlink", unix.Unlinkat(n.fd, name, 0))
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if err := n.mutable(); err != nil {
		return n.errno("rmdir", err)
	}
	return n.errno("rmdir", unix.Unlinkat(n.fd, name, unix.AT_REMOVEDIR))
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	err := func() error {
		if err := n.mutable(); err != nil {
			return err
		}
		np, err := n.peer(newParent)
		if err != nil {
			return err
		}
		if flags&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE) != 0 {
			return syscall.EINVAL // RENAME_WHITEOUT is for overlay file systems
		}
		return unix.Renameat2(n.fd, name, np.fd, newName, uint(flags))
	}()
	return n.errno("rename", err)
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if err := n.live(); err != nil {
		return nil, 0, n.errno("opendir", err)
	}
	return &dirHandle{n: n}, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	if err := n.live(); err != nil {
		return n.errno("statfs", err)
	}
	fd, err := n.pin()
	if err != nil {
		return n.errno("statfs", err)
	}
	defer n.unpin(fd)
	var s syscall.Statfs_t
	if err := syscall.Fstatfs(fd, &s); err != nil {
		return n.errno("statfs", err)
	}
	out.FromStatfsT(&s)
	return 0
}

// Extended attributes go through /proc/self/fd/N, which names the inode.
// Symlinks have none that the view exposes (the magic link could not name
// the symlink itself without following it).

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
// caller would hand out privileges (security battery D23).
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
	return n.errno("setxattr", err)
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
		if attr == capXattr && n.kind == syscall.S_IFREG && !testNoKillPriv {
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
	return n.errno("removexattr", err)
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
	if err := o.n.mutable(); err != nil {
		return 0, n.errno("copy_file_range", err)
	}
	if err := killPriv(o.fd); err != nil {
		return 0, n.errno("copy_file_range", err)
	}
	ri, ro := int64(offIn), int64(offOut)
	k, err := unix.CopyFileRange(in.fd, &ri, o.fd, &ro, int(length), int(flags))
	return uint32(max(k, 0)), n.errno("copy_file_range", err)
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
		pfd, st, err := pinOpened(fd)
		if err != nil {
			return nil, nil, err
		}
		out.Attr.FromStat(st)
		ch, cn := n.v.newChild(ctx, n.EmbeddedInode(), n, "", n.inc, pfd, st, false, out)
		return ch, cn.newHandle(fd, flags), nil
	}()
	if err != nil {
		return nil, nil, 0, n.errno("tmpfile", err)
	}
	return ch, fh, fh.replyFlags(ctx), 0
}
