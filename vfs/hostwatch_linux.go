//go:build linux

package vfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
	"weak"

	"github.com/hanwen/go-fuse/v2/fs"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/linux"
)

// The host watcher lets the kernel cache names, attributes, negative
// lookups, directory listings and file pages for long (watchedCacheTimeout)
// and still show a change made on the host at once. It is one fanotify
// group with a filesystem mark on every file system a root lives on
// (FAN_MARK_FILESYSTEM, which needs CAP_SYS_ADMIN in the initial user
// namespace), reporting directory and object file handles and names
// (FAN_REPORT_DFID_NAME|FAN_REPORT_FID). Each event is matched to the view's
// nodes by file handle and turned into the FUSE notification that drops
// exactly what the change made stale:
//
//	create, delete, move in D of N  -> FUSE_NOTIFY_INVAL_ENTRY(D, N), and D's
//	                                   attributes and cached listing
//	modify of F (D/N)               -> F's attributes and pages
//	attrib of F (D/N)               -> F's attributes
//
// Directories, entries and files with more than one link are indexed by
// their own handle; any other file is found as the child N of its
// directory. Events caused by the daemon itself (changes made through the
// view, which the kernel already knows) are dropped, unless the changed
// host inode is reachable through more than one node (nested roots, or a
// directory seen twice), when the other aliases are stale too.
//
// Where the watcher cannot run (no CAP_SYS_ADMIN, a user namespace, a
// kernel without fanotify FID reporting) or cannot mark a file system, or a
// node cannot be indexed (no file handles), the kernel caches that node for
// Options.CacheTimeout only.

// watchedCacheTimeout is how long the kernel may cache what the host watcher
// covers.
const watchedCacheTimeout = time.Hour

// atHandleFID asks name_to_handle_at for a handle that need not be
// decodable (Linux 6.5+), the kind fanotify reports for file systems that
// cannot be exported.
const atHandleFID = 0x200

const watchMask = unix.FAN_MODIFY | unix.FAN_ATTRIB | unix.FAN_CREATE | unix.FAN_DELETE |
	unix.FAN_MOVED_FROM | unix.FAN_MOVED_TO | unix.FAN_DELETE_SELF | unix.FAN_MOVE_SELF | unix.FAN_ONDIR

const direntEvents = unix.FAN_CREATE | unix.FAN_DELETE | unix.FAN_MOVED_FROM | unix.FAN_MOVED_TO

// watchedView is all the host watcher knows of the view: whether it
// serves a mount (notifications reach a kernel), its top-level inode, and
// the snapshot it serves.
type watchedView interface {
	serving() bool
	top() *fs.Inode
	current() *snapshot
}

func (v *View) serving() bool  { return v.mounted.Load() }
func (v *View) top() *fs.Inode { return v.root.EmbeddedInode() }

// hostWatch is the host watcher. It owns its state; the view reaches it
// through watchNode, hostGen, shortCache and close.
type hostWatch struct {
	v     watchedView
	log   *zap.Logger
	short time.Duration // the cache timeout of what it does not cover
	f     *os.File
	pid   int32
	dead  atomic.Bool // the watcher stopped: cache for the short timeout

	stopR, stopW int // a pipe that stops watchMounts

	// gen counts batches of host changes acted on; a lookup that overlaps
	// one is cached for the short timeout only (its reply may predate the
	// change and reach the kernel after the invalidation).
	gen atomic.Uint64

	mu    sync.Mutex
	devs  map[uint64]devWatch
	nodes map[string][]weak.Pointer[node] // handle key -> nodes

	pt ptWindows // writable passthrough handles (hostwatch_pt_linux.go)
}

type devWatch struct {
	fsid [8]byte
	ok   bool
}

func newHostWatch(v watchedView, log *zap.Logger, short time.Duration) (*hostWatch, error) {
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK|
		unix.FAN_UNLIMITED_QUEUE|unix.FAN_REPORT_DFID_NAME|unix.FAN_REPORT_FID, unix.O_RDONLY|unix.O_LARGEFILE)
	if err != nil {
		return nil, err
	}
	w := &hostWatch{
		v:     v,
		log:   log,
		short: short,
		f:     os.NewFile(uintptr(fd), "fanotify"),
		pid:   int32(os.Getpid()),
		devs:  map[uint64]devWatch{},
		nodes: map[string][]weak.Pointer[node]{},
	}
	w.stopR, w.stopW = -1, -1
	var p [2]int
	mi, err := os.Open("/proc/self/mountinfo")
	if err == nil {
		err = unix.Pipe2(p[:], unix.O_CLOEXEC)
	}
	if err == nil {
		w.stopR, w.stopW = p[0], p[1]
		// The table as of now, before any lookup can cache what a later
		// mount covers.
		go w.watchMounts(mi, mountPoints(mi))
	} else {
		log.Debug("host watcher: mount changes are not watched", zap.Error(err))
		if mi != nil {
			mi.Close()
		}
	}
	go w.run()
	return w, nil
}

