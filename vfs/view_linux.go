//go:build linux

package vfs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"
)

// View is the FUSE file system of the current table. Create it with NewView,
// mount it with Mount, change it with Install.
type View struct {
	opts  Options
	log   *zap.Logger
	root  *rootDir
	euid  uint32
	umask uint32 // the daemon's umask, undone on created files
	start time.Time

	placeholders map[string]int // name -> index in opts.Placeholders

	// mu serializes swap and Close. FUSE handlers never take it, so swap may
	// hold it while it sends kernel notifications.
	mu     sync.Mutex
	closed bool // guarded by mu

	// closeMu is held shared by a top-level Lookup while it duplicates a
	// pinned descriptor of the current table, and exclusively by swap while
	// it publishes a table and while it closes a retired one, so a lookup
	// never duplicates a closed (or reused) descriptor. Lock order: mu, then
	// closeMu.
	closeMu sync.RWMutex
	cur     atomic.Pointer[snapshot] // never nil; immutable once stored

	relief   reliefState // the descriptor relief (fdrelief_linux.go)
	topLists topLists    // recent listings of the top level (toplist_linux.go)

	profile *os.File // ProfileEnv; guarded by mu

	nextGen atomic.Uint64
	mounted atomic.Bool               // the root was attached to a go-fuse bridge
	self    atomic.Pointer[mountSelf] // where View.Mount mounted the view (install_linux.go)

	renewed sync.Map   // renewKey -> uint64 (node.renew)
	watch   *hostWatch // nil: host changes are not watched (hostwatch_linux.go)

	open openSet // nodes with open handles (trackOpen, openNodesOf)
}

// openSet is the set of nodes with open handles: swap reaches the open
// files of leaving roots through it, in the tree or not.
type openSet struct {
	// mu guards the field that follows.
	mu sync.Mutex
	m  map[*node]struct{}
}

// snapshot is what the top level serves: a table plus the incarnation of
// each visible entry. Immutable once published.
type snapshot struct {
	table  *Table
	order  []string
	byName map[string]slot
}

type slot struct {
	inc   *rootInc
	entry *Entry // of snapshot.table
}

// rootInc is one incarnation of a root: the same name re-pointed at another
// inode, or removed and re-added, is a new incarnation with new node
// identities, so old nodes can never alias new ones.
type rootInc struct {
	gen      uint64 // StableAttr.Gen of every node of this incarnation
	name     string
	hostPath string
	dev, ino uint64
	isDir    bool
	revoked  atomic.Bool
}

// NewView returns a view serving an empty table.
func NewView(opts Options) *View {
	v := &View{
		opts:         opts,
		log:          opts.Logger,
		euid:         uint32(os.Geteuid()),
		umask:        readUmask(),
		start:        time.Now(),
		placeholders: map[string]int{},
	}
	if v.log == nil {
		v.log = zap.NewNop()
	}
	for i, p := range opts.Placeholders {
		if !validTopName(p.Name) {
			v.log.Warn("placeholder ignored: invalid name", zap.String("name", p.Name))
			continue
		}
		if _, dup := v.placeholders[p.Name]; dup {
			continue
		}
		v.placeholders[p.Name] = i
	}
	v.root = &rootDir{v: v}
	if !opts.NoHostWatch && opts.CacheTimeout >= 0 {
		w, err := newHostWatch(v, v.log, opts.cacheTimeout())
		if err != nil {
			v.log.Debug("host changes are not watched (fanotify); the kernel caches names and attributes for the short timeout",
				zap.Duration("timeout", opts.cacheTimeout()), zap.Error(err))
		} else {
			v.log.Debug("host changes are watched (fanotify); the kernel caches what the watcher covers for long",
				zap.Duration("timeout", max(opts.cacheTimeout(), watchedCacheTimeout)))
		}
		v.watch = w
	}
	v.startProfile()
	v.cur.Store(&snapshot{table: EmptyTable(), byName: map[string]slot{}})
	return v
}

func validTopName(n string) bool {
	return n != "" && n != "." && n != ".." && n != epollHackName && len(n) <= 255 &&
		!strings.ContainsAny(n, "/\x00")
}

// reserved returns the top-level names the view uses itself: its
// placeholders and the name go-fuse intercepts. Install passes them as
// TableOptions.Reserved.
func (v *View) reserved() []string {
	out := []string{epollHackName}
	for _, p := range v.opts.Placeholders {
		if _, ok := v.placeholders[p.Name]; ok {
			out = append(out, p.Name)
		}
	}
	return out
}

// Table returns the table being served. It is immutable and never nil; it
// stays valid until the next Install.
func (v *View) Table() *Table { return v.cur.Load().table }

// Entries returns the entries being served, in listing order: the
// table's, minus any hidden by a reserved name. Like Table, they stay
// valid until the next Install.
func (v *View) Entries() []*Entry {
	s := v.cur.Load()
	out := make([]*Entry, 0, len(s.order))
	for _, name := range s.order {
		out = append(out, s.byName[name].entry)
	}
	return out
}

