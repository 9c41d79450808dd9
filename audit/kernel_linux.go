//go:build linux

package audit

// The kernel data path's part of the log: on that path the kernel serves
// what is below each root, and the daemon sees none of it, so the kernel
// reports it. One fanotify group with a filesystem mark on each root's
// file system (FAN_MARK_FILESYSTEM: CAP_SYS_ADMIN in the initial user
// namespace, so as root only) reports creates, deletes, renames, attribute
// changes and closes, each with its directory's handle and the name; an
// event is kept when its process is in the sandbox's PID namespace and its
// path is below a root. Reads are counted at close (FAN_CLOSE_NOWRITE),
// writes recorded at close (FAN_CLOSE_WRITE): no event on each read or
// write, so the server's I/O is not slowed (the kernel may merge like
// events still queued, so read counts are a lower bound). The group's queue is the
// kernel's default (bounded); when it overflows, the loss is counted.
//
// Known gaps. The PID filter asks /proc when it reads an event, so an
// event of a sandbox process that has already ended by then (a short
// `rm` or `cp`) is not recorded: its PID namespace can no longer be
// told. The filesystem marks make every change and close on the roots'
// file systems an event, the host's own processes' too, which the daemon
// reads and drops: the host pays for them while an audited session runs
// (BENCHMARKS.md).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

const kernelMask = unix.FAN_CREATE | unix.FAN_DELETE | unix.FAN_RENAME | unix.FAN_ATTRIB |
	unix.FAN_CLOSE_WRITE | unix.FAN_CLOSE_NOWRITE | unix.FAN_ONDIR

// KernelWatch feeds a Log with what the kernel serves below the roots to
// the processes of one PID namespace. Close it.
type KernelWatch struct {
	l     *Log
	log   *zap.Logger
	f     *os.File
	pidns string // "pid:[N]", as /proc/PID/ns/pid reads

	// mu guards the fields that follow.
	mu    sync.Mutex
	roots []RootPath        // longest host path first
	fs    map[[8]byte]int   // fsid -> a descriptor on it (open_by_handle_at)
	devs  map[uint64]bool   // devices marked (or that could not be)
	dirs  map[string]string // handle key -> directory path, bounded
	pids  map[int32]pidSeen // pid -> in the sandbox, bounded
	done  chan struct{}
}

// cacheMax bounds the directory cache; pidCacheMax, the pid cache, each
// of whose entries holds a descriptor.
const (
	cacheMax    = 4096
	pidCacheMax = 512
)

// pidSeen is what the watch learnt of a pid: whether its process is in
// the sandbox, and a pidfd of that process, which says when it has ended
// and its pid may be another process's.
type pidSeen struct {
	in bool
	fd int
}

// NewKernelWatch watches for the processes in the PID namespace of pid
// (the sandbox's init). It needs CAP_SYS_ADMIN in the initial user
// namespace; the error says so.
func NewKernelWatch(l *Log, pid int, log *zap.Logger) (*KernelWatch, error) {
	if log == nil {
		log = zap.NewNop()
	}
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return nil, fmt.Errorf("audit of the kernel data path: %w", err)
	}
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK|unix.FAN_REPORT_DFID_NAME|unix.FAN_REPORT_FID, unix.O_RDONLY|unix.O_LARGEFILE)
	if err != nil {
		return nil, fmt.Errorf("audit of the kernel data path needs fanotify filesystem marks (root, not in a user namespace): %w", err)
	}
	w := &KernelWatch{l: l, log: log, f: os.NewFile(uintptr(fd), "fanotify-audit"), pidns: ns,
		fs: map[[8]byte]int{}, devs: map[uint64]bool{}, dirs: map[string]string{}, pids: map[int32]pidSeen{}, done: make(chan struct{})}
	go w.run()
	return w, nil
}

// SetRoots sets the roots whose events are kept, marking the file systems
// not yet marked.
func (w *KernelWatch) SetRoots(roots []RootPath) {
	rs := append([]RootPath(nil), roots...)
	sort.Slice(rs, func(i, j int) bool { return len(rs[i].Host) > len(rs[j].Host) })
	for _, r := range rs {
		w.mark(r.Host)
	}
	w.mu.Lock()
	w.roots = rs
	w.dirs = map[string]string{} // a root may have moved
	w.mu.Unlock()
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
	err = unix.FanotifyMark(int(w.f.Fd()), unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, kernelMask, unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd))
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
	w.f.Close()
	<-w.done
	w.mu.Lock()
	for _, fd := range w.fs {
		unix.Close(fd)
	}
	w.fs = map[[8]byte]int{}
	w.forgetPIDsLocked()
	w.mu.Unlock()
}

func (w *KernelWatch) forgetPIDsLocked() {
	for _, e := range w.pids {
		unix.Close(e.fd)
	}
	w.pids = map[int32]pidSeen{}
}

const kmetaLen = int(unsafe.Sizeof(unix.FanotifyEventMetadata{}))

func (w *KernelWatch) run() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		k, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.log.Warn("audit log: the kernel data path's events stopped", zap.Error(err))
			}
			return
		}
		b := buf[:k]
		for len(b) >= kmetaLen {
			m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&b[0]))
			el := int(m.Event_len)
			if el < kmetaLen || el > len(b) || int(m.Metadata_len) > el {
				break
			}
			ev := b[int(m.Metadata_len):el]
			b = b[el:]
			if m.Fd >= 0 {
				unix.Close(int(m.Fd))
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
			if !w.inSandbox(m.Pid) {
				continue
			}
			w.event(m.Mask, int(m.Pid), ev)
		}
	}
}

