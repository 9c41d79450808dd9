//go:build linux

package vfs

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
)

// fileHandle is an open regular file. Every operation but Release fails with
// EIO once its root is revoked. Release is never concurrent with another
// operation on the handle (the kernel guarantees it), so fd stays valid for
// every call that reaches it.
type fileHandle struct {
	n        *node
	fd       int
	writable bool
	// noflush: the OPEN reply carried FOPEN_NOFLUSH, so no close of this
	// handle's descriptors sends FLUSH (see flushes, locks_linux.go);
	// opener is the pid of the process that opened it, for its RELEASE.
	noflush bool
	opener  atomic.Uint32
}

// newHandle makes the handle of fd, open on n (a regular file) with flags.
func (n *node) newHandle(fd int, flags uint32) *fileHandle {
	h := &fileHandle{
		n:        n,
		fd:       fd,
		writable: flags&syscall.O_ACCMODE != syscall.O_RDONLY,
	}
	h.noflush = !h.flushes()
	f := n.file
	if h.writable {
		f.writers.Add(1)
	}
	f.hmu.Lock()
	if f.handles == nil {
		f.handles = map[*fileHandle]struct{}{}
	}
	f.handles[h] = struct{}{}
	if len(f.handles) == 1 {
		n.v.sw.open.track(n, true)
	}
	f.hmu.Unlock()
	return h
}

var (
	_ = (fs.FileReader)((*fileHandle)(nil))
	_ = (fs.FileWriter)((*fileHandle)(nil))
	_ = (fs.FileFlusher)((*fileHandle)(nil))
	_ = (fs.FileFsyncer)((*fileHandle)(nil))
	_ = (fs.FileReleaser)((*fileHandle)(nil))
	_ = (fs.FileGetattrer)((*fileHandle)(nil))
	_ = (fs.FileLseeker)((*fileHandle)(nil))
	_ = (fs.FileAllocater)((*fileHandle)(nil))
	_ = (fs.FileGetlker)((*fileHandle)(nil))
	_ = (fs.FileSetlker)((*fileHandle)(nil))
	_ = (fs.FileSetlkwer)((*fileHandle)(nil))
	_ = (fs.FilePassthroughFder)((*fileHandle)(nil))
)

func (h *fileHandle) errno(op string, err error) syscall.Errno { return h.n.errno(op, err) }

// PassthroughFd offers the descriptor for FUSE passthrough only when the
// view was configured for it (Options.Passthrough): a passthrough handle
// cannot be revoked.
//
// Files on another FUSE file system are served by the daemon: stacking them
// could exceed the kernel's stack depth, and one failed registration turns
// passthrough off for the whole mount in go-fuse.
//
// go-fuse registers the descriptor right after this returns, on the same
// thread; the kernel then does every passthrough read, write and mmap with
// that thread's credentials. lowerForBacking drops its capabilities first
// (backing_linux.go), so passthrough writes clear set-ID bits as the
// caller's own would, and a view not mounted through View.Mount, where
// they could not be restored, gets no passthrough handle at all. A file
// that is set-ID or carries a file capability when it is opened is served
// by the daemon all the same: a write through a shared mapping clears
// nothing on a native file system, and the daemon clears the bits on
// every write it serves (killPriv).
func (h *fileHandle) PassthroughFd() (int, bool) {
	if !h.n.v.opts.Passthrough || h.n.inc.revoked.Load() {
		return -1, false
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(h.fd, &sfs); err != nil || sfs.Type == unix.FUSE_SUPER_MAGIC {
		return -1, false
	}
	if !control.On(control.NoKillPriv) && privileged(h.fd) {
		return -1, false
	}
	if !h.n.v.lowerForBacking() {
		return -1, false
	}
	h.n.v.passthroughWriter(h)
	return h.fd, true
}

// privileged reports whether the file open on fd is set-user-ID,
// set-group-ID and group-executable, or carries a file capability (or
// cannot be examined).
func privileged(fd int) bool {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return true
	}
	if st.Mode&syscall.S_ISUID != 0 || st.Mode&(syscall.S_ISGID|syscall.S_IXGRP) == syscall.S_ISGID|syscall.S_IXGRP {
		return true
	}
	_, err := unix.Fgetxattr(fd, capXattr, nil)
	return err == nil
}

// prefillMax bounds the files prefill pushes.
const prefillMax = 16 << 10