// fuseOptions returns go-fuse options suited to the view: caching per
// Options.CacheTimeout, 1 MiB writes, the writeback cache (with
// Options.Writeback, not with Passthrough), CAP_HANDLE_KILLPRIV_V2, POSIX and flock
// locks forwarded to the host (kept by the kernel inside the view when
// Options.ReadOnly: see "Locks" in the package documentation), default_permissions (the kernel checks mode
// bits against the caller, since the daemon acts as itself), passthrough
// disabled unless Options.Passthrough. The caller may adjust the result
// (AllowOther, DirectMount) before mounting.
func (v *View) fuseOptions() *fs.Options {
	t := v.opts.cacheTimeout()
	if v.watch != nil {
		t = max(t, watchedCacheTimeout) // nodes the watcher misses say so in each reply
	}
	entry, attr, neg := t, t, t
	o := &fs.Options{
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &neg,
		NullPermissions: true,
		Logger:          log.New(zapWriter{v.log}, "", 0),
		MountOptions: fuse.MountOptions{
			FsName:            "rootfs",
			Name:              "rootfs",
			MaxWrite:          1 << 20,
			MaxBackground:     64,
			EnableLocks:       !v.opts.ReadOnly,
			ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_READDIRPLUS_AUTO,
			Options:           []string{"default_permissions"},
		},
	}
	o.MountOptions.Logger = o.Logger
	if v.opts.Passthrough {
		o.MaxStackDepth = 2 // roots may live on overlayfs
	} else {
		o.DisabledCapabilities |= fuse.CAP_PASSTHROUGH
	}
	if v.writeback() {
		o.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE
	}
	return o
}

// writeback reports whether the kernel may cache writes (never together
// with passthrough: the kernel does not negotiate both).
func (v *View) writeback() bool {
	return v.opts.Writeback && !v.opts.Passthrough
}

type zapWriter struct{ l *zap.Logger }

