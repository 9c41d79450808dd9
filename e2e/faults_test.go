package e2e

import (
	"context"
	"encoding/json"

	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Case 5 of issue 5: faults. Each runs the naive server under rootfs with a
// marker in its command line, so the test can find every process of the
// session (rootfs's own re-execs carry the same command line) and check that
// none is left, and compares the host's mount table before and after.

func marker() string { return "-marker=e2e-" + randHex(8) }

// noLeftovers checks that no process of the session and no rootfs FUSE mount
// remain within d.
func noLeftovers(t *testing.T, mark, mountsBefore string, d time.Duration) {
	t.Helper()
	took, pids := waitGone(mark, d)
	expect(t, kindContain, "no process left behind", len(pids) == 0, "still running after %v: %v%s", took, pids, procsInfo(pids))
	left := newRootfsMounts(mountsBefore, hostMountinfo(t), "")
	expect(t, kindContain, "nothing left mounted on the host", len(left) == 0, "new fuse mounts: %q", left)
}

// TestFaultServerCrash: the server exits in the middle of a request. The
// client gets a JSON-RPC error for it, rootfs exits with the server's status,
// and nothing is left. Negative control: run directly, the client gets no
// answer at all (only EOF), which the assertion tells apart.
func TestFaultServerCrash(t *testing.T) {
	naive := buildNaive(t)
	f := newFixture(t, "proj-alpha")

	t.Run("direct", func(t *testing.T) {
		p := startRaw(t, []string{naive}, f.rootsFor("proj-alpha"), true)
		p.initialize(true)
		_, _, err := p.tool("crash", map[string]any{"code": 3}, 10*time.Second)
		status, exited := p.waitExit(5 * time.Second)
		expect(t, kindControl, "a crash without rootfs leaves the request unanswered",
			err != nil && strings.Contains(err.Error(), "closed before the response") && exited && status == 3,
			"err=%v exited=%v status=%d", err, exited, status)
	})

	t.Run("rootfs", func(t *testing.T) {
		rootfs := buildRootfs(t)
		before := hostMountinfo(t)
		mark := marker()
		p := startRaw(t, wrap(rootfs, nil, naive, mark), f.rootsFor("proj-alpha"), true)
		p.initialize(true)
		p.waitPath(f.v("proj-alpha"))
		text, isErr, err := p.tool("list_dir", map[string]any{"path": f.v("proj-alpha")}, 30*time.Second)
		if !expect(t, kindWorks, "session works before the crash", err == nil && !isErr && strings.Contains(text, "proj-alpha.txt"),
			"%q isError=%v err=%v\nstderr:\n%s", text, isErr, err, p.stderr) {
			return
		}
		start := time.Now()
		_, _, err = p.tool("crash", map[string]any{"code": 3}, 10*time.Second)
		expect(t, kindWorks, "the client gets an error for the request in flight",
			err != nil && strings.HasPrefix(err.Error(), "json-rpc error"), "got %v\nstderr:\n%s", err, p.stderr)
		answered := time.Since(start)
		status, exited := p.waitExit(10 * time.Second)
		t.Logf("crash: error answered after %v, rootfs exited after %v", answered.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		expect(t, kindWorks, "rootfs exits with the server's status", exited && status == 3,
			"exited=%v status=%d\nstderr:\n%s", exited, status, p.stderr)
		noLeftovers(t, mark, before, 2*time.Second)
	})

	t.Run("rootfs killed by signal", func(t *testing.T) {
		rootfs := buildRootfs(t)
		before := hostMountinfo(t)
		mark := marker()
		p := startRaw(t, wrap(rootfs, nil, naive, mark), f.rootsFor("proj-alpha"), true)
		p.initialize(true)
		p.waitPath(f.v("proj-alpha"))
		_, _, err := p.tool("crash", map[string]any{"code": 1, "signal": 9}, 10*time.Second)
		expect(t, kindWorks, "SIGKILLed server: the client gets an error", err != nil && strings.HasPrefix(err.Error(), "json-rpc error"),
			"got %v\nstderr:\n%s", err, p.stderr)
		status, exited := p.waitExit(10 * time.Second)
		expect(t, kindWorks, "SIGKILLed server: rootfs exits 128+9", exited && status == 137,
			"exited=%v status=%d\nstderr:\n%s", exited, status, p.stderr)
		noLeftovers(t, mark, before, 2*time.Second)
	})
}

// TestFaultClientGone: the client closes its end. The server and every
// rootfs process are gone within 2 s and nothing stays mounted.
func TestFaultClientGone(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	f := newFixture(t, "proj-alpha")
	before := hostMountinfo(t)
	mark := marker()
	p := startRaw(t, wrap(rootfs, nil, naive, mark), f.rootsFor("proj-alpha"), true)
	p.initialize(true)
	p.waitPath(f.v("proj-alpha"))
	if _, isErr, err := p.tool("list_dir", map[string]any{"path": f.v("proj-alpha")}, 30*time.Second); err != nil || isErr {
		t.Fatalf("session does not work: isError=%v err=%v\nstderr:\n%s", isErr, err, p.stderr)
	}
	if len(markedProcs(mark)) == 0 {
		t.Fatal("the marker finds no process of the session: the leftover check would prove nothing")
	}
	start := time.Now()
	p.stdin.Close()
	p.stdout.Close()
	took, pids := waitGone(mark, 2*time.Second)
	t.Logf("all session processes gone %v after the client closed", took.Round(time.Millisecond))
	expect(t, kindContain, "server gone within 2 s of the client leaving", len(pids) == 0,
		"still running after %v: %v%s\nstderr:\n%s", time.Since(start), pids, procsInfo(pids), p.stderr)
	noLeftovers(t, mark, before, time.Second)
}

// TestFaultClientKilled: the client dies (SIGKILL), so the kernel closes
// both of its pipe ends, and rootfs still has something to write to it: a
// roots/list for the list_changed the client sent last. rootfs gets EPIPE,
// not SIGPIPE: it stops the server as when the client closes its stdin
// (the server gets end of input, no SIGKILL), exits with the server's
// status, and leaves nothing. Before the fix the daemon died of SIGPIPE
// (exit 141) and the server was killed with it.
func TestFaultClientKilled(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	f := newFixture(t, "proj-alpha", "proj-beta")
	before := hostMountinfo(t)
	mark := marker()
	p := startRaw(t, wrap(rootfs, nil, naive, mark), f.rootsFor("proj-alpha"), true)
	p.initialize(true)
	p.waitPath(f.v("proj-alpha"))
	// The order makes rootfs's next write fail: the client's read end
	// first, then what rootfs answers with a write, then end of input.
	p.stdout.Close()
	p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
	p.stdin.Close()
	status, exited := p.waitExit(10 * time.Second)
	expect(t, kindWorks, "a dead client: rootfs exits with the server's status", exited && status == 0,
		"exited=%v status=%d (141 is SIGPIPE)\nstderr:\n%s", exited, status, p.stderr)
	noLeftovers(t, mark, before, 2*time.Second)
}

// TestFaultRootsNeverAnswered: the client declares roots but never answers
// roots/list. rootfs fails closed (no root appears), keeps the session
// going, and says so on stderr.
func TestFaultRootsNeverAnswered(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	f := newFixture(t, "proj-alpha")
	var flags []string
	for _, fl := range []string{"--roots-timeout", "--client-timeout", "--roots-list-timeout"} {
		if runFlag(t, rootfs, fl) {
			flags = append(flags, fl+"=2s")
			break
		}
	}
	t.Logf("rootfs flags: %q", flags)
	p := startRaw(t, wrap(rootfs, flags, naive), f.rootsFor("proj-alpha"), false)
	p.initialize(true)

	_, err := p.request("ping", map[string]any{}, 10*time.Second)
	expect(t, kindWorks, "traffic flows while roots/list is unanswered", err == nil, "ping: %v\nstderr:\n%s", err, p.stderr)
	text, isErr, err := p.tool("list_dir", map[string]any{"path": "/"}, 90*time.Second)
	expect(t, kindWorks, "tool calls work while roots/list is unanswered", err == nil && !isErr, "%q isError=%v err=%v\nstderr:\n%s", text, isErr, err, p.stderr)
	expect(t, kindContain, "no root appears without the client's answer", !strings.Contains(text, "proj-alpha"), "/ holds %q", text)
	text, _, err = p.tool("read_file", map[string]any{"path": f.v("proj-alpha", "proj-alpha.txt")}, 90*time.Second)
	expect(t, kindContain, "the unanswered root is not readable", err == nil && !strings.Contains(text, "content of"), "%q err=%v", text, err)

	logged := regexp.MustCompile(`(?i)roots.*(time|answer|respond|wait)|(time|answer|respond|wait).*roots`)
	deadline := time.Now().Add(60 * time.Second)
	for !logged.MatchString(p.stderr.String()) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	expect(t, kindWorks, "the unanswered roots/list is logged", logged.MatchString(p.stderr.String()), "stderr:\n%s", p.stderr)
	p.mu.Lock()
	calls := p.rootsCalls
	p.mu.Unlock()
	t.Logf("roots/list requests rootfs sent to the silent client: %d", calls)
}

// TestFaultListChangedBurst: 1000 list_changed in a burst are coalesced into
// a few roots/list requests, and the final view is the last answer.
func TestFaultListChangedBurst(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	f := newFixture(t, "proj-alpha", "proj-beta", "proj-gamma")
	const burst = 1000
	tr := runTS(t, wrap(rootfs, nil, naive), scenario{
		Roots: f.rootsFor("proj-alpha", "proj-beta"),
		Steps: []step{
			until("first roots", "get_roots", nil, []string{f.vuri("proj-alpha"), f.vuri("proj-beta")}, nil),
			setRoots("burst", f.rootsFor("proj-gamma"), burst),
			until("final roots", "get_roots", nil, []string{f.vuri("proj-gamma")}, []string{"proj-alpha", "proj-beta"}),
			call("ls /", "list_dir", map[string]any{"path": filepath.Dir(f.v("proj-gamma"))}), // "/" in flat layout
			call("read final", "read_file", map[string]any{"path": f.v("proj-gamma", "proj-gamma.txt")}),
			call("read removed", "read_file", map[string]any{"path": f.v("proj-alpha", "proj-alpha.txt")}),
			step{"op": "sleep", "ms": 1000},
			call("stats", "stats", nil),
		},
	})
	first, final := tr.step(t, "first roots"), tr.step(t, "final roots")
	fetches := tr.RootsListCalls - first.RootsListCalls
	var stats struct{ RootsListChanged int }
	_ = json.Unmarshal([]byte(tr.step(t, "stats").Text), &stats)
	t.Logf("%d list_changed from the client caused %d roots/list to the client and %d list_changed to the server",
		burst, fetches, stats.RootsListChanged)
	expect(t, kindWorks, "final roots are the last answer", final.Satisfied, "%s\nstderr:\n%s", final, tr.stderr)
	expect(t, kindWorks, "the burst is coalesced", fetches >= 1 && fetches <= burst/10,
		"%d list_changed caused %d roots/list", burst, fetches)
	expect(t, kindWorks, "the server is not flooded either", stats.RootsListChanged >= 1 && stats.RootsListChanged <= burst/10,
		"server saw %d list_changed", stats.RootsListChanged)
	ls := tr.step(t, "ls /")
	expect(t, kindWorks, "final view holds the final root only", ls.succeeded() && strings.Contains(ls.Text, "proj-gamma") &&
		!strings.Contains(ls.Text, "proj-alpha") && !strings.Contains(ls.Text, "proj-beta"), "%s", ls)
	expect(t, kindWorks, "final root reads", strings.Contains(tr.step(t, "read final").Text, "content of proj-gamma"), "%s", tr.step(t, "read final"))
	expect(t, kindContain, "removed root is gone", !tr.step(t, "read removed").succeeded(), "%s", tr.step(t, "read removed"))
}

// TestFaultRootDeleted: a root is deleted on the host while the server uses
// it: clear errors, no crash, the other root keeps working.
func TestFaultRootDeleted(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	f := newFixture(t, "proj-alpha", "proj-doomed")
	p := startRaw(t, wrap(rootfs, nil, naive), f.rootsFor("proj-alpha", "proj-doomed"), true)
	p.initialize(true)
	p.waitPath(f.v("proj-doomed"))
	text, _, err := p.tool("list_dir", map[string]any{"path": f.v("proj-doomed")}, 30*time.Second)
	if err != nil || !strings.Contains(text, "proj-doomed.txt") {
		t.Fatalf("root not served: %q %v\nstderr:\n%s", text, err, p.stderr)
	}
	must(t, os.RemoveAll(f.roots["proj-doomed"]))

	for _, c := range []struct{ tool, path string }{
		{"read_file", f.v("proj-doomed", "proj-doomed.txt")},
		{"list_dir", f.v("proj-doomed")},
		{"write_file", f.v("proj-doomed", "new.txt")},
	} {
		args := map[string]any{"path": c.path}
		if c.tool == "write_file" {
			args["content"] = "x"
		}
		// Host-side changes show up within the kernel's cache timeout
		// (--cache-timeout, default 1s): allow 5 s.
		var text string
		var isErr bool
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			text, isErr, err = p.tool(c.tool, args, 30*time.Second)
			if err != nil || isErr || time.Now().After(deadline) {
				break
			}
		}
		t.Logf("%s %s after the host deleted the root: %q", c.tool, c.path, text)
		expect(t, kindWorks, "deleted root: "+c.tool+" fails with a clear error",
			err == nil && isErr && regexp.MustCompile(`no such file|not exist|stale|ENOENT|removed|gone`).MatchString(strings.ToLower(text)),
			"%q isError=%v err=%v", text, isErr, err)
	}
	// Recreating the path does not bring a new tree into the view behind the client's back.
	mustWrite(t, filepath.Join(f.roots["proj-doomed"], "impostor.txt"), "impostor\n")
	text, _, _ = p.tool("read_file", map[string]any{"path": f.v("proj-doomed", "impostor.txt")}, 30*time.Second)
	t.Logf("read of a file recreated at the deleted root's host path: %q", text)

	text, isErr, err := p.tool("read_file", map[string]any{"path": f.v("proj-alpha", "proj-alpha.txt")}, 30*time.Second)
	expect(t, kindWorks, "deleted root: the other root still works", err == nil && !isErr && strings.Contains(text, "content of"),
		"%q isError=%v err=%v\nstderr:\n%s", text, isErr, err, p.stderr)
	_, exited := p.waitExit(0)
	expect(t, kindWorks, "deleted root: rootfs did not crash", !exited, "rootfs exited\nstderr:\n%s", p.stderr)
}

// TestFaultStderrFlood: the server writes 32 MiB to stderr in one request;
// rootfs drains it and the session goes on.
func TestFaultStderrFlood(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	f := newFixture(t, "proj-alpha")
	p := startRaw(t, wrap(rootfs, nil, naive), f.rootsFor("proj-alpha"), true)
	p.initialize(true)
	p.waitPath(f.v("proj-alpha"))
	const n = 32 << 20
	start := time.Now()
	text, isErr, err := p.tool("flood_stderr", map[string]any{"bytes": n}, 2*time.Minute)
	t.Logf("flood of %d MiB answered in %v; rootfs passed on %d bytes of stderr", n>>20, time.Since(start).Round(time.Millisecond), p.stderr.Total())
	expect(t, kindWorks, "stderr flood: the request is answered", err == nil && !isErr, "%q %v", text, err)
	text, isErr, err = p.tool("list_dir", map[string]any{"path": f.v("proj-alpha")}, 30*time.Second)
	expect(t, kindWorks, "stderr flood: the session goes on", err == nil && !isErr && strings.Contains(text, "proj-alpha.txt"),
		"%q isError=%v err=%v", text, isErr, err)
}

// TestFaultBanner: a server that prints a banner to stdout before MCP. The
// go-sdk client wedges on it when connected directly (negative control);
// through rootfs the banner is dropped with a warning and the session works.
func TestFaultBanner(t *testing.T) {
	naive := buildNaive(t)
	f := newFixture(t, "proj-alpha")
	server := []string{naive, "-banner", "Server started on stdio"}

	t.Run("direct", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, cs, _, err := goClient(t, ctx, server, f.rootsFor("proj-alpha"))
		if err == nil {
			_, _, err = toolText(ctx, cs, "list_dir", map[string]any{"path": "/"})
		}
		expect(t, kindControl, "a stdout banner breaks the go-sdk client without rootfs", err != nil, "the direct session worked")
	})

	t.Run("rootfs", func(t *testing.T) {
		rootfs := buildRootfs(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, cs, stderr, err := goClient(t, ctx, wrap(rootfs, nil, server...), f.rootsFor("proj-alpha"))
		if !expect(t, kindWorks, "banner: the go-sdk client connects through rootfs", err == nil, "%v\nstderr:\n%s", err, stderr) {
			return
		}
		text, err := pollTool(ctx, cs, "get_roots", nil, func(s string) bool { return strings.Contains(s, f.vuri("proj-alpha")) })
		expect(t, kindWorks, "banner: the session works", err == nil, "%q %v\nstderr:\n%s", text, err, stderr)
		dropped := regexp.MustCompile(`(?i)Server started on stdio|non-json|not json|not a json|banner|dropp`)
		expect(t, kindWorks, "banner: the dropped line is logged", dropped.MatchString(stderr.String()), "stderr:\n%s", stderr)
	})
}
