//go:build linux

package vfs

// The containment core: what a node is (its identity and incarnation), how
// an operation pins a node's host inode and lets it go (pin, unpin), and how
// a lookup adopts what it found. Read this file alone to check that nothing
// below an entry is reached through a host path string.

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
)

// node is any inode below an entry, including the entry itself.
//
// A directory, an entry, and a file the view created holds an O_PATH
// descriptor of its host inode, opened without following symlinks; every
// operation goes through that descriptor. The descriptor is closed when the
// node becomes unreachable (a runtime cleanup), never while an operation
// could still use it, so its number cannot be reused under a live node.
//
// Any other node (a file, symlink or special file found by lookup) holds no
// descriptor (fd < 0): an operation pins its inode for the call (pin) by
// opening its current name beneath the parent directory's descriptor
// (O_PATH|O_NOFOLLOW, one component) and checking that the device and inode
// are still the node's; a mismatch is ESTALE, after which the kernel looks
// the name up again. So the daemon holds one descriptor per cached
// directory, not per cached file, and a kernel that caches a tree of many
// more files than RLIMIT_NOFILE allows stays far below it.
type node struct {
	fs.Inode
	v    *View
	inc  *rootInc
	fd   int // O_PATH|O_NOFOLLOW, or -1 (see pin)
	dev  uint64
	ino  uint64
	kind uint32 // S_IFMT bits
	// watched: host changes to this node are reported by the host watcher
	// (hostwatch_linux.go), so the kernel may cache it for long.
	watched bool
	gen     uint64 // StableAttr.Gen: the incarnation's, or fresh (renewable)

	// file is set for a regular file, and only for one: a directory,
	// symlink or special file never has handles, locks or pages.
	file *fileState
}

// fileState is the part of a node only a regular file needs: what the
// kernel was told of it, its open handles, and its lock and prefill marks.
type fileState struct {
	// Under the writeback cache: the size and mtime last told to the
	// kernel, and the handles open for writing.
	seenSize, seenMtime atomic.Int64
	writers             atomic.Int32

	// handles are the open handles, for pinning a node that has lost its
	// name (unlinked while open). A handle leaves the set before its
	// descriptor is closed, under hmu.
	hmu     sync.Mutex
	handles map[*fileHandle]struct{}

	// locked: a record lock was asked for through the view (locks_linux.go).
	locked atomic.Bool
	// prefilled: an OPEN pushed the file's data to the kernel (prefill).
	prefilled atomic.Bool
}

func newNode(v *View, inc *rootInc, fd int, st *syscall.Stat_t) *node {
	n := &node{v: v, inc: inc, fd: fd, dev: st.Dev, ino: st.Ino, kind: st.Mode & syscall.S_IFMT, gen: inc.gen}
	if n.kind == syscall.S_IFREG {
		n.file = &fileState{}
		if g, ok := v.renewed.Load(renewKey{inc, st.Dev, st.Ino}); ok {
			n.gen = g.(uint64)
		}
	}
	n.seen(st)
	if fd >= 0 {
		runtime.AddCleanup(n, func(fd int) { unix.Close(fd) }, fd)
	}
	return n
}

// seen records the size and mtime the kernel holds for n, a regular file
// (for any other node it does nothing): those it was given when it made
// the inode, or that the view itself set (a truncation, the last writer's
// close). Under the writeback cache it ignores those of later replies.
func (n *node) seen(st *syscall.Stat_t) {
	if f := n.file; f != nil {
		f.seenSize.Store(st.Size)
		f.seenMtime.Store(st.Mtim.Nano())
	}
}

// renewable reports whether the kernel's inode for n must be replaced to
// show st. Under the writeback cache the kernel trusts its own size and
// mtime of a regular file and ignores the daemon's, so a file changed on
// the host (by another process) would be read at its old length for as
// long as the kernel keeps the inode. When a lookup finds such a change and
// nothing has the file open for writing through the view (no dirty pages
// the kernel still has to write back), the view answers with a new node
// (a fresh StableAttr.Gen, so a new node id): the kernel makes a new inode
// with the host's size, and files already open keep the old one.
func (n *node) renewable(st *syscall.Stat_t) bool {
	f := n.file
	return f != nil && n.v.writeback() && f.writers.Load() == 0 &&
		(st.Size != f.seenSize.Load() || st.Mtim.Nano() != f.seenMtime.Load())
}

// renewKey names a regular file of one root incarnation whose inode was
// renewed; View.renewed maps it to the generation of its current node, so
// that a lookup that does not find the node in its directory (go-fuse
// dropped the name) still does not revive the old kernel inode.
type renewKey struct {
	inc      *rootInc
	dev, ino uint64
}

