package audit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// lines decodes the JSON lines of b.
func lines(t *testing.T, b []byte) []Record {
	t.Helper()
	out, err := Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%v in:\n%s", err, b)
	}
	return out
}

func TestLogWritesRecordsAndCountsReads(t *testing.T) {
	var buf bytes.Buffer
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	l := New(&buf, Options{Instance: "i1", Now: func() time.Time { return at }, FlushEvery: time.Hour})
	l.Add(Record{Op: OpCreate, Path: "/p/a", Host: "/h/p/a", PID: os.Getpid()})
	l.Add(Record{Op: OpLookup, Path: "/home/me/.ssh", Result: ResultRefused, Allow: "--root /home/me/.ssh"})
	for range 3 {
		l.Read("/p/b", "/h/p/b", 7)
	}
	l.Read("/p/c", "/h/p/c", 8)
	l.Close()
	got := lines(t, buf.Bytes())
	if len(got) != 4 {
		t.Fatalf("%d records, want 4: %s", len(got), buf.String())
	}
	if r := got[0]; r.Op != OpCreate || r.Instance != "i1" || r.Result != ResultOK || !r.Time.Equal(at) || r.Comm == "" {
		t.Errorf("create record %+v", r)
	}
	if r := got[1]; r.Result != ResultRefused || r.Allow == "" {
		t.Errorf("refusal %+v", r)
	}
	if r := got[2]; r.Op != OpRead || r.Path != "/p/b" || r.Count != 3 {
		t.Errorf("read count %+v, want 3 reads of /p/b", r)
	}
	if r := got[3]; r.Op != OpRead || r.Path != "/p/c" || r.Count != 1 {
		t.Errorf("read count %+v, want 1 read of /p/c", r)
	}
	s := l.Stats()
	if s.Ops[OpCreate] != 1 || s.Ops[OpRead] != 4 || s.Refused[OpLookup] != 1 {
		t.Errorf("stats %+v", s)
	}
	if rs := l.Refusals(); len(rs) != 1 || rs[0].Path != "/home/me/.ssh" {
		t.Errorf("refusals %+v", rs)
	}
	l.Add(Record{Op: OpCreate}) // after Close: nothing, no panic
	l.Close()
}

func TestNilLog(t *testing.T) {
	var l *Log
	l.Add(Record{Op: OpCreate})
	l.Read("/a", "/b", 1)
	if s := l.Stats(); len(s.Ops) != 0 || l.Refusals() != nil || l.Close() != nil {
		t.Error("a nil log holds something")
	}
}

// TestLogRefusalsRing: only the last RefusalsKept are kept, oldest first.
func TestLogRefusalsRing(t *testing.T) {
	l := New(nil, Options{})
	defer l.Close()
	for i := range RefusalsKept + 5 {
		l.Add(Record{Op: OpLookup, Path: strings.Repeat("x", i+1), Result: ResultRefused})
	}
	rs := l.Refusals()
	if len(rs) != RefusalsKept || len(rs[0].Path) != 6 || len(rs[len(rs)-1].Path) != RefusalsKept+5 {
		t.Errorf("ring: %d kept, first %d, last %d", len(rs), len(rs[0].Path), len(rs[len(rs)-1].Path))
	}
}

