//go:build linux

package audit

// The kernel data path's part of the log: on that path the kernel serves
// what is below each root, and the daemon sees none of it, so the kernel
// reports it. One fanotify group with a filesystem mark on each root's
// file system (FAN_MARK_FILESYSTEM: CAP_SYS_ADMIN in the initial user
// namespace, so as root only) reports creates, deletes, renames, attribute
// changes and closes, each with its directory's handle and the name.
// Reads are counted at close (FAN_CLOSE_NOWRITE), writes recorded at
// close (FAN_CLOSE_WRITE): no event on each read or write, so the server's
// I/O is not slowed (the kernel may merge like events still queued, so
// read counts are a lower bound). The group's queue is the kernel's
// default (bounded); when it overflows, the loss is counted.
//
// The group has two halves. The daemon (P1) makes it, marks the roots'
// file systems, resolves each event's directory handle to a path and
// records it (KernelWatch). The sandbox's init (P2, PID 1 of the
// sandbox's PID namespace) reads it (Forward): the kernel gives each
// event's process as the reader's PID namespace numbers it, 0 for one
// outside it, so P2 tells the sandbox's processes from the host's when it
// reads the event, also for a process that has ended since (a short `rm`),
// and adds the command name from its own /proc. A pid in these records is
// the sandbox's.
//
// Known cost. The filesystem marks make every change and close on the
// roots' file systems an event, the host's own processes' too, which P2
// reads and drops: the host pays for them while an audited session runs
// (BENCHMARKS.md).

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
	"time"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

const kernelMask = unix.FAN_CREATE | unix.FAN_DELETE | unix.FAN_RENAME | unix.FAN_ATTRIB |
	unix.FAN_CLOSE_WRITE | unix.FAN_CLOSE_NOWRITE | unix.FAN_ONDIR

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
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK|unix.FAN_REPORT_DFID_NAME|unix.FAN_REPORT_FID, unix.O_RDONLY|unix.O_LARGEFILE)
	if err != nil {
		return nil, fmt.Errorf("audit of the kernel data path needs fanotify with file handles (Linux 5.9): %w", err)
	}
	return &KernelWatch{l: l, log: log, group: os.NewFile(uintptr(fd), "fanotify-audit"),
		fs: map[[8]byte]int{}, devs: map[uint64]bool{}, dirs: map[string]string{}, done: make(chan struct{})}, nil
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
	err = unix.FanotifyMark(int(w.group.Fd()), unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, kernelMask, unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd))
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
		comm := string(bytes.TrimRight(head[4:], "\x00"))
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
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			k, err := group.Read(buf)
			if err != nil {
				return
			}
			pass(buf[:k])
		}
	}()
	return func() {
		_ = group.SetReadDeadline(time.Now())
		<-done
		buf := make([]byte, 64<<10)
		for {
			k, err := unix.Read(int(group.Fd()), buf)
			if err != nil || k <= 0 {
				break
			}
			pass(buf[:k])
		}
		group.Close()
		out.Close()
	}
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

func (w *KernelWatch) event(mask uint64, pid int, comm string, b []byte) {
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