// renew gives n a fresh generation (see renewable).
func (n *node) renew() {
	n.gen = n.v.nextGen.Add(1)
	n.v.renewed.Store(renewKey{n.inc, n.dev, n.ino}, n.gen)
}

// pin returns an O_PATH descriptor of n's host inode for the length of one
// operation; release it with unpin. See node for how a node without a
// descriptor of its own is pinned.
func (n *node) pin() (int, error) {
	if n.fd >= 0 {
		return n.fd, nil
	}
	name, pn, err := n.parentNode()
	if err != nil {
		if fd, ok := n.pinOpen(); ok {
			return fd, nil
		}
		return -1, err
	}
	fd, err := n.v.pathAt(pn.fd, name, 0)
	runtime.KeepAlive(pn) // its descriptor must not be closed (and reused) during the openat
	if err != nil {
		if fd, ok := n.pinOpen(); ok {
			return fd, nil // unlinked or renamed, but still open
		}
		return -1, staleIfGone(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if !n.same(&st) {
		unix.Close(fd)
		if fd, ok := n.pinOpen(); ok {
			return fd, nil
		}
		return -1, syscall.ESTALE
	}
	return fd, nil
}

// pinOpen pins n through one of its open handles, when it has one: the
// inode an open descriptor refers to, named by /proc/self/fd/N.
func (n *node) pinOpen() (int, bool) {
	f := n.file
	if f == nil {
		return -1, false // only a regular file has handles
	}
	f.hmu.Lock()
	defer f.hmu.Unlock()
	for h := range f.handles {
		fd, err := openat(unix.AT_FDCWD, procPath(h.fd), unix.O_PATH, 0)
		return fd, err == nil
	}
	return -1, false
}

// unpin releases what pin returned.
func (n *node) unpin(fd int) {
	if fd >= 0 && fd != n.fd {
		unix.Close(fd)
	}
}

// parentNode returns n's current name and its parent directory's node
// (go-fuse keeps the name current for changes made through the view; a
// change made on the host shows as ESTALE). The caller uses the parent's
// descriptor and keeps the parent alive (runtime.KeepAlive) until it is
// done with it: once n leaves the tree, nothing else may hold the parent,
// and its cleanup would close the descriptor.
func (n *node) parentNode() (string, *node, error) {
	name, p := n.Parent()
	if p == nil {
		return "", nil, syscall.ESTALE
	}
	pn, ok := p.Operations().(*node)
	if !ok || pn.fd < 0 || pn.inc != n.inc {
		return "", nil, syscall.ESTALE
	}
	return name, pn, nil
}

// same reports whether st describes n's host inode.
func (n *node) same(st *syscall.Stat_t) bool {
	return st.Dev == n.dev && st.Ino == n.ino && st.Mode&syscall.S_IFMT == n.kind
}

// staleIfGone turns "the name is gone" into ESTALE: the kernel then looks
// the name up again instead of failing a call on a cached dentry.
func staleIfGone(err error) error {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		return syscall.ESTALE
	}
	return err
}

var (
	_ = (fs.NodeLookuper)((*node)(nil))
	_ = (fs.NodeGetattrer)((*node)(nil))
	_ = (fs.NodeSetattrer)((*node)(nil))
	_ = (fs.NodeOpener)((*node)(nil))
	_ = (fs.NodeCreater)((*node)(nil))
	_ = (fs.NodeMkdirer)((*node)(nil))
	_ = (fs.NodeMknoder)((*node)(nil))
	_ = (fs.NodeSymlinker)((*node)(nil))
	_ = (fs.NodeReadlinker)((*node)(nil))
	_ = (fs.NodeLinker)((*node)(nil))
	_ = (fs.NodeUnlinker)((*node)(nil))
	_ = (fs.NodeRmdirer)((*node)(nil))
	_ = (fs.NodeRenamer)((*node)(nil))
	_ = (fs.NodeOpendirHandler)((*node)(nil))
	_ = (fs.NodeStatfser)((*node)(nil))
	_ = (fs.NodeGetxattrer)((*node)(nil))
	_ = (fs.NodeSetxattrer)((*node)(nil))
	_ = (fs.NodeRemovexattrer)((*node)(nil))
	_ = (fs.NodeListxattrer)((*node)(nil))
	_ = (fs.NodeFsyncer)((*node)(nil))
	_ = (fs.NodeCopyFileRanger)((*node)(nil))
)

func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// live fails once the node's root has been revoked.
func (n *node) live() error {
	if n.inc.revoked.Load() {
		return ErrRevoked
	}
	return nil
}

// mutable fails for a revoked root and for a read-only view.
func (n *node) mutable() error {
	if err := n.live(); err != nil {
		return err
	}
	if n.v.opts.ReadOnly {
		return syscall.EROFS
	}
	return nil
}

func (n *node) errno(op string, err error) syscall.Errno {
	if err != nil && n.v.opts.Audit != nil && errors.Is(err, ErrRevoked) && n.inc.revokedSaid.CompareAndSwap(false, true) {
		n.auditRevoked(op)
	}
	return n.v.toErrno(op, err)
}

func retryEINTR(f func() error) error {
	for {
		err := f()
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// pathAt opens name, one component in the directory dirfd, as an O_PATH
// descriptor without following it (plus flags), relieving descriptor
// pressure when it must (withFDs).
func (v *View) pathAt(dirfd int, name string, flags int) (int, error) {
	return v.withFDs(func() (int, error) { return openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|flags, 0) })
}

func openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	var fd int
	err := retryEINTR(func() error {
		var err error
		fd, err = unix.Openat(dirfd, name, flags|unix.O_CLOEXEC, mode)
		return err
	})
	return fd, err
}

// adopt turns a freshly opened O_PATH descriptor of name (a child of n) into
// the child's Inode, reusing the existing Inode when go-fuse already has this
// host inode under that name. It takes ownership of fd.
//
// fd may be -1 for anything but a directory (see node).
func (n *node) adopt(ctx context.Context, name string, fd int, st *syscall.Stat_t, out *fuse.EntryOut) (*fs.Inode, error) {
	if st.Dev != n.dev && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		if linux.OnKernelFS(fd) {
			if fd >= 0 {
				unix.Close(fd)
			}
			return nil, syscall.EACCES
		}
	}
	return n.v.childOf(ctx, n.EmbeddedInode(), n, name, n.inc, fd, st, out), nil
}

