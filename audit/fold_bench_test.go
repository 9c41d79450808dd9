package audit

import (
	"sync/atomic"
	"testing"
	"time"
)

// countingWriter counts the bytes written to it.
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}

// refusalPace is how often a server looping on one refused call gets it
// refused: one round trip to the seccomp listener (BENCHMARKS.md, about
// 43 µs).
const refusalPace = 43 * time.Microsecond

// BenchmarkSyscallRefusedFlood: one server looping on one refused call
// for b.N calls at the listener's pace, on a clock that the benchmark
// drives; log-B/s is what the log grows by per second of such a flood,
// log-B/call what it grows by per call.
func BenchmarkSyscallRefusedFlood(b *testing.B) {
	var w countingWriter
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	now := func() time.Time { return at.Add(time.Duration(clock.Load())) }
	l := New(&w, Options{Instance: "5ecc0b1d", Now: now, QueueLen: 1 << 20})
	b.ResetTimer()
	for range b.N {
		l.SyscallRefused("unshare", 2, "node")
		clock.Add(int64(refusalPace))
	}
	l.Close()
	b.StopTimer()
	flood := time.Duration(clock.Load())
	b.ReportMetric(float64(w.n.Load())/float64(b.N), "log-B/call")
	b.ReportMetric(float64(w.n.Load())/flood.Seconds(), "log-B/s")
}
