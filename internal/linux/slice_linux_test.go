package linux

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// slices reads each thread's scheduler slice (ns) from /proc.
func slices(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/sched")
		if err != nil {
			continue // the thread ended
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "se.slice" {
				got[e.Name()] = f[len(f)-1]
			}
		}
	}
	if len(got) == 0 {
		t.Skip("this kernel does not show se.slice in /proc/PID/task/TID/sched")
	}
	return got
}

// TestShortSlice: every thread gets the slice, threads started later
// inherit it, and 0 gives the default back.
func TestShortSlice(t *testing.T) {
	before := slices(t)
	if err := ShortSlice(100 * time.Microsecond); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ShortSlice(0) })
	started := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() {
		runtime.LockOSThread() // a new thread, most likely
		close(started)
		<-done
	}()
	<-started
	for tid, s := range slices(t) {
		if s != "100000" {
			t.Errorf("thread %s: slice %s, want 100000", tid, s)
		}
	}
	if err := ShortSlice(0); err != nil {
		t.Fatal(err)
	}
	var def string
	for _, s := range before {
		def = s
	}
	for tid, s := range slices(t) {
		if s != def {
			t.Errorf("after reset, thread %s: slice %s, want the default %s", tid, s, def)
		}
	}
}
