// Package audit is the session's record of what the server touched, what
// it was kept from and why: one stream that the view, the root swap, the
// kernel data path's watcher and the network policy feed, written as JSON
// lines to a file (--audit-log) and kept in memory, bounded, for
// `rootfs status` and `rootfs why`.
//
// # Never in the way
//
// Add never blocks and never does I/O: a record goes into a bounded queue
// that one goroutine drains into a buffered writer, flushed when the queue
// runs dry and at least every FlushEvery. When the queue is full, or the
// file cannot be written (a full disk), records are dropped and counted,
// and the logger says so once. Reads are not one record each: Read counts
// them per file, in a bounded table flushed as one "read" record per file
// (with its count) every FlushEvery and at Close.
//
// # Records
//
// [Record] has more than fifteen fields on purpose: it is one line of the
// log, flat so that jq and grep find each fact by its own key.
//
// # Counts and refusals
//
// Whether or not a file is written, a Log counts records per operation and
// keeps the last refusals (RefusalsKept), which is what status and why
// show. A nil *Log accepts every call and does nothing, so a plane without
// audit needs no checks.
package audit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"go.uber.org/zap"
)

// Operations. A record's Op is one of these.
const (
	OpCreate   = "create"   // a file, directory, link or node made
	OpWrite    = "write"    // an open for writing (or a truncation)
	OpDelete   = "delete"   // unlink, rmdir
	OpRename   = "rename"   // Path is the old name, Dest the new
	OpAttr     = "attr"     // chmod, chown, utimes, truncate, xattrs
	OpRead     = "read"     // Count reads (opens for reading) of one file
	OpLookup   = "lookup"   // a name looked up where no root is (refused)
	OpRoots    = "roots"    // the root set changed: Old, New, Source
	OpRootRef  = "root"     // a client root refused (--allow, the URI rules)
	OpConnect  = "connect"  // a network connection (refused ones)
	OpDNS      = "dns"      // a name asked of rootfs's resolver (refused ones)
	OpSeccomp  = "seccomp"  // a system call the filter refused
	OpDropped  = "dropped"  // records lost: Count of them, Reason why
	OpRevoked  = "revoked"  // an operation on a handle whose root left
	OpReadOnly = "readonly" // a change refused on a read-only root (EROFS)
)

// Results. A failure that is not rootfs's refusal (ENOENT on an unlink)
// has the errno's name (syscall.Errno's text is not used: it has spaces).
const (
	ResultOK      = "ok"
	ResultRefused = "refused" // rootfs kept the server from it; Reason says why
)

// Record is one line of the log. Path is the path as the server sees it,
// Host where it is on the host (empty where it is nowhere, as for a name
// refused in the view's synthetic directories).
type Record struct {
	Time     time.Time `json:"time"`
	Instance string    `json:"instance,omitempty"`
	Op       string    `json:"op"`
	Path     string    `json:"path,omitempty"`
	Host     string    `json:"host,omitempty"`
	Dest     string    `json:"dest,omitempty"`
	// Syscall is the system call's name (OpSeccomp).
	Syscall string `json:"syscall,omitempty"`
	Result  string `json:"result"`
	// PID is the process's number in the sandbox's PID namespace (as the
	// server's own ps shows it; the host's under rootfs mount).
	PID   int    `json:"pid,omitempty"`
	Comm  string `json:"comm,omitempty"`
	Count int64  `json:"count,omitempty"`
	// Allow is the flag that would allow what was refused (--root DIR,
	// --allow-net HOST, ...).
	Allow string `json:"allow,omitempty"`
	// Reason says why, in words.
	Reason string   `json:"reason,omitempty"`
	Old    []string `json:"old,omitempty"`
	New    []string `json:"new,omitempty"`
	Source string   `json:"source,omitempty"`

	// innerPID says PID is already the innermost namespace's number (the
	// sandbox's init gave it), so the writer neither looks up its command
	// nor translates it.
	innerPID bool
}