// prefill pushes a small file's data into the kernel's page cache
// (FUSE_NOTIFY_STORE) at its first read-only OPEN through the view, before
// the reply, so that the first read(2) finds it there instead of sending
// a READ round trip: reading every file of a tree right after the sandbox
// starts (grep -r) costs OPEN and READ per file, and the store costs the
// daemon a pread and a write, no wake-up of the reader. The OPEN reply
// keeps the cache (FOPEN_KEEP_CACHE). Only once per node: later opens find
// the pages, or the kernel dropped them and READ fills them as usual. The
// data must not be older than the file: a change between the pread and
// the store (a host write: the file's times or size differ afterwards; a
// write through the view: a writable handle is open) drops what was
// stored, as the host watcher would.
func (h *fileHandle) prefill() {
	n := h.n
	f := n.file
	if control.On(control.NoPrefill) || h.writable || n.v.opts.Passthrough || f.prefilled.Load() || f.writers.Load() != 0 {
		return
	}
	var st, after syscall.Stat_t
	if syscall.Fstat(h.fd, &st) != nil || st.Size <= 0 || st.Size > prefillMax {
		return
	}
	if !f.prefilled.CompareAndSwap(false, true) {
		return
	}
	// Opening a file does not change its access time, so neither may this
	// read (O_NOATIME: the daemon is the owner or has CAP_FOWNER; else
	// there is no prefill). Reads the kernel then serves from the pages
	// leave the host's atime alone, as every cached read does. The handle
	// is not the kernel's yet: nothing else uses its descriptor meanwhile.
	fl, err := unix.FcntlInt(uintptr(h.fd), unix.F_GETFL, 0)
	if err != nil {
		return
	}
	if _, err := unix.FcntlInt(uintptr(h.fd), unix.F_SETFL, fl|unix.O_NOATIME); err != nil {
		return
	}
	buf := make([]byte, st.Size)
	k, err := syscall.Pread(h.fd, buf, 0)
	unix.FcntlInt(uintptr(h.fd), unix.F_SETFL, fl)
	if err != nil || int64(k) != st.Size {
		return
	}
	if n.WriteCache(0, buf) != 0 {
		return
	}
	if syscall.Fstat(h.fd, &after) != nil || after.Size != st.Size || after.Mtim != st.Mtim || after.Ctim != st.Ctim || f.writers.Load() != 0 {
		n.NotifyContent(0, 0)
	}
}

func (h *fileHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	testStats.reads.Add(1)
	if err := h.n.live(); err != nil {
		return nil, h.errno("read", err)
	}
	return fuse.ReadResultFd(uintptr(h.fd), off, len(dest)), 0
}

// beforeChange readies h's file for a change to its data: it refuses one
// on a revoked root or a read-only view, then clears the set-ID bits and
// file capability as the change would natively (killPriv).
func (h *fileHandle) beforeChange() error {
	if err := h.n.mutable(); err != nil {
		return err
	}
	return killPriv(h.fd)
}

func (h *fileHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if err := h.beforeChange(); err != nil {
		return 0, h.errno("write", err)
	}
	k, err := syscall.Pwrite(h.fd, data, off)
	return uint32(max(k, 0)), h.errno("write", err)
}

// Flush drops the POSIX locks of the closing lock owner (locks_linux.go)
// and reports nothing else: close of a revoked handle succeeds, and under
// the writeback cache the kernel has already written the dirty pages back
// and reports their errors itself. While the view forwards locks, a close
// sends FLUSH unless the handle was opened with FOPEN_NOFLUSH (read-only,
// on a file never locked through the view: fileHandle.flushes); otherwise
// it is reached only under the writeback cache (which ignores
// FOPEN_NOFLUSH), where ENOSYS makes the kernel stop sending it.
func (h *fileHandle) Flush(ctx context.Context) syscall.Errno {
	if !h.n.v.forwardsLocks() {
		if h.n.v.writeback() {
			return syscall.ENOSYS
		}
		return h.errno("flush", h.n.live())
	}
	h.flushLocks(ctx)
	return 0
}

func (h *fileHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if err := h.n.live(); err != nil {
		return h.errno("fsync", err)
	}
	if flags&1 != 0 {
		return h.errno("fsync", syscall.Fdatasync(h.fd))
	}
	return h.errno("fsync", syscall.Fsync(h.fd))
}

// Release closes the descriptor. The last writer records the file's size
// and mtime as the kernel now knows them (its pages are written back by
// now), so that the next lookup does not take the view's own writes for a
// host change (node.renewable).
func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	f := h.n.file
	if h.writable && f.writers.Add(-1) == 0 {
		var st syscall.Stat_t
		if syscall.Fstat(h.fd, &st) == nil {
			h.n.seen(&st)
		}
	}
	f.hmu.Lock()
	delete(f.handles, h)
	last := len(f.handles) == 0
	if last {
		h.n.v.sw.open.track(h.n, false)
	}
	f.hmu.Unlock()
	h.releaseLocks(last)
	h.n.v.passthroughClosed(h)
	return h.errno("release", syscall.Close(h.fd))
}

