package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/mcpbridge"
)

// The first calls of server-filesystem, as VS Code makes them: initialize with roots, answer
// roots/list, call a tool at once; then change the roots and call again at once. The server
// fetches roots on initialized and on list_changed, checks them asynchronously, and answers
// what arrives meanwhile with the directories it had: none, at first ("Access denied ... not
// in "). Through rootfs, the call is held until the server has read its roots/list answer and a
// ping after it, then --roots-settle more. server-filesystem runs with tap/tap.mjs preloaded,
// which records what it reads on stdin and when it took the roots in, in its own order: the
// guarantees rootfs gives are checked there, on every session, and the answers too.

// fcSession is one session of firstcall.mjs.
type fcSession struct {
	Wait           string   `json:"wait"`
	Calls          []fcCall `json:"calls"`
	ChangeCalls    []fcCall `json:"changeCalls"`
	RootsListCalls int      `json:"rootsListCalls"`
	Tap            []tapEv  `json:"tap"`
	Ms             int      `json:"ms"`
	Fatal          string   `json:"fatal"`
}

type fcCall struct {
	OK      bool   `json:"ok"`
	IsError bool   `json:"isError"`
	Text    string `json:"text"`
	Error   string `json:"error"`
}

func (c fcCall) String() string {
	if c.Error != "" {
		return "error: " + c.Error
	}
	return fmt.Sprintf("isError=%v %q", c.IsError, c.Text)
}

// tapEv is one event of tap/tap.mjs.
type tapEv struct {
	T      float64         `json:"t"` // ms, the server's clock
	Ev     string          `json:"ev"`
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Roots  []string        `json:"roots"`
}

func (e tapEv) String() string {
	switch {
	case e.Ev != "in":
		return fmt.Sprintf("%.1f %s", e.T, e.Ev)
	case e.Method != "":
		return fmt.Sprintf("%.1f %s %s", e.T, e.Method, e.ID)
	case e.Roots != nil:
		return fmt.Sprintf("%.1f answer %s roots=%q", e.T, e.ID, e.Roots)
	}
	return fmt.Sprintf("%.1f answer %s", e.T, e.ID)
}

// isRootfsPing reports rootfs's own ping to the server.
func (e tapEv) isRootfsPing() bool {
	return e.Ev == "in" && e.Method == "ping" && bytes.HasPrefix(e.ID, []byte(`"rootfs-`))
}

type fcSpec struct {
	Command  string    `json:"command"`
	Args     []string  `json:"args"`
	Roots    []mcpRoot `json:"roots"`
	Sessions int       `json:"sessions"`
	Parallel int       `json:"parallel"`
	Wait     []string  `json:"wait"`
	Calls    []fcStep  `json:"calls"`
	Change   *fcChange `json:"change,omitempty"`
	// Env is added to the environment of each session's command.
	Env map[string]string `json:"env,omitempty"`
}

type fcStep struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

type fcChange struct {
	Roots []mcpRoot `json:"roots"`
	Calls []fcStep  `json:"calls"`
}

