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
	"slices"
	"sort"
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

	placeholders map[string]int      // name (host layout: path) -> index in opts.Placeholders
	tops         []Placeholder       // the top-level ones, in order: OnAdd makes them, listings name them
	phDirs       map[string][]string // host layout: synthetic directory -> the placeholder paths' children in it

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

	relief   reliefState // the descriptor relief (fdrelief_linux.go)
	topLists topLists    // recent snapshots, for listings (toplist_linux.go)

	profile *os.File // Options.CPUProfile; guarded by mu

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

// snapshot is what the synthetic part serves: a table plus the
// incarnation of each visible entry, keyed by its ViewPath, and (host
// layout) the synthetic directories that lead to them. Immutable once
// published.
type snapshot struct {
	gen    uint64 // unique in the view; names it in listing offsets
	table  *Table
	order  []string        // entry keys, in table order
	byName map[string]slot // entry key -> slot
	// dirs maps each synthetic directory ("" is the top level) to the
	// names in it that lead to entries, in table order; in flat layout
	// only "" is there.
	dirs map[string][]string
}

// childKey is the key of name in the synthetic directory dir.
func childKey(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// splitKey returns the synthetic directory holding key and its name there.
func splitKey(key string) (dir, name string) {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// validKey reports whether every element of key can be a name in a
// directory of the view.
func validKey(key string) bool {
	for _, c := range strings.Split(key, "/") {
		if !validTopName(c) {
			return false
		}
	}
	return true
}

// addDirs records in dirs every synthetic directory on the way to key.
func addDirs(dirs map[string][]string, seen map[string]bool, key string) {
	dir := ""
	for _, c := range strings.Split(key, "/") {
		k := childKey(dir, c)
		if !seen[k] {
			seen[k] = true
			dirs[dir] = append(dirs[dir], c)
		}
		if k == key {
			return
		}
		if _, ok := dirs[k]; !ok {
			dirs[k] = nil
		}
		dir = k
	}
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
		phDirs:       map[string][]string{},
	}
	if v.log == nil {
		v.log = zap.NewNop()
	}
	// Beneath as placeholder names ("/tmp/" is "tmp"), as TableOptions
	// reads it: the view hid roots the table had placed.
	v.opts.Beneath = nil
	for _, b := range opts.Beneath {
		v.opts.Beneath = append(v.opts.Beneath, strings.Trim(b, "/"))
	}
	phSeen := map[string]bool{}
	for i, p := range opts.Placeholders {
		ok := validTopName(p.Name) || opts.Layout == LayoutHost && validKey(p.Name)
		if !ok {
			v.log.Warn("placeholder ignored: invalid name", zap.String("name", p.Name))
			continue
		}
		if _, dup := v.placeholders[p.Name]; dup || phSeen[p.Name] {
			continue
		}
		v.placeholders[p.Name] = i
		if strings.Contains(p.Name, "/") {
			addDirs(v.phDirs, phSeen, p.Name)
		}
	}
	// A file or symlink placeholder cannot also lead to another; a
	// directory one can (tmp, with the mount points of binds below it).
	for name, i := range v.placeholders {
		if p := opts.Placeholders[i]; !p.File && p.Symlink == "" {
			continue
		}
		if _, ok := v.phDirs[name]; ok {
			v.log.Warn("placeholder ignored: another one lies below it", zap.String("name", name))
			delete(v.placeholders, name)
		}
	}
	for i, p := range opts.Placeholders {
		if j, ok := v.placeholders[p.Name]; ok && j == i && !strings.Contains(p.Name, "/") {
			v.tops = append(v.tops, p)
		}
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
	v.snapGen++
	first := &snapshot{gen: v.snapGen, table: EmptyTable(), byName: map[string]slot{}, dirs: map[string][]string{"": nil}}
	v.topLists.add(first)
	v.cur.Store(first)
	return v
}

func validTopName(n string) bool {
	return n != "" && n != "." && n != ".." && n != epollHackName && len(n) <= 255 &&
		!strings.ContainsAny(n, "/\x00")
}

// reserved returns the names (host layout: paths) the view uses itself:
// its placeholders and the name go-fuse intercepts. Install passes them as
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
	v.topLists.add(ns) // before any listing can start from it

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
		v.log.Debug("root revoked", zap.String("entry", name), zap.String("host", old.byName[name].inc.hostPath))
	}
	if err != nil {
		v.log.Warn("swap: kernel invalidation failed", zap.Error(err))
		return err
	}
	return nil
}

// snapshotOf builds the snapshot of t (v.mu held): entries whose name and host inode
// stay keep their incarnation (and so their nodes); the others get a new
// one. Entries with a reserved or placeholder name are hidden.
func (v *View) snapshotOf(t *Table, old *snapshot) *snapshot {
	v.snapGen++
	ns := &snapshot{gen: v.snapGen, table: t, byName: make(map[string]slot, len(t.Entries())), dirs: map[string][]string{"": nil}}
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
		if v.claimed(key, ns) {
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

// claimed reports whether key, or a directory on the way to it, is a
// placeholder or an entry of ns, or key is a directory leading to one.
func (v *View) claimed(key string, ns *snapshot) bool {
	if _, ok := v.phDirs[key]; ok {
		return true
	}
	if _, ok := ns.dirs[key]; ok {
		return true
	}
	for k := key; ; {
		if _, ok := v.placeholders[k]; ok && (k == key || !slices.Contains(v.opts.Beneath, k)) {
			return true
		}
		if _, ok := ns.byName[k]; ok {
			return true
		}
		i := strings.LastIndexByte(k, '/')
		if i < 0 {
			return false
		}
		k = k[:i]
	}
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
	if !v.mounted.Load() || testSkipInvalidate {
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
			if v.permanent(key) {
				if n := v.inodeAt(key); n != nil {
					n.NotifyContent(0, 0) // its listing changed
				}
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
		if _, existed := old.dirs[key]; !existed && key != "" && !v.permanent(key) {
			fresh(key)
		}
	}
	for key, names := range ns.dirs {
		if key != "" && !slices.Equal(names, old.dirs[key]) {
			if n := v.inodeAt(key); n != nil {
				n.NotifyContent(0, 0)
			}
		}
	}
	v.root.EmbeddedInode().NotifyContent(0, 0) // top-level attributes (nlink, mtime)
	return errors.Join(errs...)
}

// permanent reports whether the synthetic directory at key is there
// whatever the table: a placeholder or a directory leading to one. The
// kernel never holds a negative entry for it, and may hold mounts on or
// below it.
func (v *View) permanent(key string) bool {
	_, ph := v.placeholders[key]
	_, phDir := v.phDirs[key]
	return ph || phDir
}

// droppedAbove reports whether key or a directory above it is in dropped.
func droppedAbove(dropped map[string]bool, key string) bool {
	for k := key; ; {
		if dropped[k] {
			return true
		}
		i := strings.LastIndexByte(k, '/')
		if i < 0 {
			return false
		}
		k = k[:i]
	}
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