func (w *hostWatch) close() {
	w.f.Close()
	if w.stopW >= 0 {
		unix.Close(w.stopW) // wakes watchMounts, which closes stopR
	}
}

// markFS puts a filesystem mark on the file system of fd (device dev) once,
// and reports whether that file system is watched.
func (w *hostWatch) markFS(fd int, dev uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d, ok := w.devs[dev]; ok {
		return d.ok
	}
	var d devWatch
	var sfs unix.Statfs_t
	err := unix.Fstatfs(fd, &sfs)
	if err == nil && !localFS[int64(sfs.Type)] {
		err = fmt.Errorf("file system type %#x is not a local one whose every change this kernel reports", sfs.Type)
	}
	if err == nil {
		binary.NativeEndian.PutUint32(d.fsid[0:4], uint32(sfs.Fsid.Val[0]))
		binary.NativeEndian.PutUint32(d.fsid[4:8], uint32(sfs.Fsid.Val[1]))
		err = unix.FanotifyMark(int(w.f.Fd()), unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, watchMask, unix.AT_FDCWD, procPath(fd))
	}
	d.ok = err == nil
	w.devs[dev] = d
	if err != nil {
		w.log.Debug("host changes on this file system are not watched; the kernel caches it for the short timeout",
			zap.Uint64("dev", dev), zap.Duration("timeout", w.short), zap.Error(err))
	}
	return d.ok
}

// localFS are the file systems on which every change is made by this
// kernel, so a filesystem mark sees it. Network and FUSE file systems
// (NFS, CIFS, 9p, Ceph, sshfs...) change under other machines or daemons
// and are cached for the short timeout only.
var localFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:      true, // also ext2, ext3
	unix.XFS_SUPER_MAGIC:       true,
	unix.BTRFS_SUPER_MAGIC:     true,
	unix.TMPFS_MAGIC:           true,
	unix.F2FS_SUPER_MAGIC:      true,
	0xca451a4e:                 true, // bcachefs
	unix.OVERLAYFS_SUPER_MAGIC: true,
}

// key returns the index key of the inode (dirfd, name): its file system's
// fsid, then the handle as fanotify reports it (length, type, bytes).
func (w *hostWatch) key(dirfd int, name string, dev uint64) (string, bool) {
	w.mu.Lock()
	d := w.devs[dev]
	w.mu.Unlock()
	flags := 0
	if name == "" {
		flags = unix.AT_EMPTY_PATH
	}
	h, _, err := unix.NameToHandleAt(dirfd, name, flags)
	if errors.Is(err, unix.EOPNOTSUPP) {
		h, _, err = unix.NameToHandleAt(dirfd, name, flags|atHandleFID)
	}
	if err != nil || !d.ok {
		return "", false
	}
	b := make([]byte, 16+h.Size())
	copy(b, d.fsid[:])
	binary.NativeEndian.PutUint32(b[8:12], uint32(h.Size()))
	binary.NativeEndian.PutUint32(b[12:16], uint32(h.Type()))
	copy(b[16:], h.Bytes())
	return string(b), true
}

func (w *hostWatch) add(key string, n *node) {
	w.mu.Lock()
	w.nodes[key] = append(w.nodes[key], weak.Make(n))
	w.mu.Unlock()
	runtime.AddCleanup(n, w.drop, key)
}

// drop forgets the collected nodes under key.
func (w *hostWatch) drop(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.nodes[key][:0]
	for _, p := range w.nodes[key] {
		if p.Value() != nil {
			list = append(list, p)
		}
	}
	if len(list) == 0 {
		delete(w.nodes, key)
	} else {
		w.nodes[key] = list
	}
}

// find returns the live nodes indexed under key (a byte slice, so that the
// map lookup does not allocate).
func (w *hostWatch) find(key []byte) []*node {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*node
	for _, p := range w.nodes[string(key)] {
		if n := p.Value(); n != nil && !n.inc.revoked.Load() {
			out = append(out, n)
		}
	}
	return out
}

