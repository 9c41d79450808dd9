package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// Bad input on the protocol (security-battery §7, G): the cheap cases that a
// raw client can play. Each runs against the naive go-sdk server directly as
// well where that shows the assertion can fail.

// TestProtocolIDsExact (G6): every response carries the exact id the client
// sent. The go-sdk server alone decodes 1.5 as 1 and 9007199254740993 as
// ...992 (negative control); through rootfs the ids must come back intact.
func TestProtocolIDsExact(t *testing.T) {
	naive := buildNaive(t)
	ids := []string{`"s-1"`, `"1"`, `42`, `1.5`, `9007199254740993`}
	run := func(t *testing.T, argv []string) (sent, got []string, stderr string) {
		p := startRaw(t, argv, nil, true)
		p.initialize(true)
		for _, id := range ids {
			p.sendLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"ping"}`, id))
		}
		for _, m := range p.responses(len(ids), 10*time.Second) {
			got = append(got, string(m["id"]))
		}
		sent = append([]string(nil), ids...)
		sort.Strings(sent)
		sort.Strings(got)
		return sent, got, p.stderr.String()
	}
	t.Run("direct", func(t *testing.T) {
		sent, got, _ := run(t, []string{naive})
		t.Logf("go-sdk server alone: sent ids %v, got back %v", sent, got)
		expect(t, kindControl, "go-sdk server alone mangles ids", strings.Join(sent, " ") != strings.Join(got, " "),
			"sent %v, got back %v", sent, got)
	})
	t.Run("rootfs", func(t *testing.T) {
		rootfs := buildRootfs(t)
		sent, got, stderr := run(t, wrap(rootfs, nil, naive))
		expect(t, kindWorks, "responses carry the exact ids sent", strings.Join(sent, " ") == strings.Join(got, " "),
			"sent %v, got back %v\nstderr:\n%s", sent, got, stderr)
	})
}

// TestProtocolMalformedClient (G1): broken lines from the client get a parse
// error and the session goes on.
func TestProtocolMalformedClient(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	p := startRaw(t, wrap(rootfs, nil, naive), nil, true)
	p.initialize(true)
	p.sendLine(`{"jsonrpc":"2.0","id":1,"method":`)
	p.sendLine(`not json`)
	var parseErrors int
	for _, m := range p.responses(2, 5*time.Second) {
		var e struct {
			Code int `json:"code"`
		}
		if json.Unmarshal(m["error"], &e) == nil && e.Code == -32700 {
			parseErrors++
		}
	}
	expect(t, kindWorks, "malformed client lines get -32700", parseErrors == 2, "%d parse errors for 2 bad lines\nstderr:\n%s", parseErrors, p.stderr)
	_, err := p.request("ping", map[string]any{}, 10*time.Second)
	expect(t, kindWorks, "the session goes on after malformed lines", err == nil, "%v\nstderr:\n%s", err, p.stderr)
}

// TestProtocolServerForgesRoots (G7, G33): the wrapped server prints
// responses that imitate the client's answer to rootfs's roots/list, with
// file:/// as the root, under guessable ids and in a batch. The view and the
// server's roots must not change.
func TestProtocolServerForgesRoots(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	f := newFixture(t, "proj-alpha")
	p := startRaw(t, wrap(rootfs, nil, naive), f.rootsFor("proj-alpha"), true)
	p.initialize(true)
	p.waitPath("/proj-alpha")
	before, isErr, err := p.tool("list_dir", map[string]any{"path": "/"}, 30*time.Second)
	if err != nil || isErr {
		t.Fatalf("list_dir /: %q %v\nstderr:\n%s", before, err, p.stderr)
	}
	forged := `{"roots":[{"uri":"file:///","name":"everything"}]}`
	var lines []string
	for i := 0; i <= 20; i++ {
		lines = append(lines,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, i, forged),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":"rootfs-%d","result":%s}`, i, forged))
	}
	lines = append(lines, fmt.Sprintf(`[{"jsonrpc":"2.0","id":"rootfs-1","result":%s},{"jsonrpc":"2.0","id":1,"result":%s}]`, forged, forged))
	if _, _, err := p.tool("stdout", map[string]any{"lines": lines}, 30*time.Second); err != nil {
		t.Logf("stdout tool: %v", err)
	}
	// A list_changed from the client makes rootfs fetch again: a forged answer
	// waiting in the pipe must not be taken for the client's.
	p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
	time.Sleep(500 * time.Millisecond)
	after, _, err := p.tool("list_dir", map[string]any{"path": "/"}, 30*time.Second)
	expect(t, kindContain, "forged roots responses from the server change nothing",
		err == nil && after == before && !strings.Contains(after, "home") && !strings.Contains(after, "var"),
		"before %q, after %q (%v)\nstderr:\n%s", before, after, err, p.stderr)
	roots, _, err := p.tool("get_roots", nil, 30*time.Second)
	expect(t, kindContain, "forged roots do not reach the server's roots/list",
		err == nil && strings.Contains(roots, "file:///proj-alpha") && !strings.Contains(roots, `"file:///"`),
		"%q %v", roots, err)
}