// runFirstCalls runs spec's sessions through firstcall.mjs with command line argv.
func runFirstCalls(t *testing.T, argv []string, spec fcSpec) []fcSession {
	t.Helper()
	node := nodeBin(t)
	spec.Command, spec.Args = argv[0], argv[1:]
	in, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(e2eDir, "firstcall.mjs"), "-")
	cmd.Dir = e2eDir
	cmd.Stdin = bytes.NewReader(in)
	var stdout bytes.Buffer
	stderr := newTail(64 << 10)
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	start := time.Now()
	runErr := cmd.Run()
	var out struct {
		Sessions []fcSession `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout.String())), &out); err != nil || len(out.Sessions) != spec.Sessions {
		t.Fatalf("firstcall.mjs printed no result (%v, run: %v)\nstderr:\n%s", err, runErr, stderr)
	}
	t.Logf("%s: %d sessions, %d at a time, in %v", filepath.Base(argv[0]), spec.Sessions, spec.Parallel, time.Since(start).Round(time.Millisecond))
	return out.Sessions
}

// fcPhase is what the server read around one of the calls made at once (the first call, or
// the first one after the roots changed), from its tap.
type fcPhase struct {
	call     int  // index of the tools/call in the tap; -1: never read
	answered bool // a roots/list answer listing want was read before the call
	wrong    bool // a roots/list answer without want was read before it (after from)
	pingLast bool // rootfs's ping came after that answer, before the call
	gap      float64
	slow     bool // the server took the roots in only after it read the call
}

// phase reads the tap from event index from: the first tools/call, and what came before it.
func phase(tap []tapEv, from int, want string) fcPhase {
	p := fcPhase{call: -1}
	answerAt, pingAt := -1, -1
	for i := from; i < len(tap); i++ {
		e := tap[i]
		switch {
		case e.Ev == "in" && e.Method == "tools/call":
			p.call = i
		case e.Ev == "in" && e.Method == "" && e.Roots != nil:
			if contains(e.Roots, want) {
				p.answered, answerAt = true, i
			} else {
				p.wrong = true
			}
		case e.isRootfsPing():
			pingAt = i
		}
		if p.call >= 0 {
			break
		}
	}
	if p.call < 0 {
		return p
	}
	p.pingLast = answerAt >= 0 && pingAt > answerAt
	if pingAt >= 0 {
		p.gap = tap[p.call].T - tap[pingAt].T
	}
	// The take-in of that answer: the first "updated" after it.
	for i := max(answerAt, from); i < len(tap) && answerAt >= 0; i++ {
		if tap[i].Ev == "updated" {
			p.slow = i > p.call
			break
		}
	}
	return p
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// changeStart is the index of the client's list_changed in the tap (-1: none).
func changeStart(tap []tapEv) int {
	for i, e := range tap {
		if e.Ev == "in" && e.Method == "notifications/roots/list_changed" {
			return i
		}
	}
	return -1
}

func tapString(tap []tapEv) string {
	var b strings.Builder
	for _, e := range tap {
		b.WriteString("\n  " + e.String())
	}
	return b.String()
}

// TestServerFilesystemFirstCalls repeats server-filesystem's first calls in 200 fresh sessions
// through rootfs run (20 with -short), half calling right after initialized and half right
// after answering roots/list, and in each changes the roots and calls again at once. Every
// session must show, in the server's own order: its roots/list answered with the client's root
// before the call, rootfs's ping after that answer, the call --roots-settle after the ping; and
// the answers must list the root, and after the change the new root only. An answer without
// them counts only when the server itself took longer than the settle (it is logged). Controls:
// a build without the hold (the call overtakes the roots), --roots-settle 0 (the order holds,
// server-filesystem answers before it has checked its roots), and the server run directly.
func TestServerFilesystemFirstCalls(t *testing.T) {
	rootfs := buildRootfs(t)
	node := nodeBin(t)
	f := newFixture(t, "proj-alpha", "proj-beta")
	p := paths{f: f, wrapped: true}
	tapDir := filepath.Join(e2eDir, "tap")
	server := []string{node, "--import", filepath.Join(tapDir, "tap.mjs"), serverFilesystemJS()}
	flags := append(nodeFlags(), "--ro-bind", tapDir)
	n, nControl := 200, 20
	if testing.Short() {
		n, nControl = 20, 10
	}
	spec := func(sessions int, pp paths) fcSpec {
		return fcSpec{
			Roots: f.rootsFor("proj-alpha"), Sessions: sessions, Parallel: 4, Wait: []string{"connected", "answered"},
			Calls: []fcStep{{Name: "list_allowed_directories"}, {Name: "read_text_file", Arguments: map[string]any{"path": pp.in("proj-alpha", "proj-alpha.txt")}}},
			Change: &fcChange{Roots: f.rootsFor("proj-beta"),
				Calls: []fcStep{{Name: "list_allowed_directories"}, {Name: "read_text_file", Arguments: map[string]any{"path": pp.in("proj-beta", "proj-beta.txt")}}}},
		}
	}
	firstOK := func(s fcSession, pp paths) bool {
		return len(s.Calls) == 2 && s.Calls[0].OK && s.Calls[0].Text == "Allowed directories:\n"+pp.in("proj-alpha") &&
			s.Calls[1].OK && !s.Calls[1].IsError && strings.Contains(s.Calls[1].Text, "content of proj-alpha")
	}
	changeOK := func(s fcSession, pp paths) bool {
		return len(s.ChangeCalls) == 2 && s.ChangeCalls[0].OK && s.ChangeCalls[0].Text == "Allowed directories:\n"+pp.in("proj-beta") &&
			s.ChangeCalls[1].OK && !s.ChangeCalls[1].IsError && strings.Contains(s.ChangeCalls[1].Text, "content of proj-beta")
	}
	emptyFirst := func(s fcSession) bool {
		return len(s.Calls) > 0 && s.Calls[0].OK && strings.TrimSpace(s.Calls[0].Text) == "Allowed directories:"
	}

	t.Run("rootfs", func(t *testing.T) {
		settle := mcpbridge.DefaultRootsSettle
		sessions := runFirstCalls(t, wrap(rootfs, flags, server...), spec(n, p))
		var bad []string
		slow, empty := 0, 0
		var maxMs int
		for i, s := range sessions {
			maxMs = max(maxMs, s.Ms)
			fail := func(format string, args ...any) {
				if len(bad) < 5 {
					bad = append(bad, fmt.Sprintf("session %d (%s): %s\ncalls %v then %v; tap:%s", i, s.Wait, fmt.Sprintf(format, args...), s.Calls, s.ChangeCalls, tapString(s.Tap)))
				} else {
					bad = append(bad, fmt.Sprintf("session %d (%s): %s", i, s.Wait, fmt.Sprintf(format, args...)))
				}
			}
			if s.Fatal != "" {
				fail("fatal: %s", s.Fatal)
				continue
			}
			if emptyFirst(s) {
				empty++
			}
			first := phase(s.Tap, 0, f.vuri("proj-alpha"))
			switch {
			case first.call < 0:
				fail("the server never read the first call")
				continue
			case !first.answered || first.wrong:
				fail("the call reached the server before its roots/list answer with the client's root (answered=%v, another answer=%v)", first.answered, first.wrong)
			case !first.pingLast:
				fail("the call reached the server before rootfs's ping that follows the roots")
			case first.gap < float64(settle.Milliseconds()):
				fail("the call came %.1fms after the ping, before the settle (%v)", first.gap, settle)
			case !firstOK(s, p) && first.slow:
				slow++
				t.Logf("session %d (%s): server-filesystem took its roots in more than %v after the ping: %v%s", i, s.Wait, settle, s.Calls, tapString(s.Tap))
			case !firstOK(s, p):
				fail("first answers wrong: %v", s.Calls)
			}
			from := changeStart(s.Tap)
			if from < 0 {
				fail("the server never read the list_changed")
				continue
			}
			ch := phase(s.Tap, from, f.vuri("proj-beta"))
			switch {
			case ch.call < 0:
				fail("the server never read the call after the change")
			case !ch.answered:
				fail("the call after list_changed reached the server before its roots/list answer with the new root")
			case !ch.pingLast:
				fail("the call after list_changed reached the server before rootfs's ping that follows the roots")
			case ch.gap < float64(settle.Milliseconds()):
				fail("the call after list_changed came %.1fms after the ping, before the settle (%v)", ch.gap, settle)
			case !changeOK(s, p) && ch.slow:
				slow++
				t.Logf("session %d (%s): after the change, server-filesystem took its roots in more than %v after the ping: %v%s", i, s.Wait, settle, s.ChangeCalls, tapString(s.Tap))
			case !changeOK(s, p):
				fail("answers after the change wrong: %v", s.ChangeCalls)
			}
		}
		t.Logf("%d sessions: %d first answers empty, %d calls the server answered before taking its roots in (slower than --roots-settle %v); slowest session %dms",
			len(sessions), empty, slow, settle, maxMs)
		expect(t, kindWorks, fmt.Sprintf("%d first calls of server-filesystem through rootfs reach it after its roots/list answer with the client's root, a ping and the settle, and find the root", len(sessions)),
			len(bad) == 0, "%d sessions failed:\n%s", len(bad), strings.Join(bad, "\n"))
	})

	t.Run("control_without_the_hold", func(t *testing.T) {
		noHold := buildRootfsControl(t, control.NoRootsHold)
		sp := spec(nControl, p)
		// The SDK's transport gives rootfs a default environment, not the test's:
		// the knob goes in the spec.
		sp.Env = map[string]string{control.EnvVar: control.Names(control.NoRootsHold)}
		sessions := runFirstCalls(t, wrap(noHold, flags, server...), sp)
		overtaken, empty := 0, 0
		for _, s := range sessions {
			if s.Fatal != "" {
				t.Fatalf("fatal: %s", s.Fatal)
			}
			if first := phase(s.Tap, 0, f.vuri("proj-alpha")); first.call >= 0 && !first.answered {
				overtaken++
			}
			if emptyFirst(s) {
				empty++
			}
		}
		t.Logf("without the hold: %d of %d first calls reached the server before its roots, %d answered with no directory", overtaken, len(sessions), empty)
		expect(t, kindControl, "without the hold, server-filesystem's first call overtakes its roots and finds no directory",
			overtaken > 0 && empty > 0, "%d overtaken, %d empty of %d", overtaken, empty, len(sessions))
	})

	t.Run("control_without_the_settle", func(t *testing.T) {
		if !runFlag(t, rootfs, "--roots-settle") {
			t.Skip("this rootfs has no --roots-settle")
		}
		sessions := runFirstCalls(t, wrap(rootfs, append(flags, "--roots-settle", "0"), server...), spec(nControl, p))
		ordered, empty := 0, 0
		for _, s := range sessions {
			if s.Fatal != "" {
				t.Fatalf("fatal: %s", s.Fatal)
			}
			if first := phase(s.Tap, 0, f.vuri("proj-alpha")); first.answered && !first.wrong && first.pingLast {
				ordered++
			}
			if emptyFirst(s) {
				empty++
			}
		}
		t.Logf("without the settle: %d of %d first calls after the roots and the ping, %d answered with no directory", ordered, len(sessions), empty)
		expect(t, kindWorks, "without the settle, the first call still reaches the server after its roots and the ping",
			ordered == len(sessions), "%d of %d", ordered, len(sessions))
		expect(t, kindControl, "without the settle, server-filesystem answers a first call before it has checked its roots",
			empty > 0, "%d of %d empty", empty, len(sessions))
	})

	t.Run("control_direct", func(t *testing.T) {
		sp := spec(nControl, paths{f: f})
		sp.Wait = []string{"connected"}
		sessions := runFirstCalls(t, server, sp)
		empty := 0
		for _, s := range sessions {
			if s.Fatal != "" {
				t.Fatalf("fatal: %s", s.Fatal)
			}
			if emptyFirst(s) {
				empty++
			}
		}
		t.Logf("run directly: %d of %d first calls answered with no directory", empty, len(sessions))
		expect(t, kindControl, "run directly, server-filesystem answers an immediate first call with no directory",
			empty > 0, "%d of %d empty", empty, len(sessions))
	})
}