// watchNode decides whether the kernel may cache ch (a new child of parent
// under name, or an entry when parent is nil) for long, and indexes it when
// events must be able to find it by its own handle.
func (v *View) watchNode(ch, parent *node, name string, st *syscall.Stat_t) {
	w := v.watch
	if w == nil {
		return
	}
	switch {
	case parent != nil && st.Dev == parent.dev:
		ch.watched = parent.watched
	case ch.fd >= 0:
		ch.watched = w.markFS(ch.fd, st.Dev)
	}
	if !ch.watched || (parent != nil && ch.kind != syscall.S_IFDIR && st.Nlink < 2) {
		return
	}
	var key string
	var ok bool
	if ch.fd >= 0 {
		key, ok = w.key(ch.fd, "", st.Dev)
	} else if name != "" {
		key, ok = w.key(parent.fd, name, st.Dev)
		// The name is resolved again: make sure it still names ch, or
		// the index would hold another inode's handle.
		var again syscall.Stat_t
		if ok && (unix.Fstatat(parent.fd, name, (*unix.Stat_t)(unsafe.Pointer(&again)), unix.AT_SYMLINK_NOFOLLOW) != nil || !ch.same(&again)) {
			ok = false
		}
	}
	if !ok {
		ch.watched = false
		return
	}
	w.add(key, ch)
}

// hostGen is the watcher's count of acted-on host changes (0 without one).
func (v *View) hostGen() uint64 {
	if v.watch == nil {
		return 0
	}
	return v.watch.gen.Load()
}

// shortTimeout is the cache timeout of what the watcher does not cover.
func (v *View) shortTimeout() time.Duration { return v.opts.cacheTimeout() }

// shortCache reports whether the kernel may cache n only for the short
// timeout although the mount's defaults are long: the watcher does not
// cover n, or it has stopped, or n is open for writing through passthrough
// (its modifications are not acted on meanwhile: see passthroughWriter).
func (n *node) shortCache() bool {
	return n.v.watch != nil && (!n.watched || n.v.watch.dead.Load() || n.v.watch.ptWriting(n))
}

// cacheTimes sets the reply's timeouts for a node the watcher does not
// cover; the mount's defaults (long) apply to the others.
func (n *node) cacheTimes(out interface {
	SetEntryTimeout(time.Duration)
	SetAttrTimeout(time.Duration)
}) {
	if n.shortCache() {
		out.SetEntryTimeout(n.v.shortTimeout())
		out.SetAttrTimeout(n.v.shortTimeout())
	}
}

func (n *node) attrTimes(out interface{ SetTimeout(time.Duration) }) {
	if n.shortCache() {
		out.SetTimeout(n.v.shortTimeout())
	}
}

func (w *hostWatch) run() {
	buf := make([]byte, 64<<10)
	for {
		k, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.log.Warn("host watcher stopped; host changes show after the short timeout", zap.Error(err))
				w.dead.Store(true)
			}
			return
		}
		if control.On(control.NoHostEvents) {
			continue
		}
		w.dispatch(buf[:k])
	}
}

// action is one notification to send.
type action struct {
	n     *node
	entry string // FUSE_NOTIFY_INVAL_ENTRY of this name in n first
	data  bool   // drop pages too, not only attributes
	// reLookup: also drop n's own dentries, so that the kernel looks the
	// file up again and the view can renew its inode (node.renewable).
	reLookup bool
	// entryOnly: only the entry, not n's attributes or listing.
	entryOnly bool
}

const metaLen = int(unsafe.Sizeof(unix.FanotifyEventMetadata{}))

// dispatch parses a read's worth of events and sends the notifications.
func (w *hostWatch) dispatch(b []byte) {
	var acts []action
	overflow := false
	for len(b) >= metaLen {
		m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&b[0]))
		el := int(m.Event_len)
		if el < metaLen || el > len(b) || m.Vers != unix.FANOTIFY_METADATA_VERSION || int(m.Metadata_len) > el {
			w.log.Warn("host watcher: malformed fanotify event; dropped the rest of the read", zap.Int("len", el))
			break
		}
		ev := b[:el]
		b = b[el:]
		if m.Fd >= 0 {
			unix.Close(int(m.Fd))
		}
		if m.Mask&unix.FAN_Q_OVERFLOW != 0 {
			overflow = true
			continue
		}
		acts = w.event(acts, m.Mask, m.Pid == w.pid, ev[m.Metadata_len:])
	}
	if overflow {
		acts = append(acts, w.everything()...)
		w.log.Warn("host watcher: event queue overflowed; dropped every cached attribute and listing (negative lookups stay cached until the timeout)")
	}
	if len(acts) == 0 {
		return
	}
	w.gen.Add(1)
	for _, a := range acts {
		w.notify(a)
	}
}

