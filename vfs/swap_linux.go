//go:build linux

package vfs

// The swap machinery: the snapshot the view serves, how Install replaces it
// (snapshotOf, then swap: publish, write back, revoke, invalidate), and the
// open files a swap must reach.

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/rootset"
)

// swapState is the view's current snapshot and what swap and Close need to
// replace it.
type swapState struct {
	// mu serializes swap and Close. FUSE handlers never take it, so swap may
	// hold it while it sends kernel notifications.
	mu      sync.Mutex
	closed  bool   // guarded by mu
	snapGen uint64 // the last snapshot's generation; guarded by mu

	// closeMu is held shared by a top-level Lookup while it duplicates a
	// pinned descriptor of the current table, and exclusively by swap while
	// it publishes a table and while it closes a retired one, so a lookup
	// never duplicates a closed (or reused) descriptor. Lock order: mu, then
	// closeMu.
	closeMu sync.RWMutex
	cur     atomic.Pointer[snapshot] // never nil; immutable once stored

	lists topLists // recent snapshots, for listings (toplist_linux.go)
	open  openSet  // nodes with open handles
}

// current returns the snapshot being served. It is immutable and never nil.
func (v *View) current() *snapshot { return v.sw.cur.Load() }

// openSet is the set of nodes with open handles: swap reaches the open
// files of leaving roots through it, in the tree or not.
type openSet struct {
	// mu guards the field that follows.
	mu sync.Mutex
	m  map[*node]struct{}
}

// track records whether n has open handles.
func (s *openSet) track(n *node, open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !open {
		delete(s.m, n)
		return
	}
	if s.m == nil {
		s.m = map[*node]struct{}{}
	}
	s.m[n] = struct{}{}
}

// of returns the nodes with open handles of the given incarnations,
// whether or not they are still in the tree.
func (s *openSet) of(incs map[*rootInc]bool) []*node {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*node
	for n := range s.m {
		if incs[n.inc] {
			out = append(out, n)
		}
	}
	return out
}

// swap replaces the table in one atomic step and takes ownership of t (it is
// closed when replaced, or by Close). Entries whose name and host inode stay
// keep their nodes; every other old entry is revoked and its kernel dentry
// invalidated before swap returns. Safe from any goroutine that is not a
// FUSE handler of this view. Install is its one caller outside tests.
//
// The steps, in order: build the snapshot (snapshotOf), publish it, write
// back what the kernel holds dirty for the leaving roots (writeBack), revoke
// them (revoke), invalidate the kernel's cache (invalidate), and close the
// old table.
func (v *View) swap(t *rootset.Table) error {
	if t == nil {
		return errors.New("vfs: swap of a nil table")
	}
	sw := &v.sw
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.closed {
		t.Close()
		return ErrClosed
	}
	old := sw.cur.Load()
	ns := v.snapshotOf(t, old)
	sw.lists.add(ns) // before any listing can start from it

	sw.closeMu.Lock()
	sw.cur.Store(ns)
	sw.closeMu.Unlock()

	removed, leaving := leavingOf(old, ns)
	// Open files whose kernel inode is no longer in the tree (renewed, or
	// renamed over through the view) are reached through the open set.
	var detached []*node
	if !control.On(control.NoOpenDrop) {
		detached = sw.open.of(leaving)
	}
	v.writeBack(removed, detached)
	v.revoke(old, removed, leaving)
	err := v.invalidate(old, ns, removed, detached)

	sw.closeMu.Lock()
	old.table.Close()
	sw.closeMu.Unlock()

	for _, name := range removed {
		v.log.Debug("root revoked", zap.String("entry", name), zap.String("host", old.byName[name].inc.hostPath))
	}
	if err != nil {
		v.log.Warn("swap: kernel invalidation failed", zap.Error(err))
		return err
	}
	return nil
}

// snapshotOf builds the snapshot of t (v.sw.mu held): entries whose name and host inode
// stay keep their incarnation (and so their nodes); the others get a new
// one. Entries with a reserved or placeholder name are hidden.
func (v *View) snapshotOf(t *rootset.Table, old *snapshot) *snapshot {
	v.sw.snapGen++
	ns := &snapshot{gen: v.sw.snapGen, table: t, byName: make(map[string]slot, len(t.Entries())), dirs: map[string][]string{"": nil}}
	seen := map[string]bool{}
	for _, e := range t.Entries() {
		key := e.ViewPath
		if e.Covered {
			continue // reached through the entry it lies in
		}
		if !validKey(key) {
			v.log.Warn("entry hidden: reserved name", zap.String("entry", key), zap.String("host", e.HostPath))
			continue
		}
		if v.ph.claimed(key, ns) {
			v.log.Warn("entry hidden: its path is taken by a placeholder or another entry", zap.String("entry", key), zap.String("host", e.HostPath))
			continue
		}
		dev, ino := e.Ident()
		var inc *rootInc
		if prev, ok := old.byName[key]; ok && prev.inc.dev == dev && prev.inc.ino == ino && prev.inc.isDir == e.IsDir {
			inc = prev.inc
		} else {
			inc = &rootInc{gen: v.nextGen.Add(1), name: key, hostPath: e.HostPath, dev: dev, ino: ino, isDir: e.IsDir}
		}
		ns.byName[key] = slot{inc: inc, entry: e}
		ns.order = append(ns.order, key)
		addDirs(ns.dirs, seen, key)
	}
	return ns
}

