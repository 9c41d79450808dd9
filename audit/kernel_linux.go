//go:build linux

package audit

// The kernel data path's part of the log: on that path the kernel serves
// what is below each root, and the daemon sees none of it, so the kernel
// reports it, to one fanotify group with file handles and names
// (FAN_REPORT_DFID_NAME). Its marks need CAP_SYS_ADMIN in the initial user
// namespace, so as root only.
//
//   - Closes (FAN_CLOSE_WRITE, FAN_CLOSE_NOWRITE) are reported by a mount
//     mark on each of the sandbox's own mounts at or below a root
//     (MarkSandbox): the binds the sandbox reaches the roots through are
//     mounts of its mount namespace, so the host's own reads and writes of
//     the same files, through the host's mounts, make no event at all.
//     Reads are counted at close, writes recorded at close: no event on
//     each read or write (the kernel may merge like events still queued,
//     so read counts are a lower bound).
//   - Creates, deletes, renames and attribute changes have no mount
//     marks (the kernel reports directory events by file system only), so
//     a filesystem mark on each root's file system reports them, the
//     host's too, which are dropped. These are rare beside reads.
//
// Until the sandbox's mounts are marked, and whenever a root is not
// covered by one, the filesystem mark reports closes too: complete, at
// the cost of an event for each close on that file system, the host's
// included.
//
// The group has two halves. The daemon (P1) makes it, marks, resolves
// each event's directory handle to a path and records it (KernelWatch).
// The sandbox's init (P2, PID 1 of the sandbox's PID namespace) reads it
// (Forward): the kernel gives each event's process as the reader's PID
// namespace numbers it, 0 for one outside it, so P2 tells the sandbox's
// processes from the host's when it reads the event, also for a process
// that has ended since (a short `rm`), and adds the command name from its
// own /proc. A pid in these records is the sandbox's. P2 reads in bursts:
// woken by the first event, it reads what has queued every burstGap until
// a read finds nothing, so a burst of events wakes nobody (a waiting
// reader costs the process that causes each event a wake-up).

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
)

// dirMask is what the filesystem marks always report, closeMask what the
// sandbox's mount marks report (and the filesystem marks until those
// cover every root). Closes of directories are not asked for: nothing is
// recorded of them.
const (
	dirMask   = unix.FAN_CREATE | unix.FAN_DELETE | unix.FAN_RENAME | unix.FAN_ATTRIB | unix.FAN_ONDIR
	closeMask = unix.FAN_CLOSE_WRITE | unix.FAN_CLOSE_NOWRITE
)

// KernelWatch feeds a Log with what the kernel serves below the roots to
// the sandbox's processes, as Forward passes it on. Close it.
type KernelWatch struct {
	l     *Log
	log   *zap.Logger
	group *os.File // the fanotify group: marks are added here; P2 reads it

	// mu guards the fields that follow.
	mu    sync.Mutex
	in    io.Closer         // the events Forward passes on, once Consume
	roots []RootPath        // longest host path first
	fs    map[[8]byte]int   // fsid -> a descriptor on it (open_by_handle_at)
	devs  map[uint64]bool   // devices marked (or that could not be)
	dirs  map[string]string // handle key -> directory path, bounded
	done  chan struct{}
	pid   int             // the sandbox's init, once MarkSandbox
	mnts  map[uint64]bool // the sandbox's mounts marked, by mount id
	// fsClose: the filesystem marks report closes, because the sandbox's
	// mounts do not (yet) cover every root.
	fsClose bool
}

// cacheMax bounds the directory cache.
const cacheMax = 4096

