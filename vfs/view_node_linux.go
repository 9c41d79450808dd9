//go:build linux

package vfs

// A node's lookup, attributes and namespace changes (create a directory,
// node or symlink; link, unlink, rename): everything but file I/O
// (view_file_linux.go) and extended attributes (view_xattr_linux.go).

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

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/internal/linux"
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
		fd, err := n.v.pathAt(n.fd, name, unix.O_DIRECTORY)
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
// on a kernel file system (linux.OnKernelFS).
func (n *node) checkForeignFile(name string, st *syscall.Stat_t) error {
	fd, err := n.v.pathAt(n.fd, name, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var again syscall.Stat_t
	if linux.OnKernelFS(fd) {
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
	err := n.setattr(f, in)
	errno := n.errno("setattr", err)
	n.audit(ctx, audit.OpAttr, "", errno)
	if err != nil {
		return errno
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

func timespec(t time.Time) unix.Timespec { return unix.NsecToTimespec(t.UnixNano()) }

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

// makeChild is Mkdir, Mknod and Symlink: on a writable view, mk makes name
// in n (a kind with mode), and made finishes it; should that fail, name is
// removed again.
func (n *node) makeChild(ctx context.Context, name string, mode, kind uint32, out *fuse.EntryOut, mk func() error) (*fs.Inode, error) {
	if err := n.mutable(); err != nil {
		return nil, err
	}
	if err := mk(); err != nil {
		return nil, err
	}
	ch, err := n.made(ctx, name, mode, kind, out)
	if err != nil {
		rm := 0
		if kind == syscall.S_IFDIR {
			rm = unix.AT_REMOVEDIR
		}
		unix.Unlinkat(n.fd, name, rm)
	}
	return ch, err
}

// made finishes makeChild: it opens what was just created without
// following it, gives it to the caller and returns its Inode.
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
	ch, err := n.makeChild(ctx, name, mode, syscall.S_IFDIR, out, func() error {
		return unix.Mkdirat(n.fd, name, mode&07777)
	})
	errno := n.errno("mkdir", err)
	n.audit(ctx, audit.OpCreate, name, errno)
	return ch, errno
}

func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	kind := mode & syscall.S_IFMT
	ch, err := n.makeChild(ctx, name, mode, kind, out, func() error {
		switch kind {
		case syscall.S_IFREG, syscall.S_IFIFO, syscall.S_IFSOCK:
		default:
			return syscall.EPERM // no device nodes through the view
		}
		return unix.Mknodat(n.fd, name, mode, 0)
	})
	errno := n.errno("mknod", err)
	n.audit(ctx, audit.OpCreate, name, errno)
	return ch, errno
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, err := n.makeChild(ctx, name, 0o777, syscall.S_IFLNK, out, func() error {
		return unix.Symlinkat(target, n.fd, name)
	})
	errno := n.errno("symlink", err)
	n.audit(ctx, audit.OpCreate, name, errno)
	return ch, errno
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
	errno := n.errno("link", err)
	n.audit(ctx, audit.OpCreate, name, errno)
	return ch, errno
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	errno := n.errno("unlink", n.remove(name, 0))
	n.audit(ctx, audit.OpDelete, name, errno)
	return errno
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	errno := n.errno("rmdir", n.remove(name, unix.AT_REMOVEDIR))
	n.audit(ctx, audit.OpDelete, name, errno)
	return errno
}

func (n *node) remove(name string, flags int) error {
	if err := n.mutable(); err != nil {
		return err
	}
	return unix.Unlinkat(n.fd, name, flags)
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
	errno := n.errno("rename", err)
	n.auditRename(ctx, name, newParent, newName, errno)
	return errno
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
