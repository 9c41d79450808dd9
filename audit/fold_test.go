package audit

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ ns atomic.Int64 }

var clockStart = time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)

func (c *fakeClock) now() time.Time          { return clockStart.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// notifyWriter keeps what is written and says each write on wrote.
type notifyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newNotifyWriter() *notifyWriter { return &notifyWriter{wrote: make(chan struct{}, 1)} }

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return w.buf.Write(p)
}

func (w *notifyWriter) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf.Bytes())
}

// waitWritten waits until w has been written to (not a threshold: the
// guard only ends a test that would hang).
func waitWritten(t *testing.T, w *notifyWriter) {
	t.Helper()
	select {
	case <-w.wrote:
	case <-time.After(time.Minute):
		t.Fatal("the writer wrote nothing")
	}
}

// sweep has the writer take the folded counts now, as its tick does, and
// waits until it has: call it with repeats pending.
func sweep(t *testing.T, l *Log) {
	t.Helper()
	l.wake <- struct{}{}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		l.mu.Lock()
		pending := l.syscalls.full != nil
		for _, f := range l.syscalls.cur.kinds {
			pending = pending || f.n > 0
		}
		l.mu.Unlock()
		if !pending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer did not take the folded counts")
		}
	}
}

// calls is how many refused calls r stands for.
func calls(r Record) int64 { return max(r.Count, 1) }

// checkFlood says what is wrong with recs as the log of n refusals of
// unshare by pid 2 (node), the first at clockStart: one record of the
// first, at its time and without a count, then folded records, later,
// whose counts sum to n-1, and at least one of them with a count.
func checkFlood(recs []Record, n int64) error {
	if len(recs) == 0 {
		return fmt.Errorf("no record")
	}
	var folded, counted int64
	for i, r := range recs {
		if r.Op != OpSeccomp || r.Syscall != "unshare" || r.PID != 2 || r.Comm != "node" || r.Result != ResultRefused || r.Reason != ReasonSeccomp {
			return fmt.Errorf("record %d: %+v", i, r)
		}
		if i == 0 {
			if r.Count != 0 || !r.Time.Equal(clockStart) {
				return fmt.Errorf("the first refusal %+v: want it alone, at its time", r)
			}
			continue
		}
		if !r.Time.After(clockStart) {
			return fmt.Errorf("folded record %d at %v, not after the first", i, r.Time)
		}
		folded += calls(r)
		if r.Count > 1 {
			counted++
		}
	}
	if most := n/1000 + 2; int64(len(recs)) > most {
		return fmt.Errorf("%d records for %d calls, want at most %d", len(recs), n, most)
	}
	if folded != n-1 || counted == 0 {
		return fmt.Errorf("%d records: the folded ones count %d calls (%d with a count), want %d", len(recs), folded, counted, n-1)
	}
	return nil
}