// event appends the actions for one event's info records.
func (w *hostWatch) event(acts []action, mask uint64, self bool, info []byte) []action {
	linux.FanotifyInfos(info, func(in linux.FanotifyInfo) bool {
		nodes := w.find(in.Key)
		if len(nodes) == 0 || (self && len(nodes) < 2) {
			return true
		}
		typ := in.Type
		name := ""
		if typ == unix.FAN_EVENT_INFO_TYPE_DFID_NAME {
			name = string(in.Name)
		}
		data := mask&unix.FAN_MODIFY != 0
		reLookup := mask&(unix.FAN_MODIFY|unix.FAN_ATTRIB) != 0
		switch {
		case typ == unix.FAN_EVENT_INFO_TYPE_FID:
			for _, n := range nodes {
				if !w.ptDefer(n, mask) {
					acts = append(acts, action{n: n, data: data, reLookup: reLookup && n.kind == syscall.S_IFREG})
				}
			}
		case typ == unix.FAN_EVENT_INFO_TYPE_DFID_NAME && name != "" && name != ".":
			for _, d := range nodes {
				if mask&direntEvents != 0 {
					acts = append(acts, action{n: d, entry: name, data: true})
				}
				if ch := d.GetChild(name); ch != nil {
					if cn, ok := ch.Operations().(*node); ok && !w.ptDefer(cn, mask) {
						acts = append(acts, action{n: cn, data: data, reLookup: reLookup && cn.kind == syscall.S_IFREG})
					}
				} else if mask&direntEvents == 0 {
					// Not in the tree (yet): a lookup of it may be in
					// flight with attributes read before this change.
					// The kernel holds the directory while it looks a
					// name up, so this waits for that lookup and then
					// drops what it cached.
					acts = append(acts, action{n: d, entry: name, entryOnly: true})
				}
			}
		case typ == unix.FAN_EVENT_INFO_TYPE_DFID_NAME || typ == unix.FAN_EVENT_INFO_TYPE_DFID:
			for _, n := range nodes {
				acts = append(acts, action{n: n})
			}
		}
		return true
	})
	return acts
}

// everything returns actions that drop what the kernel caches of every
// indexed node and its children, after lost events.
func (w *hostWatch) everything() []action {
	w.mu.Lock()
	var all []*node
	for _, list := range w.nodes {
		for _, p := range list {
			if n := p.Value(); n != nil {
				all = append(all, n)
			}
		}
	}
	w.mu.Unlock()
	var acts []action
	for _, n := range all {
		if n.EmbeddedInode().Operations() == nil {
			continue // never taken by go-fuse (notify)
		}
		acts = append(acts, action{n: n, data: true})
		for name, ch := range n.Children() {
			acts = append(acts, action{n: n, entry: name, data: true})
			if cn, ok := ch.Operations().(*node); ok {
				acts = append(acts, action{n: cn, data: true})
			}
		}
	}
	return acts
}

func (w *hostWatch) notify(a action) {
	testStats.notified.Add(1)
	in := a.n.EmbeddedInode()
	if in.Operations() == nil {
		// A node indexed by watchNode whose Inode go-fuse never took
		// (NewInode gave an Inode it already had for the same inode, as
		// a racing lookup does): the kernel knows it by the other one.
		return
	}
	if a.entry != "" {
		w.dropEntry(in, a.entry)
		if a.entryOnly {
			return
		}
	}
	off := int64(-1)
	if a.data {
		off = 0
	}
	if errno := in.NotifyContent(off, 0); !benignNotify(errno) {
		w.log.Debug("host watcher: inode invalidation failed", zap.Error(errno))
	}
	if a.reLookup {
		if name, p := in.Parent(); p != nil {
			w.dropEntry(p, name)
		}
	}
}

// dropEntry drops the kernel's entry of name in dir (FUSE_NOTIFY_INVAL_ENTRY).
func (w *hostWatch) dropEntry(dir *fs.Inode, name string) {
	if errno := dir.NotifyEntry(name); !benignNotify(errno) {
		w.log.Debug("host watcher: entry invalidation failed", zap.String("name", name), zap.Error(errno))
	}
}