func (w zapWriter) Write(p []byte) (int, error) {
	w.l.Debug("go-fuse", zap.String("msg", strings.TrimSpace(string(p))))
	return len(p), nil
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
func (v *View) swap(t *Table) error {
	if t == nil {
		return errors.New("vfs: swap of a nil table")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		t.Close()
		return ErrClosed
	}
	old := v.cur.Load()
	ns := v.snapshotOf(t, old)

	v.closeMu.Lock()
	v.cur.Store(ns)
	v.closeMu.Unlock()

	removed, leaving := leavingOf(old, ns)
	// Open files whose kernel inode is no longer in the tree (renewed, or
	// renamed over through the view) are reached through the open set.
	var detached []*node
	if !testNoOpenDrop {
		detached = v.openNodesOf(leaving)
	}
	v.writeBack(removed, detached)
	v.revoke(old, removed, leaving)
	err := v.invalidate(old, ns, removed, detached)

	v.closeMu.Lock()
	old.table.Close()
	v.closeMu.Unlock()

	for _, name := range removed {
		v.log.Info("root revoked", zap.String("entry", name), zap.String("host", old.byName[name].inc.hostPath))
	}
	if err != nil {
		v.log.Warn("swap: kernel invalidation failed", zap.Error(err))
		return err
	}
	return nil
}

// snapshotOf builds the snapshot of t: entries whose name and host inode
// stay keep their incarnation (and so their nodes); the others get a new
// one. Entries with a reserved or placeholder name are hidden.
func (v *View) snapshotOf(t *Table, old *snapshot) *snapshot {
	ns := &snapshot{table: t, byName: make(map[string]slot, len(t.Entries()))}
	for _, e := range t.Entries() {
		if !validTopName(e.Name) {
			v.log.Warn("entry hidden: reserved name", zap.String("entry", e.Name), zap.String("host", e.HostPath))
			continue
		}
		if _, ok := v.placeholders[e.Name]; ok {
			v.log.Warn("entry hidden: name taken by a placeholder", zap.String("entry", e.Name), zap.String("host", e.HostPath))
			continue
		}
		dev, ino := e.Ident()
		var inc *rootInc
		if prev, ok := old.byName[e.Name]; ok && prev.inc.dev == dev && prev.inc.ino == ino && prev.inc.isDir == e.IsDir {
			inc = prev.inc
		} else {
			inc = &rootInc{gen: v.nextGen.Add(1), name: e.Name, hostPath: e.HostPath, dev: dev, ino: ino, isDir: e.IsDir}
		}
		ns.byName[e.Name] = slot{inc: inc, entry: e}
		ns.order = append(ns.order, e.Name)
	}
	return ns
}

// leavingOf returns the names of old whose incarnation is not in ns, and
// those incarnations.
func leavingOf(old, ns *snapshot) (removed []string, leaving map[*rootInc]bool) {
	leaving = map[*rootInc]bool{}
	for _, name := range old.order {
		if ns.byName[name].inc != old.byName[name].inc {
			removed = append(removed, name)
			leaving[old.byName[name].inc] = true
		}
	}
	return removed, leaving
}

// writeBack, under the writeback cache, has the kernel write back what it
// holds dirty for the leaving roots while the daemon still accepts it:
// those write(2)s had already succeeded. Writes after this pass and before
// revocation may still be lost (EIO at write-back, reported by fsync and
// close).
func (v *View) writeBack(removed []string, detached []*node) {
	if !v.writeback() || !v.mounted.Load() || testSkipInvalidate {
		return
	}
	r := v.root.EmbeddedInode()
	for _, name := range removed {
		if ch := r.GetChild(name); ch != nil {
			dropContent(ch)
		}
	}
	for _, n := range detached {
		n.NotifyContent(0, -1)
	}
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
// (dentries and every page below them), the open files of leaving roots,
// the names new in ns (which the kernel may hold as negative entries), and
// the top level's attributes.
func (v *View) invalidate(old, ns *snapshot, removed []string, detached []*node) error {
	if !v.mounted.Load() || testSkipInvalidate {
		return nil
	}
	var errs []error
	r := v.root.EmbeddedInode()
	for _, name := range removed {
		ch := r.GetChild(name)
		if ch == nil {
			if errno := r.NotifyEntry(name); !benignNotify(errno) {
				errs = append(errs, fmt.Errorf("invalidate %q: %w", name, errno))
			}
			continue
		}
		dropContent(ch)
		r.RmChild(name)
		if errno := r.NotifyDelete(name, ch); !benignNotify(errno) {
			errs = append(errs, fmt.Errorf("invalidate %q: %w", name, errno))
		}
	}
	for _, n := range detached {
		n.NotifyContent(0, -1)
	}
	for _, name := range ns.order {
		if _, existed := old.byName[name]; !existed {
			if errno := r.NotifyEntry(name); !benignNotify(errno) {
				errs = append(errs, fmt.Errorf("invalidate %q: %w", name, errno))
			}
		}
	}
	r.NotifyContent(0, 0) // top-level attributes (nlink, mtime)
	return errors.Join(errs...)
}

// trackOpen records whether n has open handles.
func (v *View) trackOpen(n *node, open bool) {
	s := &v.open
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

// openNodesOf returns the nodes with open handles of the given
// incarnations, whether or not they are still in the tree.
func (v *View) openNodesOf(incs map[*rootInc]bool) []*node {
	s := &v.open
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

// testSkipInvalidate turns off swap's kernel notifications, for the
// negative control of the swap tests only (set in export_test.go).
var testSkipInvalidate = false

// testNoOpenDrop makes swap leave open files outside the tree alone, for
// the negative control of TestViewRevokeRenewedOpenFile only (set in
// export_test.go).
var testNoOpenDrop = false

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

// Close revokes every entry and closes the current table. Call it after
// unmounting; Install fails with ErrClosed afterwards.
func (v *View) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	v.stopProfile()
	if v.watch != nil {
		v.watch.close()
	}
	s := v.cur.Load()
	for _, sl := range s.byName {
		sl.inc.revoked.Store(true)
	}
	v.closeMu.Lock()
	defer v.closeMu.Unlock()
	return s.table.Close()
}

// toErrno is the one place where errors become the errno the kernel sees.
func (v *View) toErrno(op string, err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	switch {
	case errors.Is(err, ErrRevoked):
		return syscall.EIO
	case errors.As(err, &errno):
		return errno
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	case errors.Is(err, iofs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, iofs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, iofs.ErrPermission):
		return syscall.EPERM
	}
	v.log.Warn("unexpected error", zap.String("op", op), zap.Error(err))
	return syscall.EIO
}

func readUmask() uint32 {
	data, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(l, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(rest), 8, 32); err == nil {
					return uint32(m)
				}
			}
		}
	}
	return 0o022
}

// mixIno derives the inode number the kernel sees. Files on the root's own
// device keep their host number; others are mixed with their device so two
// file systems below one root do not collide.
func mixIno(rootDev, dev, ino uint64) uint64 {
	x := ino
	if dev != rootDev {
		x ^= bits.RotateLeft64(dev*0x9E3779B97F4A7C15, 40)
	}
	if x <= 1 || x == ^uint64(0) {
		x ^= 1 << 62
	}
	return x
}

// stableAttr is the go-fuse identity of n: its host inode and the
// generation of its root incarnation, or a fresh one for a node renewed
// after a host change (see node.renewable).
func stableAttr(n *node, st *syscall.Stat_t) fs.StableAttr {
	return fs.StableAttr{
		Mode: st.Mode & syscall.S_IFMT,
		Ino:  mixIno(n.inc.dev, st.Dev, st.Ino),
		Gen:  n.gen,
	}
}