// NewKernelWatch makes the fanotify group (Group), to be given to the
// sandbox's init, which reads it (Forward); Consume then takes what it
// passes on. Marks need CAP_SYS_ADMIN in the initial user namespace:
// SetRoots says so once where it is missing.
func NewKernelWatch(l *Log, log *zap.Logger) (*KernelWatch, error) {
	if log == nil {
		log = zap.NewNop()
	}
	// Blocking: a non-blocking descriptor would join this process's
	// poller (os.NewFile), and every event would wake a thread of the
	// daemon, which never reads the group (Forward sets it non-blocking
	// in the sandbox's init).
	// Directory handles and names only: the object's own handle
	// (FAN_REPORT_FID) would cost every event a second one, unused.
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_REPORT_DFID_NAME, unix.O_RDONLY|unix.O_LARGEFILE)
	if err != nil {
		return nil, fmt.Errorf("audit of the kernel data path needs fanotify with file handles (Linux 5.9): %w", err)
	}
	return &KernelWatch{l: l, log: log, group: os.NewFile(uintptr(fd), "fanotify-audit"),
		fs: map[[8]byte]int{}, devs: map[uint64]bool{}, dirs: map[string]string{}, mnts: map[uint64]bool{},
		done: make(chan struct{}), fsClose: true}, nil
}

// Group is the fanotify group, for the sandbox's init to read (Forward).
func (w *KernelWatch) Group() *os.File { return w.group }

// Consume records what Forward passes on through r, until r ends or
// Close. It takes r.
func (w *KernelWatch) Consume(r io.ReadCloser) {
	w.mu.Lock()
	w.in = r
	w.mu.Unlock()
	go w.run(r)
}

// SetRoots sets the roots whose events are kept, marking the file systems
// not yet marked and, after MarkSandbox, the sandbox's mounts of new
// roots. Call it once the roots' binds are in place and before the server
// is told of them.
func (w *KernelWatch) SetRoots(roots []RootPath) {
	rs := append([]RootPath(nil), roots...)
	sort.Slice(rs, func(i, j int) bool { return len(rs[i].Host) > len(rs[j].Host) })
	for _, r := range rs {
		w.mark(r.Host)
	}
	w.mu.Lock()
	w.roots = rs
	w.dirs = map[string]string{} // a root may have moved
	pid := w.pid
	w.mu.Unlock()
	if pid != 0 {
		w.markMounts()
	}
}

// MarkSandbox marks the mounts of the sandbox whose init is pid (in this
// process's PID namespace) at or below each root, now and at each
// SetRoots, so that closes are reported for the sandbox's mounts only.
func (w *KernelWatch) MarkSandbox(pid int) {
	w.mu.Lock()
	w.pid = pid
	w.mu.Unlock()
	w.markMounts()
}

// markMounts marks the sandbox's mounts at or below a root, each once, and
// sets the filesystem marks' closes on or off by whether every root has a
// marked mount at its own path. A mount point is opened below the
// sandbox's root without following a symbolic link (a directory in a root
// is the server's to replace), and its mount id checked against the line
// that named it.
func (w *KernelWatch) markMounts() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pid == 0 || !w.anyMarkedLocked() {
		return
	}
	prefix := "/proc/" + strconv.Itoa(w.pid)
	mi, err := os.ReadFile(prefix + "/mountinfo")
	if err != nil {
		return // the sandbox is gone
	}
	rootFD, err := unix.Open(prefix+"/root", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(rootFD)
	covered := make([]bool, len(w.roots))
	live := map[uint64]bool{}
	failed := 0
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		id, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		mp := linux.UnescapeMountinfo(f[4])
		at := -1
		for i, r := range w.roots {
			if mp == r.View || strings.HasPrefix(mp, r.View+"/") {
				at = i
				break
			}
		}
		if at < 0 {
			continue
		}
		if w.mnts[id] || w.markMount(rootFD, mp, id) {
			live[id] = true
			if mp == w.roots[at].View {
				covered[at] = true
			}
			continue
		}
		failed++
	}
	w.mnts = live // marks of mounts gone went with them
	all := failed == 0
	for _, c := range covered {
		all = all && c
	}
	w.setFSCloseLocked(!all)
}

