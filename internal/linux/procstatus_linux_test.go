package linux

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadProcStatus: this thread's name and numbers (one PID namespace
// here: the thread is the only number in each list).
func TestReadProcStatus(t *testing.T) {
	st, ok := ReadProcStatus(os.Getpid())
	if !ok || st.Name == "" || len(st.NStgid) == 0 || st.NStgid[0] != os.Getpid() || len(st.NSpid) == 0 || st.NSpid[0] != os.Getpid() {
		t.Errorf("ReadProcStatus(self): %+v %v", st, ok)
	}
	if tid := unix.Gettid(); tid != os.Getpid() {
		if st, ok := ReadProcStatus(tid); !ok || st.NSpid[0] != tid || st.NStgid[0] != os.Getpid() {
			t.Errorf("ReadProcStatus(thread %d): %+v %v", tid, st, ok)
		}
	}
	if _, ok := ReadProcStatus(1 << 30); ok {
		t.Error("a process that does not exist read")
	}
}

// TestUnescapeStatus: status escapes a newline and a backslash in Name.
func TestUnescapeStatus(t *testing.T) {
	for in, want := range map[string]string{`node`: "node", `a\nb`: "a\nb", `a\\b`: `a\b`, `a\\nb`: `a\nb`, `a\x`: `a\x`, `end\`: `end\`} {
		if got := unescapeStatus([]byte(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