// TestSyscallRefusedFoldsAFlood: n identical refusals, one per 43 µs (the
// listener's pace) on a clock the test drives, with the writer taking the
// folded counts every 1,000 calls: the first is written at once, before
// any flush of the counts, and the others in a few records whose counts
// sum to n-1; status counts n, why keeps one. Negative control: the same
// calls one record each (as before the folding, through Add) fail the
// same check.
func TestSyscallRefusedFoldsAFlood(t *testing.T) {
	const n = 10000
	var c fakeClock
	w := newNotifyWriter()
	l := New(w, Options{Now: c.now, FlushEvery: time.Hour, QueueLen: 2 * n})
	l.SyscallRefused("unshare", 2, "node")
	waitWritten(t, w)
	if got := lines(t, w.bytes()); len(got) != 1 || got[0].Syscall != "unshare" {
		t.Fatalf("after the first refusal the file holds %+v, want it", got)
	}
	for i := 1; i < n; i++ {
		c.advance(refusalPace)
		l.SyscallRefused("unshare", 2, "node")
		if i%1000 == 999 {
			sweep(t, l)
		}
	}
	l.Close()
	recs := lines(t, w.bytes())
	if err := checkFlood(recs, n); err != nil {
		t.Errorf("%v\n%s", err, w.bytes())
	}
	if !bytes.Contains(w.bytes(), []byte(`"comm":"node","count":`)) {
		t.Errorf("no count in the file:\n%s", w.bytes())
	}
	if s := l.Stats(); s.Refused[OpSeccomp] != n || s.Dropped != 0 {
		t.Errorf("stats %+v, want %d seccomp refusals counted and none dropped", s, n)
	}
	if rs := l.Refusals(); len(rs) != 1 || rs[0].Syscall != "unshare" || !rs[0].Time.Equal(clockStart) {
		t.Errorf("%d refusals kept, want the first one only", len(rs))
	}
	t.Logf("%d calls, %d records, %d bytes", n, len(recs), len(w.bytes()))

	// Negative control: one record per call.
	var buf bytes.Buffer
	c = fakeClock{}
	old := New(&buf, Options{Now: c.now, FlushEvery: time.Hour, QueueLen: 2 * n})
	for range n {
		old.Add(Record{Op: OpSeccomp, Syscall: "unshare", Result: ResultRefused, PID: 2, Comm: "node", Reason: ReasonSeccomp, innerPID: true})
		c.advance(refusalPace)
	}
	old.Close()
	if err := checkFlood(lines(t, buf.Bytes()), n); err == nil {
		t.Error("control: one record per call passes the check")
	} else {
		t.Logf("control fails as it should: %v (%d bytes)", err, buf.Len())
	}
}

// TestSyscallRefusedKindsApart: refusals that differ in the call, the pid
// or the command are not folded together: each kind's first is written,
// and each kind's repeats are counted on their own.
func TestSyscallRefusedKindsApart(t *testing.T) {
	var c fakeClock
	var buf bytes.Buffer
	l := New(&buf, Options{Now: c.now, FlushEvery: time.Hour})
	kinds := []syscallKey{{"unshare", 2, "node"}, {"mount", 2, "node"}, {"unshare", 3, "node"}, {"unshare", 2, "sh"}}
	for range 3 {
		for i, k := range kinds {
			for range i + 1 {
				l.SyscallRefused(k.name, k.pid, k.comm)
				c.advance(time.Millisecond)
			}
		}
	}
	l.Close()
	got := map[syscallKey][]int64{}
	for _, r := range lines(t, buf.Bytes()) {
		k := syscallKey{r.Syscall, r.PID, r.Comm}
		got[k] = append(got[k], calls(r))
	}
	for i, k := range kinds {
		want := fmt.Sprint([]int64{1, int64(3*(i+1) - 1)})
		if g := fmt.Sprint(got[k]); g != want {
			t.Errorf("%v: records of %s calls, want %s", k, g, want)
		}
	}
	if len(got) != len(kinds) {
		t.Errorf("%d kinds written, want %d: %s", len(got), len(kinds), buf.String())
	}
	if s := l.Stats(); s.Refused[OpSeccomp] != 3*(1+2+3+4) {
		t.Errorf("stats %+v", s)
	}
}

// TestSyscallRefusedFlushedAtClose: repeats not yet written when the log
// closes are written by Close, and calls after it are not.
func TestSyscallRefusedFlushedAtClose(t *testing.T) {
	var c fakeClock
	var buf bytes.Buffer
	l := New(&buf, Options{Now: c.now, FlushEvery: time.Hour})
	for range 5 {
		l.SyscallRefused("ptrace", 7, "gdb")
		c.advance(time.Second)
	}
	l.Close()
	l.SyscallRefused("ptrace", 7, "gdb")
	got := lines(t, buf.Bytes())
	if len(got) != 2 || got[0].Count != 0 || got[1].Count != 4 || got[1].Syscall != "ptrace" || got[1].Comm != "gdb" {
		t.Errorf("want the first and a count of 4:\n%s", buf.String())
	}
	if !strings.HasSuffix(buf.String(), `,"op":"seccomp","syscall":"ptrace","result":"refused","pid":7,"comm":"gdb","count":4,"reason":"refused by the seccomp filter"}`+"\n") {
		t.Errorf("the folded line:\n%s", buf.String())
	}
}