// childOf answers a lookup of name in parent (whose node is pn, or nil for
// a synthetic directory) with st, a host inode of incarnation inc that fd
// holds (-1 for none: see node): the Inode go-fuse already has under that
// name when it is st's node and need not be renewed (reusable), else a new
// one. It takes ownership of fd.
func (v *View) childOf(ctx context.Context, parent *fs.Inode, pn *node, name string, inc *rootInc, fd int, st *syscall.Stat_t, out *fuse.EntryOut) *fs.Inode {
	out.Attr.FromStat(st)
	old := parent.GetChild(name)
	on, renew := reusable(old, inc, st)
	if on != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		on.cacheTimes(out)
		return old
	}
	ch, _ := v.newChild(ctx, parent, pn, name, inc, fd, st, renew, out)
	return ch
}

// reusable returns old's node when it may stand for st in inc, or, when
// old is st's node but the kernel's inode must be replaced (renewable),
// renew.
func reusable(old *fs.Inode, inc *rootInc, st *syscall.Stat_t) (on *node, renew bool) {
	if old == nil {
		return nil, false
	}
	on, ok := old.Operations().(*node)
	if !ok || on.inc != inc || !on.same(st) {
		return nil, false
	}
	if on.renewable(st) {
		return nil, true
	}
	return on, false
}

// newChild makes the node of st (a new child name of parent, whose node is
// pn, or an entry when pn is nil) and its Inode: renewed when asked, put
// under the host watcher, with the reply's cache timeouts set.
func (v *View) newChild(ctx context.Context, parent *fs.Inode, pn *node, name string, inc *rootInc, fd int, st *syscall.Stat_t, renew bool, out *fuse.EntryOut) (*fs.Inode, *node) {
	ch := newNode(v, inc, fd, st)
	if renew {
		ch.renew()
	}
	v.watchNode(ch, pn, name, st)
	ch.cacheTimes(out)
	return parent.NewInode(ctx, ch, stableAttr(ch, st)), ch
}

// pinOpened pins an O_PATH descriptor of the inode that fd (just created or
// opened) is open on, through /proc/self/fd so that no name is resolved
// again, and returns it with the inode's attributes. fd is closed on error.
func pinOpened(fd int) (int, *syscall.Stat_t, error) {
	pfd, err := openat(unix.AT_FDCWD, procPath(fd), unix.O_PATH, 0)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(pfd, &st); err != nil {
		unix.Close(fd)
		unix.Close(pfd)
		return -1, nil, err
	}
	return pfd, &st, nil
}