// markMount adds the close events of the mount at mp (the sandbox's path)
// whose mount id is id.
func (w *KernelWatch) markMount(rootFD int, mp string, id uint64) bool {
	rel := strings.TrimPrefix(mp, "/")
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(rootFD, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var stx unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx) != nil || stx.Mask&unix.STATX_MNT_ID == 0 || stx.Mnt_id != id {
		return false // another mount lies over it, or it moved: its own line marks it
	}
	err = unix.FanotifyMark(int(w.group.Fd()), unix.FAN_MARK_ADD|unix.FAN_MARK_MOUNT, closeMask, unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		w.log.Debug("audit log: a mount of the sandbox could not be marked; closes are reported by file system", zap.String("mount", mp), zap.Error(err))
		return false
	}
	return true
}

// anyMarkedLocked says whether a filesystem mark was made (without root,
// none is, and there is nothing to move to mount marks).
func (w *KernelWatch) anyMarkedLocked() bool {
	for _, ok := range w.devs {
		if ok {
			return true
		}
	}
	return false
}

// setFSCloseLocked adds or removes the closes of every filesystem mark.
func (w *KernelWatch) setFSCloseLocked(on bool) {
	if on == w.fsClose {
		return
	}
	op := uint(unix.FAN_MARK_REMOVE)
	if on {
		op = unix.FAN_MARK_ADD
	}
	for _, fd := range w.fs {
		if err := unix.FanotifyMark(int(w.group.Fd()), op|unix.FAN_MARK_FILESYSTEM, closeMask, unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd)); err != nil {
			w.log.Debug("audit log: a filesystem mark's closes could not be changed", zap.Bool("on", on), zap.Error(err))
			return
		}
	}
	w.fsClose = on
}

func (w *KernelWatch) mark(host string) {
	// open_by_handle_at wants a descriptor it can use as a mount fd: not O_PATH.
	fd, err := unix.Open(host, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	var st unix.Stat_t
	var sfs unix.Statfs_t
	if unix.Fstat(fd, &st) != nil || unix.Fstatfs(fd, &sfs) != nil {
		unix.Close(fd)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, done := w.devs[st.Dev]; done {
		unix.Close(fd)
		return
	}
	mask := uint64(dirMask)
	if w.fsClose {
		mask |= closeMask
	}
	err = unix.FanotifyMark(int(w.group.Fd()), unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, mask, unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd))
	w.devs[st.Dev] = err == nil
	if err != nil {
		w.log.Warn("audit log: what the kernel serves below this root is not recorded (fanotify filesystem marks need root, outside a user namespace); refusals and root changes are", zap.String("root", host), zap.Error(err))
		unix.Close(fd)
		return
	}
	var fsid [8]byte
	binary.NativeEndian.PutUint32(fsid[0:4], uint32(sfs.Fsid.Val[0]))
	binary.NativeEndian.PutUint32(fsid[4:8], uint32(sfs.Fsid.Val[1]))
	if old, ok := w.fs[fsid]; ok {
		unix.Close(old)
	}
	w.fs[fsid] = fd
}

// Close stops the watch.
func (w *KernelWatch) Close() {
	w.group.Close()
	w.mu.Lock()
	in := w.in
	w.mu.Unlock()
	if in != nil {
		in.Close()
		<-w.done
	}
	w.mu.Lock()
	for _, fd := range w.fs {
		unix.Close(fd)
	}
	w.fs = map[[8]byte]int{}
	w.mu.Unlock()
}

const kmetaLen = int(unsafe.Sizeof(unix.FanotifyEventMetadata{}))

// frameHead is a forwarded event's header: its length (of what follows)
// and the process's command name.
const frameHead = 4 + 16

// frameMax bounds a forwarded event (an event with two names).
const frameMax = 8 << 10

func (w *KernelWatch) run(r io.Reader) {
	defer close(w.done)
	br := bufio.NewReaderSize(r, 64<<10)
	head := make([]byte, frameHead)
	buf := make([]byte, frameMax)
	comm := ""
	for {
		if _, err := io.ReadFull(br, head); err != nil {
			return
		}
		n := int(binary.NativeEndian.Uint32(head[:4]))
		if n < kmetaLen || n > frameMax {
			w.log.Warn("audit log: a malformed event from the sandbox's init; the kernel data path's events stop here", zap.Int("len", n))
			return
		}
		if _, err := io.ReadFull(br, buf[:n]); err != nil {
			return
		}
		if c := bytes.TrimRight(head[4:], "\x00"); string(c) != comm {
			comm = string(c) // most events come from the process before
		}
		m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[0]))
		if int(m.Metadata_len) > n {
			continue
		}
		if m.Mask&unix.FAN_Q_OVERFLOW != 0 {
			w.l.drop(1, "the kernel's event queue overflowed")
			continue
		}
		if m.Mask&unix.FAN_RENAME != 0 && m.Mask&unix.FAN_ONDIR != 0 {
			// Whoever moved a directory (the sandbox or the user),
			// the paths cached below it changed.
			w.mu.Lock()
			w.dirs = map[string]string{}
			w.mu.Unlock()
		}
		if m.Pid == 0 {
			continue // a process outside the sandbox
		}
		w.event(m.Mask, int(m.Pid), comm, buf[int(m.Metadata_len):n])
	}
}