// TestSyscallRefusedWindow: a kind refused again after a quiet window is
// written at once again, whether or not the writer has forgotten it yet;
// a repeat within the window is not.
func TestSyscallRefusedWindow(t *testing.T) {
	var c fakeClock
	w := newNotifyWriter()
	window := time.Hour // FlushEvery: no tick comes during the test
	l := New(w, Options{Now: c.now, FlushEvery: window})
	l.SyscallRefused("bpf", 4, "x")
	waitWritten(t, w)
	c.advance(window / 4)
	l.SyscallRefused("bpf", 4, "x") // folded
	c.advance(window / 4)
	l.SyscallRefused("bpf", 4, "x") // folded
	sweep(t, l)
	waitWritten(t, w)
	c.advance(window) // quiet for a window
	// Not swept yet: the stale entry still lets it through at once.
	l.SyscallRefused("bpf", 4, "x")
	waitWritten(t, w)
	c.advance(window)
	l.wake <- struct{}{} // quiet again: the writer forgets the kind
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		l.mu.Lock()
		n := len(l.syscalls.cur.kinds)
		l.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer kept a quiet kind")
		}
	}
	l.SyscallRefused("bpf", 4, "x")
	waitWritten(t, w)
	l.Close()
	var got []string
	for _, r := range lines(t, w.bytes()) {
		got = append(got, fmt.Sprintf("%v×%d", r.Time.Sub(clockStart), calls(r)))
	}
	want := "[0s×1 30m0s×2 1h30m0s×1 2h30m0s×1]"
	if fmt.Sprint(got) != want {
		t.Errorf("records (time×calls) %v, want %s:\n%s", got, want, w.bytes())
	}
}

// TestSyscallKindsBound: more kinds than SyscallKinds at once keep the
// tables bounded (the full one goes to the writer), and every call is
// still written, once or in a count. Also with a writer that is slow to
// take the full table (calls of kinds beyond the bound are then written
// one record each).
func TestSyscallKindsBound(t *testing.T) {
	const kinds, reps = 40, 5
	var c fakeClock
	var buf bytes.Buffer
	l := New(&buf, Options{Now: c.now, FlushEvery: time.Hour, SyscallKinds: 4})
	most := 0
	for range reps {
		for k := range kinds {
			l.SyscallRefused("unshare", 100+k, "fork")
			c.advance(time.Microsecond)
			l.mu.Lock()
			n := len(l.syscalls.cur.kinds)
			if l.syscalls.full != nil {
				n += len(l.syscalls.full.kinds)
			}
			l.mu.Unlock()
			most = max(most, n)
		}
	}
	l.Close()
	if most > 2*4 {
		t.Errorf("the tables held %d kinds, bound %d", most, 2*4)
	}
	var total int64
	for _, r := range lines(t, buf.Bytes()) {
		if r.Op != OpSeccomp {
			t.Errorf("record %+v", r)
		}
		total += calls(r)
	}
	if total != kinds*reps || l.Stats().Refused[OpSeccomp] != kinds*reps || l.Stats().Dropped != 0 {
		t.Errorf("the file has %d calls, stats %+v; want %d, none dropped", total, l.Stats(), kinds*reps)
	}
}

// TestSyscallRefusedRace: several sandboxes' listeners refusing at once,
// with the writer ticking: every call is in the file (run with -race).
func TestSyscallRefusedRace(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, Options{FlushEvery: time.Millisecond, SyscallKinds: 8, QueueLen: 1 << 16})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				l.SyscallRefused("unshare", g*10+i%5, "node")
			}
		}()
	}
	wg.Wait()
	l.Close()
	var total int64
	for _, r := range lines(t, buf.Bytes()) {
		total += calls(r)
	}
	if total != 4*5000 || l.Stats().Dropped != 0 {
		t.Errorf("%d calls written, %d dropped; want %d", total, l.Stats().Dropped, 4*5000)
	}
}
