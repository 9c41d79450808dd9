package audit

import (
	"strings"
	"testing"
)

// TestDecode: the records of a log, and a line that is not one named by
// its number, with what came before it.
func TestDecode(t *testing.T) {
	r1 := Record{Op: OpRead, Path: "/p/a", Result: ResultOK, Count: 2}
	r2 := Record{Op: OpLookup, Path: "/etc", Result: ResultRefused, Allow: "--root /etc"}
	log := string(r1.appendJSON(nil)) + string(r2.appendJSON(nil))
	got, err := Decode(strings.NewReader(log))
	if err != nil || len(got) != 2 || got[0].Path != "/p/a" || got[0].Count != 2 || got[1].Allow != "--root /etc" {
		t.Fatalf("Decode: %+v %v", got, err)
	}
	// Folded seccomp refusals keep their count; one call has none.
	r3 := Record{Op: OpSeccomp, Syscall: "unshare", Result: ResultRefused, PID: 2, Comm: "node", Count: 41}
	r4 := Record{Op: OpSeccomp, Syscall: "unshare", Result: ResultRefused, PID: 2, Comm: "node"}
	got, err = Decode(strings.NewReader(string(r3.appendJSON(nil)) + string(r4.appendJSON(nil))))
	if err != nil || len(got) != 2 || got[0].Count != 41 || got[1].Count != 0 {
		t.Fatalf("Decode seccomp: %+v %v", got, err)
	}
	got, err = Decode(strings.NewReader(log + "not json\n" + string(r1.appendJSON(nil))))
	if err == nil || !strings.Contains(err.Error(), "line 3") || len(got) != 2 {
		t.Errorf("a bad third line: %d records, %v", len(got), err)
	}
}