// inSandbox reports whether pid is a process of the sandbox. The answer
// is cached with a pidfd of the process it was asked of: pids are reused
// (pid_max may be 32768, and a server can cycle through them), and a
// cached answer about a pid's former owner must neither hide the sandbox's
// process that has it now nor show a host process's events.
func (w *KernelWatch) inSandbox(pid int32) bool {
	w.mu.Lock()
	e, ok := w.pids[pid]
	w.mu.Unlock()
	if ok {
		if !ended(e.fd) || !running(pid) {
			// The same process, or it ended and no other has its pid:
			// the event is that process's.
			return e.in
		}
		w.mu.Lock()
		delete(w.pids, pid)
		w.mu.Unlock()
		unix.Close(e.fd)
	}
	fd, err := unix.PidfdOpen(int(pid), 0)
	ns, nerr := os.Readlink("/proc/" + strconv.Itoa(int(pid)) + "/ns/pid")
	in := nerr == nil && ns == w.pidns
	if err != nil {
		return in // gone, or no pidfds (before Linux 5.3): not kept
	}
	if ended(fd) {
		// It ended while asked: the answer may be of the pid's next
		// owner, so it is not kept.
		unix.Close(fd)
		return in
	}
	w.mu.Lock()
	if len(w.pids) >= pidCacheMax {
		w.forgetPIDsLocked()
	}
	w.pids[pid] = pidSeen{in: in, fd: fd}
	w.mu.Unlock()
	return in
}

// ended reports whether the process of pidfd fd has ended.
func ended(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	return err != nil || n > 0
}

// running reports whether some process has pid now.
func running(pid int32) bool {
	return !errors.Is(unix.Kill(int(pid), 0), unix.ESRCH)
}

// info is one DFID_NAME record: the directory's handle key and the name.
type info struct {
	typ  byte
	fsid [8]byte
	key  string // fsid + handle type + handle
	htyp int32
	h    []byte
	name string
}

func parseInfo(b []byte) []info {
	var out []info
	for len(b) >= 4 {
		typ := b[0]
		l := int(binary.NativeEndian.Uint16(b[2:4]))
		if l < 4 || l > len(b) {
			break
		}
		rec := b[4:l]
		b = b[l:]
		if len(rec) < 16 {
			continue
		}
		hb := int(binary.NativeEndian.Uint32(rec[8:12]))
		if 16+hb > len(rec) {
			continue
		}
		in := info{typ: typ, key: string(rec[:16+hb]), htyp: int32(binary.NativeEndian.Uint32(rec[12:16])), h: rec[16 : 16+hb]}
		copy(in.fsid[:], rec[:8])
		if nm := rec[16+hb:]; len(nm) > 0 {
			if i := bytes.IndexByte(nm, 0); i >= 0 {
				nm = nm[:i]
			}
			in.name = string(nm)
		}
		out = append(out, in)
	}
	return out
}

// dir resolves a directory handle to its host path.
func (w *KernelWatch) dir(in info) (string, bool) {
	w.mu.Lock()
	p, ok := w.dirs[in.key]
	mfd, have := w.fs[in.fsid]
	w.mu.Unlock()
	if ok {
		return p, true
	}
	if !have {
		return "", false
	}
	h := unix.NewFileHandle(in.htyp, in.h)
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
	w.dirs[in.key] = p
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

func (w *KernelWatch) event(mask uint64, pid int, b []byte) {
	var from, to string
	var fromHost string
	for _, in := range parseInfo(b) {
		if in.typ != unix.FAN_EVENT_INFO_TYPE_DFID_NAME && in.typ != unix.FAN_EVENT_INFO_TYPE_OLD_DFID_NAME && in.typ != unix.FAN_EVENT_INFO_TYPE_NEW_DFID_NAME {
			continue
		}
		d, ok := w.dir(in)
		if !ok {
			continue
		}
		host := d
		if in.name != "" && in.name != "." {
			host = d + "/" + in.name
		}
		v, ok := w.view(host)
		if !ok {
			continue
		}
		if in.typ == unix.FAN_EVENT_INFO_TYPE_NEW_DFID_NAME {
			to = v
		} else {
			from, fromHost = v, host
		}
	}
	if mask&unix.FAN_RENAME != 0 {
		if from == "" && to == "" {
			return
		}
		w.l.Add(Record{Op: OpRename, Path: from, Host: fromHost, Dest: to, PID: pid, Comm: Comm(pid)})
		return
	}
	if from == "" {
		return
	}
	// The kernel merges like events still queued (same object, same
	// process) into one with every bit set: each bit is a record, in the
	// order they happen.
	comm := ""
	add := func(op string) {
		if comm == "" {
			comm = Comm(pid)
		}
		w.l.Add(Record{Op: op, Path: from, Host: fromHost, PID: pid, Comm: comm})
	}
	if mask&unix.FAN_CREATE != 0 {
		add(OpCreate)
	}
	if mask&unix.FAN_CLOSE_NOWRITE != 0 && mask&unix.FAN_ONDIR == 0 {
		w.l.Read(from, fromHost, pid)
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