func (h *fileHandle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	if err := h.n.live(); err != nil {
		return h.errno("getattr", err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(h.fd, &st); err != nil {
		return h.errno("getattr", err)
	}
	out.FromStat(&st)
	h.n.attrTimes(out)
	return 0
}

func (h *fileHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	if err := h.n.live(); err != nil {
		return 0, h.errno("lseek", err)
	}
	k, err := unix.Seek(h.fd, int64(off), int(whence))
	return uint64(k), h.errno("lseek", err)
}

func (h *fileHandle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	if err := h.beforeChange(); err != nil {
		return h.errno("fallocate", err)
	}
	return h.errno("fallocate", unix.Fallocate(h.fd, mode, int64(off), int64(size)))
}

// Record locks are keyed by the kernel's lock owner (locks_linux.go);
// flock is taken on the handle's own host descriptor, so it is per open
// file description and released with the handle. A read-only view never
// negotiates lock forwarding (fuseOptions): the kernel keeps its locks
// inside the view, so a sandboxed reader cannot block a host process.
// Should a request reach the daemon anyway, it is refused rather than
// taken on the host.
func (h *fileHandle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	if h.n.v.opts.ReadOnly {
		return syscall.ENOLCK
	}
	if err := h.n.live(); err != nil {
		return h.errno("getlk", err)
	}
	if !control.On(control.NoLockOwners) {
		return h.getLock(owner, lk, out)
	}
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	err := syscall.FcntlFlock(uintptr(h.fd), unix.F_OFD_GETLK, &flk)
	out.FromFlockT(&flk)
	return h.errno("getlk", err)
}

func (h *fileHandle) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.setLock(ctx, owner, lk, flags, false)
}

func (h *fileHandle) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.setLock(ctx, owner, lk, flags, true)
}

func (h *fileHandle) setLock(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, wait bool) syscall.Errno {
	if h.n.v.opts.ReadOnly && lk.Typ != syscall.F_UNLCK {
		return syscall.ENOLCK
	}
	if err := h.n.live(); err != nil && lk.Typ != syscall.F_UNLCK {
		return h.errno("setlk", err)
	}
	if flags&fuse.FUSE_LK_FLOCK != 0 {
		var op int
		switch lk.Typ {
		case syscall.F_RDLCK:
			op = syscall.LOCK_SH
		case syscall.F_WRLCK:
			op = syscall.LOCK_EX
		case syscall.F_UNLCK:
			op = syscall.LOCK_UN
		default:
			return syscall.EINVAL
		}
		if !wait {
			op |= syscall.LOCK_NB
		}
		return h.errno("flock", syscall.Flock(h.fd, op))
	}
	if !control.On(control.NoLockOwners) {
		return h.setRecordLock(ctx, owner, lk, wait)
	}
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	cmd := unix.F_OFD_SETLK
	if wait {
		cmd = unix.F_OFD_SETLKW
	}
	return h.errno("setlk", syscall.FcntlFlock(uintptr(h.fd), cmd, &flk))
}

// dirHandle is an open directory: a getdents stream on a descriptor opened
// through the node's O_PATH descriptor, at the first read. Where the kernel
// opens directories itself (FUSE_NO_OPENDIR_SUPPORT), rawFS makes one for
// each READDIR (noopendir_linux.go); otherwise a listing the kernel has
// cached (FOPEN_CACHE_DIR) sends OPENDIR and RELEASEDIR but no READDIR, and
// opening lazily spares each of those round trips an openat, a buffer and
// a close.
type dirHandle struct {
	n  *node
	mu sync.Mutex
	ds fs.DirStream // nil until stream
}

func (d *dirHandle) stream() (fs.DirStream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.n.live(); err != nil {
		return nil, err
	}
	if d.ds != nil {
		return d.ds, nil
	}
	fd, err := d.n.v.withFDs(func() (int, error) { return openat(d.n.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0) })
	if err != nil {
		return nil, err
	}
	ds, errno := fs.NewLoopbackDirStreamFd(fd)
	if errno != 0 {
		unix.Close(fd)
		return nil, errno
	}
	d.ds = ds
	return ds, nil
}

var (
	_ = (fs.FileReaddirenter)((*dirHandle)(nil))
	_ = (fs.FileSeekdirer)((*dirHandle)(nil))
	_ = (fs.FileReleasedirer)((*dirHandle)(nil))
	_ = (fs.FileFsyncdirer)((*dirHandle)(nil))
)

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	ds, err := d.stream()
	if err != nil {
		return nil, d.n.errno("readdir", err)
	}
	return ds.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	ds, err := d.stream()
	if err != nil {
		return d.n.errno("seekdir", err)
	}
	return ds.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ds != nil {
		d.ds.(fs.FileReleasedirer).Releasedir(ctx, flags)
	}
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	ds, err := d.stream()
	if err != nil {
		return d.n.errno("fsyncdir", err)
	}
	return ds.(fs.FileFsyncdirer).Fsyncdir(ctx, flags)
}
