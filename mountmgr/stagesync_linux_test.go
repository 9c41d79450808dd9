package mountmgr

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestStageReport: every report P2 writes reads back as written (a message
// flattened to one line), and what is not a whole report is told apart from
// a pipe that ended before one.
func TestStageReport(t *testing.T) {
	for _, want := range []stageReport{
		{Kind: stageOK, Pid: 2},
		{Kind: stageExec, Code: 127, Msg: "exec: \"node\": not found"},
		{Kind: stageExec, Code: 126, Msg: "permission denied"},
		{Kind: stageError, Msg: "pivot_root: invalid argument"},
	} {
		var b bytes.Buffer
		if err := writeStageReport(&b, want); err != nil {
			t.Fatal(err)
		}
		got, err := readStageReport(&b)
		if err != nil || got != want {
			t.Errorf("wrote %+v, read %+v, %v", want, got, err)
		}
	}

	var b bytes.Buffer
	if err := writeStageReport(&b, stageReport{Kind: stageError, Msg: "one\ntwo"}); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "\n") != 1 {
		t.Errorf("report %q is not one line", b.String())
	}
	if got, err := readStageReport(&b); err != nil || got.Msg != "one two" {
		t.Errorf("multi-line message read back as %+v, %v", got, err)
	}

	for in, wantNone := range map[string]bool{
		"":                               true, // P2 died before writing
		`{"kind":"ok","pid":2}`:          true, // ... or while writing
		"ok 2\n":                         false,
		`{"kind":"maybe"}` + "\n":        false,
		`{"kind":"ok","pid":"2"}` + "\n": false,
	} {
		_, err := readStageReport(strings.NewReader(in))
		if err == nil || errors.Is(err, errNoStageReport) != wantNone {
			t.Errorf("read %q: %v, want a failure (no report: %v)", in, err, wantNone)
		}
	}
}
