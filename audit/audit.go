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
// # Refused system calls
//
// A server that loops on a call the seccomp filter refuses makes one
// refusal every ~43 µs, which would grow the file by over 4 MB/s. So
// SyscallRefused folds repeats: a refusal of a kind (the call, the pid
// and the command) that was not refused in the last FlushEvery is
// written at once, as any record, for whoever watches the file or asks
// why; the repeats are counted in a bounded table that the writer
// flushes like the read counts, as one record per kind with its count,
// every FlushEvery and at Close. A flood costs one record per kind a
// second, and Stats counts every call.
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
	PID  int    `json:"pid,omitempty"`
	Comm string `json:"comm,omitempty"`
	// Count is how many: reads of the file (OpRead), records lost
	// (OpDropped), or refused calls (OpSeccomp: repeats folded into one
	// record; absent means one).
	Count int64 `json:"count,omitempty"`
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
	// and how often read counts and folded system call refusals are
	// flushed; 0 means one second. It is also the window of the
	// folding: a refused call whose kind was refused less than
	// FlushEvery before is folded, any other is written at once.
	FlushEvery time.Duration
	// ReadFiles bounds the files whose reads are counted between
	// flushes; 0 means 4096. A read of one more flushes the table early.
	ReadFiles int
	// SyscallKinds bounds the kinds of refused system call (call, pid,
	// command) whose repeats are folded; 0 means 1024. A refusal of one
	// more kind hands the table to the writer, which writes its counts
	// at once; while the writer has not taken it, calls of kinds not in
	// the table are written one record each, as any record.
	SyscallKinds int
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
	syscalls  syscallTables
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

// syscallKey is a kind of refused system call: its repeats are folded.
type syscallKey struct {
	name string
	pid  int
	comm string
}

// syscallTables are the kinds refused lately (cur) and a full table the
// writer has not taken yet (full), as readTables.
type syscallTables struct {
	cur, full *syscallTable
}

// syscallTable holds kinds of refused call, in the order each was first
// refused, with the calls folded since each kind's last record.
type syscallTable struct {
	at    map[syscallKey]int32 // index in kinds
	kinds []syscallFold
}

func newSyscallTable() *syscallTable { return &syscallTable{at: map[syscallKey]int32{}} }

type syscallFold struct {
	syscallKey
	n    int64     // calls folded since the kind's last record
	last time.Time // the kind's last call
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
	if o.SyscallKinds <= 0 {
		o.SyscallKinds = 1024
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Log{opts: o, w: w, queue: make(chan Record, o.QueueLen), done: make(chan struct{}), wake: make(chan struct{}, 1),
		counts: map[string]int64{}, reads: readTables{cur: newReadTable()}, syscalls: syscallTables{cur: newSyscallTable()}}
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
	l.stamp(&r)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	ok := l.addLocked(r)
	l.mu.Unlock()
	if !ok {
		l.drop(1, "queue full")
	}
}

// stamp sets r's time, instance and result when they are unset.
func (l *Log) stamp(r *Record) {
	if r.Time.IsZero() {
		r.Time = l.opts.Now()
	}
	if r.Instance == "" {
		r.Instance = l.opts.Instance
	}
	if r.Result == "" {
		r.Result = ResultOK
	}
}

// addLocked counts r, keeps it among the last refusals if it is one, and
// queues it; false when the queue was full. l.mu is held and the log is
// open.
func (l *Log) addLocked(r Record) bool {
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
	return l.enqueueLocked(r)
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
	syscalls := func(all bool) {
		folded := l.takeSyscalls(all)
		// A kind's first record was queued before any of its repeats
		// were counted: write what is queued first, so that the count
		// comes after the record it follows.
		for len(l.queue) > 0 {
			if r, ok := <-l.queue; ok {
				write(r)
			}
		}
		for _, r := range folded {
			write(r)
		}
	}
	for {
		select {
		case r, ok := <-l.queue:
			if !ok {
				reads()
				syscalls(true)
				flush()
				return
			}
			write(r)
			if len(l.queue) == 0 {
				flush()
			}
		case <-l.wake:
			reads()
			syscalls(false)
			flush()
		case <-tick.C:
			reads()
			syscalls(false)
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
// blocks. Stats counts every call; the first of a kind is written (and
// kept for why) at once, and its repeats within FlushEvery of each other
// are folded into one record with their count, written by the writer
// every FlushEvery and at Close (see the package doc). Without a file
// nothing is folded: each call is counted and kept as Add does.
func (l *Log) SyscallRefused(name string, pid int, comm string) {
	if l == nil {
		return
	}
	r := Record{Op: OpSeccomp, Syscall: name, Result: ResultRefused, PID: pid, Comm: comm, Reason: ReasonSeccomp, innerPID: true}
	if l.w == nil {
		l.Add(r)
		return
	}
	l.stamp(&r)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	if l.foldLocked(syscallKey{name, pid, comm}, r.Time) {
		l.counts[OpSeccomp+"!"]++
		l.mu.Unlock()
		return
	}
	ok := l.addLocked(r)
	l.mu.Unlock()
	if !ok {
		l.drop(1, "queue full")
	}
}

// foldLocked says whether a refused call of kind k at now is a repeat,
// and counts it if so; otherwise the caller writes it, and the kind is
// in the table from now on if there is room. l.mu is held.
func (l *Log) foldLocked(k syscallKey, now time.Time) bool {
	t := l.syscalls.cur
	if i, ok := t.at[k]; ok {
		f := &t.kinds[i]
		repeat := now.Sub(f.last) < l.opts.FlushEvery
		if repeat {
			f.n++
		}
		// Else the kind was quiet for a window and the writer has not
		// dropped it yet: this call is written, and what was folded
		// before it still will be.
		f.last = now
		return repeat
	}
	if len(t.kinds) >= l.opts.SyscallKinds {
		if l.syscalls.full != nil {
			// The writer has not taken the last full table: this kind
			// is not folded (its calls are written one by one, through
			// the bounded queue), and the table stays bounded.
			return false
		}
		l.syscalls.full, l.syscalls.cur = t, newSyscallTable()
		t = l.syscalls.cur
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	t.at[k] = int32(len(t.kinds))
	t.kinds = append(t.kinds, syscallFold{syscallKey: k, last: now})
	return false
}

// takeSyscalls returns the refused calls folded since each kind's last
// record, one record per kind with its count, and empties the full table.
// It forgets the kinds not refused in the last FlushEvery (their next
// call is written at once), or all of them when all is set (at Close).
func (l *Log) takeSyscalls(all bool) []Record {
	now := l.opts.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Record
	emit := func(f *syscallFold) {
		if f.n == 0 {
			return
		}
		r := Record{Time: now, Instance: l.opts.Instance, Op: OpSeccomp, Syscall: f.name, Result: ResultRefused, PID: f.pid, Comm: f.comm,
			Reason: ReasonSeccomp, innerPID: true}
		if f.n > 1 {
			r.Count = f.n
		}
		out = append(out, r)
		f.n = 0
	}
	if t := l.syscalls.full; t != nil {
		for i := range t.kinds {
			emit(&t.kinds[i])
		}
		l.syscalls.full = nil
	}
	cur := l.syscalls.cur
	if len(cur.kinds) == 0 {
		return out
	}
	kept := newSyscallTable()
	for i := range cur.kinds {
		f := &cur.kinds[i]
		emit(f)
		if !all && now.Sub(f.last) < l.opts.FlushEvery {
			kept.at[f.syscallKey] = int32(len(kept.kinds))
			kept.kinds = append(kept.kinds, *f)
		}
	}
	l.syscalls.cur = kept
	return out
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