// blockingWriter holds every Write until released.
type blockingWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// TestLogNeverBlocks: a writer that hangs costs records (dropped, counted,
// said once, then written as a count) but never blocks Add.
func TestLogNeverBlocks(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	core, logs := observer.New(zap.WarnLevel)
	l := New(w, Options{QueueLen: 8, Logger: zap.New(core), FlushEvery: time.Hour})
	done := make(chan struct{})
	go func() {
		for range 10000 {
			l.Add(Record{Op: OpCreate, Path: "/p"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Add blocked on a writer that hangs")
	}
	if n := logs.FilterMessageSnippet("dropping records").Len(); n != 1 {
		t.Errorf("said %d times, want once", n)
	}
	close(w.release)
	l.Close()
	var written, dropped int64
	for _, r := range lines(t, w.buf.Bytes()) {
		switch r.Op {
		case OpCreate:
			written++
		case OpDropped:
			dropped += r.Count
		}
	}
	if written+dropped != 10000 || dropped == 0 {
		t.Errorf("written %d + dropped %d, want 10000 with some dropped", written, dropped)
	}
}

// TestLogFullDisk: on /dev/full every write fails; records are dropped,
// counted, said once, and nothing blocks.
func TestLogFullDisk(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer f.Close()
	core, logs := observer.New(zap.WarnLevel)
	l := New(f, Options{Logger: zap.New(core), FlushEvery: time.Millisecond})
	for range 1000 {
		l.Add(Record{Op: OpWrite, Path: "/p"})
	}
	l.Close()
	if s := l.Stats(); s.WriteErrors == 0 {
		t.Errorf("stats %+v, want write errors", s)
	}
	warn := logs.FilterMessageSnippet("dropping records").All()
	if len(warn) != 1 || !strings.Contains(warn[0].ContextMap()["reason"].(string), "no space") {
		t.Errorf("want one warning naming ENOSPC, got %v", warn)
	}
}

// TestReadTableBound: reads of more files than ReadFiles flush early
// instead of growing the table.
func TestReadTableBound(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, Options{ReadFiles: 4, FlushEvery: time.Hour})
	for i := range 10 {
		l.Read("/p/"+string(rune('a'+i)), "", 1)
	}
	l.mu.Lock()
	n := l.reads.cur.len() + l.reads.full.len()
	l.mu.Unlock()
	if n > 4*readSlack {
		t.Errorf("read tables hold %d, bound %d", n, 4*readSlack)
	}
	l.Close()
	var total int64
	for _, r := range lines(t, buf.Bytes()) {
		total += r.Count
	}
	if total != 10 {
		t.Errorf("%d reads written, want 10", total)
	}
}

// TestReadsAreNotCrowdedOut: reads of many files at a pace the writer
// keeps up with are all counted, however small the record queue (reads
// never go through it), and so is every other record.
func TestReadsAreNotCrowdedOut(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, Options{QueueLen: 64, ReadFiles: 1024, FlushEvery: time.Hour})
	for i := range 20000 {
		l.Read(fmt.Sprintf("/p/%d", i), "", 1)
		if i%1000 == 0 {
			l.Add(Record{Op: OpCreate, Path: fmt.Sprintf("/p/new%d", i)})
			// A writer that keeps up: it has taken the full table.
			for {
				l.mu.Lock()
				taken := l.reads.full == nil
				l.mu.Unlock()
				if taken {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	l.Close()
	var reads, creates int64
	for _, r := range lines(t, buf.Bytes()) {
		switch r.Op {
		case OpRead:
			reads += r.Count
		case OpCreate:
			creates++
		case OpDropped:
			t.Errorf("dropped: %+v", r)
		}
	}
	if reads != 20000 || creates != 20 || l.Stats().Dropped != 0 {
		t.Errorf("%d reads, %d creates written, %d dropped; want 20000, 20, 0", reads, creates, l.Stats().Dropped)
	}
}

func TestOpen(t *testing.T) {
	p := t.TempDir() + "/a.log"
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%v %v, want mode 0600", fi, err)
	}
	if _, err := Open(t.TempDir() + "/no/such/dir/a.log"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err %v", err)
	}
}

// TestLogFullDiskCountsEveryRecord: on a full disk, every record lost is
// counted, and the count stays in Stats (what status shows) even though
// it cannot be said in the file.
func TestLogFullDiskCountsEveryRecord(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer f.Close()
	l := New(f, Options{FlushEvery: time.Hour})
	for range 1000 {
		l.Add(Record{Op: OpWrite, Path: "/p"})
	}
	l.Close()
	if s := l.Stats(); s.Dropped < 1000 {
		t.Errorf("stats %+v: %d records dropped, want all 1000 counted", s, s.Dropped)
	}
}

// flakyWriter fails until ok is set.
type flakyWriter struct {
	mu  sync.Mutex
	ok  bool
	buf bytes.Buffer
}

func (w *flakyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ok {
		return 0, errors.New("no space left on device")
	}
	return w.buf.Write(p)
}

// TestLogSaysWhatWasLost: once the file can be written again, the
// "dropped" record counts exactly the records lost meanwhile.
func TestLogSaysWhatWasLost(t *testing.T) {
	w := &flakyWriter{}
	l := New(w, Options{FlushEvery: time.Hour})
	for range 100 {
		l.Add(Record{Op: OpWrite, Path: "/lost"})
	}
	for deadline := time.Now().Add(10 * time.Second); l.Stats().Dropped < 100 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	w.mu.Lock()
	w.ok = true
	w.mu.Unlock()
	l.Add(Record{Op: OpWrite, Path: "/kept"})
	l.Close()
	var said int64
	for _, r := range lines(t, w.buf.Bytes()) {
		if r.Op == OpDropped {
			said += r.Count
		}
	}
	if said != 100 {
		t.Errorf("the file says %d records were dropped, want 100:\n%s", said, w.buf.String())
	}
}

// TestSyscallRefused: a seccomp refusal is one refused record with the
// call's name and the sandbox's pid and command as given (the writer does
// not look pid up in this process's /proc, where it would name another
// process), kept for why; what the listener lost is written as dropped.
// Negative control: the same record through Add, without a command, is
// taken for this process's numbering and gets the command of this
// namespace's pid 1 (not the sandbox's).
func TestSyscallRefused(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, Options{FlushEvery: time.Hour})
	l.SyscallRefused("unshare", 1, "node")
	l.Lost(5, "seccomp queue full")
	l.Lost(0, "nothing")
	l.Add(Record{Op: OpSeccomp, Syscall: "mount", Result: ResultRefused, PID: 1})
	l.Close()
	got := lines(t, buf.Bytes())
	if len(got) != 3 {
		t.Fatalf("%d records: %s", len(got), buf.String())
	}
	if r := got[0]; r.Op != OpSeccomp || r.Syscall != "unshare" || r.Result != ResultRefused || r.PID != 1 || r.Comm != "node" || r.Reason != ReasonSeccomp {
		t.Errorf("seccomp record %+v", r)
	}
	if !strings.Contains(buf.String(), `"op":"seccomp","syscall":"unshare","result":"refused","pid":1,"comm":"node","reason":"refused by the seccomp filter"}`) {
		t.Errorf("line: %s", buf.String())
	}
	// The dropped record is written at the writer's first flush after
	// Lost, which may come before or after the mount record.
	mount, dropped := got[1], got[2]
	if mount.Op == OpDropped {
		mount, dropped = dropped, mount
	}
	if r := mount; r.Syscall != "mount" || r.Comm != Comm(1) || r.Comm == "" {
		t.Errorf("control: an Added pid is looked up here (want comm %q): %+v", Comm(1), r)
	}
	if r := dropped; r.Op != OpDropped || r.Count != 5 {
		t.Errorf("dropped %+v, want 5", r)
	}
	if rs := l.Refusals(); len(rs) != 2 || rs[0].Syscall != "unshare" || rs[0].PID != 1 || rs[0].Comm != "node" {
		t.Errorf("refusals %+v", rs)
	}
	if s := l.Stats(); s.Refused[OpSeccomp] != 2 || s.Dropped != 5 {
		t.Errorf("stats %+v", s)
	}
}