// Forward runs in the sandbox's init (PID 1 of the sandbox's PID
// namespace): it reads the events of group, whose processes the kernel
// numbers as this namespace does (0 for one outside it), and writes to out
// those of the sandbox's processes, each framed with its command name, and
// the directory renames and overflows of anyone (KernelWatch needs them).
// stop reads what is left in the queue and returns once written: call it
// before the init exits.
func Forward(group, out *os.File) (stop func()) {
	var mu sync.Mutex // one writer of out: the loop, then stop
	dead := false
	var batch []byte // the frames of one read, written at once
	pass := func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		batch = batch[:0]
		comms := map[int32]string{} // one read's events come from few processes
		defer func() {
			if len(batch) > 0 && !dead {
				if _, err := out.Write(batch); err != nil {
					dead = true // P1 is gone: the events go nowhere
				}
			}
		}()
		for len(b) >= kmetaLen && !dead {
			m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&b[0]))
			el := int(m.Event_len)
			if el < kmetaLen || el > len(b) || el > frameMax {
				return
			}
			ev := b[:el]
			b = b[el:]
			if m.Fd >= 0 {
				unix.Close(int(m.Fd))
			}
			keep := m.Pid != 0 || m.Mask&unix.FAN_Q_OVERFLOW != 0 || m.Mask&unix.FAN_RENAME != 0 && m.Mask&unix.FAN_ONDIR != 0
			if !keep || m.Mask&^(unix.FAN_CLOSE|unix.FAN_ONDIR) == 0 && m.Mask&unix.FAN_ONDIR != 0 {
				continue // the host's, or a directory closed (nothing is recorded of those)
			}
			var head [frameHead]byte
			binary.NativeEndian.PutUint32(head[:4], uint32(el))
			if m.Pid > 0 {
				c, ok := comms[m.Pid]
				if !ok {
					c = Comm(int(m.Pid))
					comms[m.Pid] = c
				}
				copy(head[4:], c)
			}
			batch = append(append(batch, head[:]...), ev...)
		}
	}
	// The group's descriptor is read with system calls of our own, out of
	// Go's poller, whose registration would have the kernel wake a thread
	// at every event.
	fd, err := unix.Dup(int(group.Fd()))
	group.Close()
	if err != nil {
		out.Close()
		return func() {}
	}
	_ = unix.SetNonblock(fd, true)
	var wake [2]int // stop writes to wake[1] to end a wait
	if err := unix.Pipe2(wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(fd)
		out.Close()
		return func() {}
	}
	var stopping atomic.Bool
	buf := make([]byte, 64<<10)
	// read passes on what has queued and says whether there was any: all
	// of it, or (a burst's read) until a read comes back less than half
	// full, when the queue is not filling.
	read := func(all bool) bool {
		any := false
		for {
			k, err := unix.Read(fd, buf)
			if err != nil || k <= 0 {
				return any
			}
			any = true
			pass(buf[:k])
			if !all && k < len(buf)/2 {
				return true
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake[0]), Events: unix.POLLIN}}
		for !stopping.Load() {
			if _, err := unix.Poll(pfd, -1); err != nil && err != unix.EINTR {
				return
			}
			if pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
				return
			}
			for !stopping.Load() && read(false) {
				time.Sleep(burstGap)
			}
		}
	}()
	return func() {
		stopping.Store(true)
		_, _ = unix.Write(wake[1], []byte{0})
		<-done
		read(true)
		unix.Close(fd)
		unix.Close(wake[0])
		unix.Close(wake[1])
		out.Close()
	}
}