// Options configure a Log. The zero value writes nothing and uses the
// defaults below.
type Options struct {
	// Instance names the session in every record.
	Instance string
	// Logger receives the one line said when records are first dropped;
	// nil means zap.NewNop().
	Logger *zap.Logger
	// QueueLen bounds the records waiting to be written; 0 means 4096.
	QueueLen int
	// FlushEvery bounds how long a written record waits in the buffer,
	// and how often read counts are flushed; 0 means one second.
	FlushEvery time.Duration
	// ReadFiles bounds the files whose reads are counted between
	// flushes; 0 means 4096. A read of one more flushes the table early.
	ReadFiles int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// RootPath maps a root's host path to its path in the sandbox.
type RootPath struct{ Host, View string }

// closeWait bounds how long Close waits for the writer.
const closeWait = 2 * time.Second

// RefusalsKept is how many of the last refusals a Log keeps for why.
const RefusalsKept = 64

// Log is one session's audit stream. Its methods may be called
// concurrently; a nil *Log does nothing.
type Log struct {
	opts  Options
	w     io.Writer // nil: nothing is written
	queue chan Record
	done  chan struct{}
	wake  chan struct{} // a full read table waits for the writer

	// mu guards the fields that follow.
	mu        sync.Mutex
	closed    bool
	counts    map[string]int64 // per Op, refusals under Op+"!"
	refusals  []Record         // ring of the last RefusalsKept
	next      int
	reads     readTables
	dropped   int64 // lost and not yet said in the file
	lostTotal int64 // lost since the start
	saidDrop  bool
	writeErrs int64
}

type readKey struct{ path, host string }

// readSlack is how many times ReadFiles the current read table may grow
// to while a full one waits for the writer.
const readSlack = 4

// readTables are the read counts since the last flush (cur) and a full
// table the writer has not taken yet (full). The writer writes them
// itself, never through the queue: a burst of reads of many files must
// not crowd out the other records, nor be dropped for them.
type readTables struct {
	cur, full *readTable
}

// readTable counts reads by file, in the order each file was first read.
type readTable struct {
	at     map[readKey]int32 // index in counts
	counts []readCount
}

func newReadTable() *readTable { return &readTable{at: map[readKey]int32{}} }

func (t *readTable) len() int {
	if t == nil {
		return 0
	}
	return len(t.counts)
}

type readCount struct {
	readKey
	n     int64
	pid   int
	inner bool // pid is the sandbox's number (Record.innerPID)
}

// New returns a Log that writes to w (nil: nothing) and starts its
// writer. Close it.
func New(w io.Writer, o Options) *Log {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.QueueLen <= 0 {
		o.QueueLen = 4096
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = time.Second
	}
	if o.ReadFiles <= 0 {
		o.ReadFiles = 4096
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Log{opts: o, w: w, queue: make(chan Record, o.QueueLen), done: make(chan struct{}), wake: make(chan struct{}, 1),
		counts: map[string]int64{}, reads: readTables{cur: newReadTable()}}
	go l.run()
	return l
}

// Open opens the audit log file name for appending ("-" is stderr), made
// 0600 when missing.
func Open(name string) (io.WriteCloser, error) {
	if name == "-" {
		return nopCloser{os.Stderr}, nil
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Add records r, stamped with the time and instance when they are unset.
// It never blocks.
func (l *Log) Add(r Record) {
	if l == nil {
		return
	}
	if r.Time.IsZero() {
		r.Time = l.opts.Now()
	}
	if r.Instance == "" {
		r.Instance = l.opts.Instance
	}
	if r.Result == "" {
		r.Result = ResultOK
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	key := r.Op
	if r.Result == ResultRefused {
		key += "!"
		if len(l.refusals) < RefusalsKept {
			l.refusals = append(l.refusals, r)
		} else {
			l.refusals[l.next] = r
		}
		l.next = (l.next + 1) % RefusalsKept
	}
	l.counts[key]++
	ok := l.enqueueLocked(r)
	l.mu.Unlock()
	if !ok {
		l.drop(1, "queue full")
	}
}

// enqueueLocked queues r for the writer without waiting, and says whether
// it could (true when nothing is written). l.mu is held, so that Close
// cannot close the queue under it.
func (l *Log) enqueueLocked(r Record) bool {
	if l.w == nil || l.closed {
		return true
	}
	select {
	case l.queue <- r:
		return true
	default:
		return false
	}
}

// Read counts one read (an open for reading) of a file.
func (l *Log) Read(path, host string, pid int) { l.read(path, host, pid, false) }

// read is Read; inner says pid is the sandbox's number already.
func (l *Log) read(path, host string, pid int, inner bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.counts[OpRead]++
	if l.w == nil {
		return // counted; no file to write the per-file counts to
	}
	k := readKey{path, host}
	t := l.reads.cur
	i, ok := t.at[k]
	if !ok {
		switch n := t.len(); {
		case n >= l.opts.ReadFiles && l.reads.full == nil:
			// Full: hand it to the writer, and wake it.
			l.reads.full, l.reads.cur = t, newReadTable()
			t = l.reads.cur
			select {
			case l.wake <- struct{}{}:
			default:
			}
		case n >= readSlack*l.opts.ReadFiles:
			// The writer is that far behind: this read is lost, and
			// counted (the table's memory stays bounded).
			l.dropped++
			l.lostTotal++
			return
		}
		i = int32(len(t.counts))
		t.at[k] = i
		t.counts = append(t.counts, readCount{readKey: k})
	}
	c := &t.counts[i]
	c.n++
	c.pid, c.inner = pid, inner
}

func (l *Log) drop(n int64, why string) {
	l.mu.Lock()
	l.dropped += n
	l.lostTotal += n
	say := !l.saidDrop
	l.saidDrop = true
	l.mu.Unlock()
	if say {
		l.opts.Logger.Warn("audit log: dropping records; they are counted, and the count is written when the log can be written again",
			zap.String("reason", why))
	}
}

// takeReads returns the read counts as records, in the order the files
// were first read, and empties the tables.
func (l *Log) takeReads() []Record {
	l.mu.Lock()
	tables := []*readTable{l.reads.full, l.reads.cur}
	l.reads = readTables{cur: newReadTable()}
	l.mu.Unlock()
	now := l.opts.Now()
	out := make([]Record, 0, tables[0].len()+tables[1].len())
	for _, t := range tables {
		if t == nil {
			continue
		}
		for _, c := range t.counts {
			out = append(out, Record{Time: now, Instance: l.opts.Instance, Op: OpRead, Path: c.path, Host: c.host, Result: ResultOK, PID: c.pid, Count: c.n, innerPID: c.inner})
		}
	}
	return out
}

// run is the writer: it drains the queue into a buffer and flushes it
// when the queue runs dry, every FlushEvery, and at Close.
func (l *Log) run() {
	defer close(l.done)
	if l.w == nil {
		return
	}
	bw := bufio.NewWriterSize(l.w, 64<<10)
	var line []byte // one record's JSON, reused
	tick := time.NewTicker(l.opts.FlushEvery)
	defer tick.Stop()
	var lost int64    // dropped records not yet said in the file
	var pending int64 // records in bw, lost if it cannot be written
	failed := false   // a write failed since the last flush began
	fail := func(err error) {
		l.writeFailed(err)
		// What was buffered is lost: count it, try again later.
		l.mu.Lock()
		l.dropped += pending
		l.lostTotal += pending
		l.mu.Unlock()
		pending, failed = 0, true
		bw.Reset(l.w)
	}
	write := func(r Record) {
		if r.PID > 0 && !r.innerPID {
			// The caller's pid as this process numbers it: its command,
			// and its number in its own (the sandbox's) namespace, as
			// the kernel data path's records give it.
			if r.Comm == "" {
				r.Comm = Comm(r.PID)
			}
			r.PID = innerPID(r.PID)
		}
		if r.Op != OpDropped {
			pending++
		}
		line = r.appendJSON(line[:0])
		if _, err := bw.Write(line); err != nil {
			fail(err)
		}
	}
	flush := func() {
		l.mu.Lock()
		lost, l.dropped = lost+l.dropped, 0
		l.mu.Unlock()
		failed = false
		if lost > 0 {
			write(Record{Time: l.opts.Now(), Instance: l.opts.Instance, Op: OpDropped, Result: ResultRefused, Count: lost,
				Reason: "records dropped (queue full or the log unwritable)"})
		}
		if err := bw.Flush(); err != nil {
			fail(err)
		}
		if !failed {
			pending, lost = 0, 0
		}
	}
	reads := func() {
		for _, r := range l.takeReads() {
			write(r)
		}
	}
	for {
		select {
		case r, ok := <-l.queue:
			if !ok {
				reads()
				flush()
				return
			}
			write(r)
			if len(l.queue) == 0 {
				flush()
			}
		case <-l.wake:
			reads()
			flush()
		case <-tick.C:
			reads()
			flush()
		}
	}
}

func (l *Log) writeFailed(err error) {
	l.mu.Lock()
	l.writeErrs++
	l.mu.Unlock()
	l.drop(0, err.Error()) // only says so: fail counts what is lost
}

// Close flushes what is counted and queued, and stops the writer. It does
// not close the writer given to New. Calls after the first do nothing.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.queue)
	l.mu.Unlock()
	select {
	case <-l.done:
	case <-time.After(closeWait):
		// A writer stuck on a file nobody reads (a pipe): the session
		// ends anyway, and what was not written is lost.
		l.opts.Logger.Warn("audit log: not all records were written before the session ended", zap.Duration("waited", closeWait))
	}
	return nil
}

// Stats are a Log's counts since it started.
type Stats struct {
	// Ops counts records per operation; Refused, refusals per operation.
	Ops     map[string]int64 `json:"ops"`
	Refused map[string]int64 `json:"refused"`
	// Dropped counts records that were never written, whether or not
	// the file has said so yet; WriteErrors, failed writes.
	Dropped     int64 `json:"dropped,omitempty"`
	WriteErrors int64 `json:"write_errors,omitempty"`
}

// Stats returns the counts so far.
func (l *Log) Stats() Stats {
	s := Stats{Ops: map[string]int64{}, Refused: map[string]int64{}}
	if l == nil {
		return s
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range l.counts {
		if op, ok := strings.CutSuffix(k, "!"); ok {
			s.Refused[op] += n
		} else {
			s.Ops[k] += n
		}
	}
	s.Dropped, s.WriteErrors = l.lostTotal, l.writeErrs
	return s
}

// Refusals returns the last refusals, oldest first.
func (l *Log) Refusals() []Record {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Record, 0, len(l.refusals))
	if len(l.refusals) == RefusalsKept {
		out = append(out, l.refusals[l.next:]...)
		out = append(out, l.refusals[:l.next]...)
	} else {
		out = append(out, l.refusals...)
	}
	return out
}

// ReasonSeccomp is the Reason of an OpSeccomp record.
const ReasonSeccomp = "refused by the seccomp filter"

// SyscallRefused records a system call that the sandbox's seccomp filter
// refused (and that the filter's listener has already answered): name is
// the call's, pid the caller's number in the sandbox's PID namespace (0
// when it could not be told) and comm its command. Like Add, it never
// blocks.
func (l *Log) SyscallRefused(name string, pid int, comm string) {
	l.Add(Record{Op: OpSeccomp, Syscall: name, Result: ResultRefused, PID: pid, Comm: comm, Reason: ReasonSeccomp, innerPID: true})
}

// Lost counts n records that a feeder dropped before they reached the log
// (a bounded queue of its own was full): they are counted, said once and
// written as a "dropped" record as the log's own are.
func (l *Log) Lost(n int64, why string) {
	if l == nil || n <= 0 {
		return
	}
	l.drop(n, why)
}

// innerPID is pid's number in its innermost PID namespace (the last of
// /proc/PID/status's NSpid), or pid when that cannot be read.
func innerPID(pid int) int {
	if st, ok := linux.ReadProcStatus(pid); ok && len(st.NSpid) > 0 {
		return st.NSpid[len(st.NSpid)-1]
	}
	return pid
}

// Comm is the command name of process pid ("" when it is gone).
func Comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}
