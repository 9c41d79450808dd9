//go:build linux

package vfs

import (
	"context"
	"errors"
	iofs "io/fs"
	"log"
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

	"github.com/rootfs-dev/rootfs/rootset"
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

	ph *placeholders // the view's own names (viewpaths.go)
	sw swapState     // the snapshot served, and what replaces it (swap_linux.go)

	relief  reliefState // the descriptor relief (fdrelief_linux.go)
	profile *os.File    // Options.CPUProfile; guarded by sw.mu

	nextGen atomic.Uint64             // the last StableAttr.Gen given (rootInc.gen, node.renew)
	mounted atomic.Bool               // the root was attached to a go-fuse bridge
	self    atomic.Pointer[mountSelf] // where View.Mount mounted the view (install_linux.go)

	renewed sync.Map   // renewKey -> uint64 (node.renew)
	watch   *hostWatch // nil: host changes are not watched (hostwatch_linux.go)
}

// NewView returns a view serving an empty table.
func NewView(opts Options) *View {
	v := &View{
		opts:  opts,
		log:   opts.Logger,
		euid:  uint32(os.Geteuid()),
		umask: readUmask(),
		start: time.Now(),
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
	v.ph = newPlaceholders(opts.Placeholders, opts.Layout, v.opts.Beneath, v.log)
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
	v.sw.snapGen++
	first := &snapshot{gen: v.sw.snapGen, table: rootset.EmptyTable(), byName: map[string]slot{}, dirs: map[string][]string{"": nil}}
	v.sw.lists.add(first)
	v.sw.cur.Store(first)
	return v
}

// reserved returns the names (host layout: paths) the view uses itself
// (placeholders.reserved).
func (v *View) reserved() []string { return v.ph.reserved() }

// Table returns the table being served. It is immutable and never nil; it
// stays valid until the next Install.
func (v *View) Table() *rootset.Table { return v.current().table }

// Entries returns the entries being served, in listing order: the
// table's, minus any hidden by a reserved name. Like Table, they stay
// valid until the next Install.
func (v *View) Entries() []*rootset.Entry {
	s := v.current()
	out := make([]*rootset.Entry, 0, len(s.order))
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

// Close revokes every entry and closes the current table. Call it after
// unmounting; Install fails with ErrClosed afterwards.
func (v *View) Close() error {
	sw := &v.sw
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.closed {
		return nil
	}
	sw.closed = true
	v.stopProfile()
	if v.watch != nil {
		v.watch.close()
	}
	s := sw.cur.Load()
	for _, sl := range s.byName {
		sl.inc.revoked.Store(true)
	}
	sw.closeMu.Lock()
	defer sw.closeMu.Unlock()
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