// burstGap is the pause between two reads of a burst of events: at the
// fastest the kernel makes them (about 300,000 a second here), its queue
// (16,384 events) holds 50 ms of them.
const burstGap = 2 * time.Millisecond

// dir resolves a directory's handle to its host path, from the cache or
// by opening it.
func (w *KernelWatch) dir(in linux.FanotifyInfo) (string, bool) {
	w.mu.Lock()
	p, ok := w.dirs[string(in.Key)]
	mfd, have := w.fs[in.Fsid()]
	w.mu.Unlock()
	if ok {
		return p, true
	}
	if !have {
		return "", false
	}
	h := unix.NewFileHandle(in.HandleType, in.Handle)
	fd, err := unix.OpenByHandleAt(mfd, h, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return "", false
	}
	p, err = os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	unix.Close(fd)
	if err != nil || strings.HasSuffix(p, " (deleted)") {
		return "", false
	}
	w.mu.Lock()
	if len(w.dirs) >= cacheMax {
		w.dirs = map[string]string{}
	}
	w.dirs[string(in.Key)] = p
	w.mu.Unlock()
	return p, true
}

// view maps a host path to the sandbox's path, if it is below a root.
func (w *KernelWatch) view(host string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.roots {
		if rest, ok := strings.CutPrefix(host, r.Host); ok && (rest == "" || rest[0] == '/') {
			return r.View + rest, true
		}
	}
	return "", false
}

func (w *KernelWatch) event(mask uint64, pid int, comm string, b []byte) {
	var from, to string
	var fromHost string
	linux.FanotifyInfos(b, func(in linux.FanotifyInfo) bool {
		if in.Type != unix.FAN_EVENT_INFO_TYPE_DFID_NAME && in.Type != unix.FAN_EVENT_INFO_TYPE_OLD_DFID_NAME && in.Type != unix.FAN_EVENT_INFO_TYPE_NEW_DFID_NAME {
			return true
		}
		d, ok := w.dir(in)
		if !ok {
			return true
		}
		host := d
		if len(in.Name) > 0 && string(in.Name) != "." {
			host = d + "/" + string(in.Name)
		}
		v, ok := w.view(host)
		if !ok {
			return true
		}
		if in.Type == unix.FAN_EVENT_INFO_TYPE_NEW_DFID_NAME {
			to = v
		} else {
			from, fromHost = v, host
		}
		return true
	})
	if mask&unix.FAN_RENAME != 0 {
		if from == "" && to == "" {
			return
		}
		w.l.Add(Record{Op: OpRename, Path: from, Host: fromHost, Dest: to, PID: pid, Comm: comm, innerPID: true})
		return
	}
	if from == "" {
		return
	}
	// The kernel merges like events still queued (same object, same
	// process) into one with every bit set: each bit is a record, in the
	// order they happen.
	add := func(op string) {
		w.l.Add(Record{Op: op, Path: from, Host: fromHost, PID: pid, Comm: comm, innerPID: true})
	}
	if mask&unix.FAN_CREATE != 0 {
		add(OpCreate)
	}
	if mask&unix.FAN_CLOSE_NOWRITE != 0 && mask&unix.FAN_ONDIR == 0 {
		w.l.read(from, fromHost, pid, true)
	}
	if mask&unix.FAN_ATTRIB != 0 {
		add(OpAttr)
	}
	if mask&unix.FAN_CLOSE_WRITE != 0 {
		add(OpWrite)
	}
	if mask&unix.FAN_DELETE != 0 {
		add(OpDelete)
	}
}
