package mountmgr

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The stage protocol between P1 (StartServer) and P2 (runInit). P1 hands
// P2 two pipes besides stdio: the spec pipe (fd 3, ROOTFS_SPEC_FD) and the
// sync pipe (fd 4, ROOTFS_SYNC_FD). Each carries one message, one way:
//
//	P1 StartServer                         P2 runInit (PID 1 of the new namespaces)
//	  start P2 ------------------------------>
//	  Spec, JSON, then close --- spec pipe -->  read the spec; set up the root,
//	                                            drop privileges, start P3
//	  <-------------------------- sync pipe ---  one stageReport, then close:
//	                                              stageOK     P3 runs (P2 reaps it)
//	                                              stageExec   P3 could not be exec'd
//	                                                          (P2 exits with Code)
//	                                              stageError  setup failed (P2 exits 255)
//	  EOF and no report: P2 died before it could say why; its exit status is all
//	  P1 has.
//
// A report is one JSON object on one line. Both ends are this binary
// (/proc/self/exe), so the format never meets another version of itself.

// stageKind says what became of the server P2 was to start.
type stageKind string

const (
	stageOK    stageKind = "ok"    // the server runs, as Pid
	stageExec  stageKind = "exec"  // exec failed: Code (126/127) and Msg
	stageError stageKind = "error" // setup failed: Msg
)

// stageReport is P2's one message to P1.
type stageReport struct {
	Kind stageKind `json:"kind"`
	Pid  int       `json:"pid,omitempty"`  // stageOK: the server's pid in the new PID namespace
	Code int       `json:"code,omitempty"` // stageExec: the exit status P2 takes, 126 or 127
	Msg  string    `json:"msg,omitempty"`  // stageExec, stageError: one line for the user
}

// maxStageReport bounds what P1 reads from the sync pipe.
const maxStageReport = 64 << 10

// writeStageReport sends r as one line. A message is flattened to one line:
// it ends up in one line of the user's terminal or log.
func writeStageReport(w io.Writer, r stageReport) error {
	r.Msg = strings.ReplaceAll(r.Msg, "\n", " ")
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// errNoStageReport is a sync pipe closed before a whole report: P2 died first.
var errNoStageReport = errors.New("no report")

// readStageReport reads P2's report. It returns errNoStageReport when the
// pipe ends first, another error when what came is not a report.
func readStageReport(r io.Reader) (stageReport, error) {
	l, err := bufio.NewReader(io.LimitReader(r, maxStageReport)).ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return stageReport{}, errNoStageReport
		}
		return stageReport{}, err
	}
	var rep stageReport
	if err := json.Unmarshal(l, &rep); err != nil {
		return stageReport{}, fmt.Errorf("bad report %q: %v", l, err)
	}
	switch rep.Kind {
	case stageOK, stageExec, stageError:
		return rep, nil
	}
	return stageReport{}, fmt.Errorf("bad report %q: unknown kind", l)
}