// writeBack, under the writeback cache, has the kernel write back what it
// holds dirty for the leaving roots while the daemon still accepts it:
// those write(2)s had already succeeded. Writes after this pass and before
// revocation may still be lost (EIO at write-back, reported by fsync and
// close).
func (v *View) writeBack(removed []string, detached []*node) {
	if !v.writeback() || !v.mounted.Load() || control.On(control.NoSwapInvalidate) {
		return
	}
	for _, key := range removed {
		if ch := v.inodeAt(key); ch != nil {
			dropContent(ch)
		}
	}
	for _, n := range detached {
		n.NotifyContent(0, -1)
	}
}

// inodeAt returns the inode the kernel knows at key ("" is the top
// level), or nil when it knows none there.
func (v *View) inodeAt(key string) *fs.Inode {
	n := v.root.EmbeddedInode()
	if key == "" {
		return n
	}
	for _, c := range strings.Split(key, "/") {
		if n = n.GetChild(c); n == nil {
			return nil
		}
	}
	return n
}

// revoke makes every operation on the leaving incarnations fail with
// ErrRevoked from now on, and forgets their renewed nodes.
func (v *View) revoke(old *snapshot, removed []string, leaving map[*rootInc]bool) {
	for _, name := range removed {
		old.byName[name].inc.revoked.Store(true)
	}
	v.renewed.Range(func(k, _ any) bool {
		if leaving[k.(renewKey).inc] {
			v.renewed.Delete(k)
		}
		return true
	})
}

// invalidate drops the kernel's cache of what changed: the removed entries
// and synthetic directories (dentries, with the mounts on them, and every
// page below them), the open files of leaving roots, the names new in ns
// (which the kernel may hold as negative entries), and the attributes and
// listings of the synthetic directories whose children changed.
func (v *View) invalidate(old, ns *snapshot, removed []string, detached []*node) error {
	if !v.mounted.Load() || control.On(control.NoSwapInvalidate) {
		return nil
	}
	var errs []error
	note := func(key string, errno syscall.Errno) {
		if !benignNotify(errno) {
			errs = append(errs, fmt.Errorf("invalidate %q: %w", key, errno))
		}
	}
	dropped := map[string]bool{}
	drop := func(key string) {
		dropped[key] = true
		dir, name := splitKey(key)
		parent := v.inodeAt(dir)
		if parent == nil {
			return // the kernel holds nothing of it
		}
		ch := parent.GetChild(name)
		if ch == nil {
			note(key, parent.NotifyEntry(name))
			return
		}
		dropContent(ch)
		parent.RmChild(name)
		note(key, parent.NotifyDelete(name, ch))
	}
	for _, key := range removed {
		drop(key)
	}
	// Synthetic directories that are gone, outermost first (dropping one
	// drops what the kernel holds below it). A placeholder, or a directory
	// leading to one, stays whatever the roots: telling the kernel to
	// forget its dentry would detach the mounts on and below it.
	var gone []string
	for key := range old.dirs {
		if _, keep := ns.dirs[key]; !keep && key != "" {
			if v.ph.permanent(key) {
				v.dropListing(key) // its listing changed
			} else {
				gone = append(gone, key)
			}
		}
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i] < gone[j] })
	for _, key := range gone {
		if !droppedAbove(dropped, key) {
			drop(key)
		}
	}
	for _, n := range detached {
		n.NotifyContent(0, -1)
	}
	fresh := func(key string) {
		dir, name := splitKey(key)
		if parent := v.inodeAt(dir); parent != nil {
			note(key, parent.NotifyEntry(name))
		}
	}
	for _, key := range ns.order {
		if _, existed := old.byName[key]; !existed {
			fresh(key)
		}
	}
	for key := range ns.dirs {
		if _, existed := old.dirs[key]; !existed && key != "" && !v.ph.permanent(key) {
			fresh(key)
		}
	}
	for key, names := range ns.dirs {
		if key != "" && !slices.Equal(names, old.dirs[key]) {
			v.dropListing(key)
		}
	}
	v.root.EmbeddedInode().NotifyContent(0, 0) // top-level attributes (nlink, mtime)
	return errors.Join(errs...)
}

// dropListing drops the kernel's attributes and cached listing of the
// synthetic directory at key, if it knows that directory.
func (v *View) dropListing(key string) {
	if n := v.inodeAt(key); n != nil {
		n.NotifyContent(0, 0)
	}
}

// benignNotify: ENOENT means the kernel had nothing cached; ENOTEMPTY and
// EBUSY come after the dentry was already invalidated (a busy directory).
// ENOTCONN/EINVAL: not serving (yet or any more), so nothing is cached.
func benignNotify(errno syscall.Errno) bool {
	switch errno {
	case 0, syscall.ENOENT, syscall.ENOTEMPTY, syscall.EBUSY, syscall.ENOTCONN, syscall.EINVAL, syscall.ENODEV:
		return true
	}
	return false
}

// dropContent drops the kernel's cached pages and attributes of every inode
// the kernel knows below n, so that reads after revocation reach the daemon
// (and fail) instead of the page cache.
func dropContent(n *fs.Inode) {
	seen := map[*fs.Inode]bool{}
	var walk func(n *fs.Inode)
	walk = func(n *fs.Inode) {
		if seen[n] {
			return
		}
		seen[n] = true
		n.NotifyContent(0, -1)
		for _, ch := range n.Children() {
			walk(ch)
		}
	}
	walk(n)
}
