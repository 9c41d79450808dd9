package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/rootset"
)

func TestInitializeEditedInPlace(t *testing.T) {
	tests := []struct {
		name, in, want string
		roots, lc      bool
	}{
		{
			name:  "no roots: inserted, unknown fields and order kept",
			in:    `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{"sampling":{},"tasks":{"x":1}},"clientInfo":{"name":"c","version":"1"},"zz":1},"extra":true}`,
			want:  `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{"roots":{"listChanged":true},"sampling":{},"tasks":{"x":1}},"clientInfo":{"name":"c","version":"1"},"zz":1},"extra":true}`,
			roots: false,
		},
		{
			name:  "roots without listChanged: replaced",
			in:    `{"params":{"capabilities":{"elicitation":{}, "roots" : {} }},"jsonrpc":"2.0","method":"initialize","id":"a"}`,
			want:  `{"params":{"capabilities":{"elicitation":{}, "roots" : {"listChanged":true} }},"jsonrpc":"2.0","method":"initialize","id":"a"}`,
			roots: true,
		},
		{
			name:  "roots with listChanged",
			in:    `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true,"x":2}}}}`,
			want:  `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}`,
			roots: true, lc: true,
		},
		{
			name: "empty capabilities",
			in:   `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}`,
			want: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}`,
		},
		{
			name: "no capabilities",
			in:   `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
			want: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}},"protocolVersion":"2025-11-25"}}`,
		},
		{
			name: "roots of the wrong type is no roots",
			in:   `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"roots":true}}}`,
			want: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.startRaw(true, true)
			h.clientSend(tt.in)
			expect(t, h.serverRecv(), tt.want)
			s := h.b.roots
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.client.roots != tt.roots || s.client.listChanged != tt.lc {
				t.Errorf("declared roots=%v listChanged=%v, want %v %v", s.client.roots, s.client.listChanged, tt.roots, tt.lc)
			}
		})
	}
}

func TestForwardedVerbatim(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(true, true)
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":9007199254740991,"method":"tools/call","params":{"name":"x"},"zzz":[1,2]}`,
		`{ "method" : "tools/list", "jsonrpc":"2.0", "id":"\u0041b"  }`,
		`{"jsonrpc":"2.0","id":-0,"method":"x/y","params":["\ud800",1e400]}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1.5,"progress":0.25}}`,
	} {
		h.clientSend(m)
		expect(t, h.serverRecv(), m)
	}
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":9007199254740991,"result":{"content":[],"unknown":null}}`,
		`{"jsonrpc":"2.0","id":"Ab","error":{"code":-1,"message":"m","data":{"k":[]}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{"messages":[]}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`,
	} {
		h.serverSend(m)
		expect(t, h.clientRecv(), m)
	}
	// The client's answer to the server's sampling request goes back unchanged.
	m := `{"jsonrpc":"2.0","id":5,"result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}}`
	h.clientSend(m)
	expect(t, h.serverRecv(), m)
}

func TestInvalidClientMessages(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(true, true)
	for _, tt := range []struct{ in, code string }{
		{`{"jsonrpc":"2.0","id":1,"method":`, "-32700"},
		{`not json`, "-32700"},
		{`{"jsonrpc":"2.0","id":1} trailing`, "-32700"},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, "-32600"},
		{`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, "-32600"},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, "-32600"},
		{`{"jsonrpc":"2.0","id":{},"method":"ping"}`, "-32600"},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, "-32600"},
		{`{"jsonrpc":"2.0","id":3,"method":"ping","method":"roots/list"}`, "-32600"},
		{`"just a string"`, "-32600"},
		{`[]`, "-32600"},
	} {
		h.clientSend(tt.in)
		got := h.clientRecv()
		if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":`+tt.code+`,`) {
			t.Errorf("%s: got %s, want code %s", tt.in, got, tt.code)
		}
	}
	// The session goes on.
	h.sync("after")
}

func TestOversizedLines(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxLine = 1024 })
	h.startRaw(true, true)
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"pad":"` + strings.Repeat("x", 4096) + `"}}`
	h.clientSend(big)
	got := h.clientRecv()
	if !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, "too large") {
		t.Fatalf("got %s", got)
	}
	h.serverSend(big)
	h.sync("after-big") // the server's oversized line was dropped, the next messages flow
	if h.logs.FilterMessage("dropped an oversized message from the server").Len() != 1 {
		t.Error("no warning for the server's oversized line")
	}
}

func TestNonJSONServerLine(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(true, true)
	h.serverSend("Server started on stdio")
	h.serverSend("\x1b[32mready\x1b[0m {")
	h.serverSend(`{"jsonrpc":"2.0","id":1}`) // valid JSON, not JSON-RPC
	m := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`
	h.serverSend(m)
	expect(t, h.clientRecv(), m)
	if n := h.logs.FilterMessage("dropped a line from the server that is not json").Len(); n != 2 {
		t.Errorf("%d warnings for non-json lines, want 2", n)
	}
}

func TestRootsTranslatedRaw(t *testing.T) {
	dirs := mkdirs(t, "proj", "other dir")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	if !h.b.ours(stringID(id)) {
		t.Fatalf("rootfs id %q lacks the nonce prefix %q", id, h.b.prefix)
	}
	// The server asks before the client answered: the answer waits for the roots.
	h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	h.clientSend(`{"jsonrpc":"2.0","id":"` + id + `","result":{"roots":[{"uri":"file://` + dirs[0] + `","name":"P","_meta":{"k":"v"}},{"uri":"file://` + dirs[1] + `"},{"uri":7},{"uri":"file:///nonexistent/x"}]}}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///proj","name":"P","_meta":{"k":"v"}},{"uri":"file:///other%20dir"}]}}`)
	if got := entryNames(h.view.Table()); fmt.Sprint(got) != "[proj other dir]" {
		t.Errorf("entries %v", got)
	}
	if h.logs.FilterMessage("root skipped").Len() != 1 || h.logs.FilterMessage("dropped a malformed root").Len() != 1 {
		t.Error("skipped/malformed roots not logged")
	}
}

func TestMethodNotFoundFallsBackToStatic(t *testing.T) {
	dirs := mkdirs(t, "static")
	h := newHarness(t, func(o *Options) { o.Static = []rootset.Root{{URI: dirs[0]}} })
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{}}`)
	h.clientSend(`{"jsonrpc":"2.0","id":"` + id + `","error":{"code":-32601,"message":"Method not found"}}`)
	h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///static"}]}}`)
	// No retry storm: list_changed from this client is ignored from now on.
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	h.sync("s")
	if n := h.b.roots.fetchCount(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

func TestNoCapabilityNoStaticIsEmptyAndWarnsOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(true, true)
	h.handshake(`{}`)
	h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":1,"result":{"roots":[]}}`)
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`) // ignored: no capability
	h.sync("s")
	if n := h.logs.FilterMessageSnippet("no roots: the server sees no files").Len(); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
	if h.b.roots.fetchCount() != 0 {
		t.Errorf("fetched %d times from a client without roots", h.b.roots.fetchCount())
	}
}

// TestNoRootsRefuses: with Options.NoRoots set, a client that declares no roots ends Run with
// that error instead of leaving the server an empty view; the control (NoRoots nil) is
// TestNoCapabilityNoStaticIsEmptyAndWarnsOnce above, where the bridge keeps serving.
func TestNoRootsRefuses(t *testing.T) {
	errNoRoots := errors.New("no roots: pass --root DIR")
	for _, tc := range []struct{ name, caps, reply string }{
		{"no capability", `{}`, ""},
		{"method not found", `{"roots":{}}`, `{"jsonrpc":"2.0","id":"%s","error":{"code":-32601,"message":"no"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.NoRoots = errNoRoots })
			h.startRaw(true, true)
			id := h.handshake(tc.caps)
			if tc.reply != "" {
				h.clientSend(fmt.Sprintf(tc.reply, id))
			}
			if err := h.wait(); !errors.Is(err, errNoRoots) {
				t.Fatalf("Run returned %v, want %v", err, errNoRoots)
			}
			if h.logs.FilterMessageSnippet("no roots from anywhere").Len() != 1 {
				t.Error("refusal not logged")
			}
		})
	}
}

func TestRootsTimeoutFailsClosed(t *testing.T) {
	dirs := mkdirs(t, "before", "late")
	prev := build([]rootset.Root{{URI: dirs[0]}})
	view := newTestView(prev)
	h := newHarness(t, func(o *Options) { o.Installer = view; o.RootsTimeout = 200 * time.Millisecond })
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	// The server asks, and the client sends a request of its own: both wait for the first
	// roots (the request is held so that it cannot see an empty view).
	h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	h.clientSend(`{"jsonrpc":"2.0","id":"during","method":"ping"}`)
	// The client never answers: rootfs cancels its request, the server's roots/list gets the
	// previous view, and the held request is released after it.
	expect(t, h.clientRecv(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"`+id+`","reason":"rootfs: roots/list timed out"}}`)
	// The two timers fire together, so the two messages may come in either order.
	got := []string{h.serverRecv(), h.serverRecv()}
	slices.Sort(got)
	want := []string{`{"jsonrpc":"2.0","id":"during","method":"ping"}`, `{"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///before"}]}}`}
	if !slices.Equal(got, want) {
		t.Fatalf("server got %q, want %q", got, want)
	}
	h.serverSend(`{"jsonrpc":"2.0","id":"during","result":{}}`)
	expect(t, h.clientRecv(), `{"jsonrpc":"2.0","id":"during","result":{}}`)
	// A late answer is ignored.
	h.clientSend(rootsReply(id, dirs[1]))
	h.sync("after")
	if view.swaps.Load() != 0 || fmt.Sprint(entryNames(view.Table())) != "[before]" {
		t.Errorf("view changed: swaps=%d entries=%v", view.swaps.Load(), entryNames(view.Table()))
	}
	if h.logs.FilterMessageSnippet("did not answer roots/list in time").Len() != 1 {
		t.Error("timeout not logged")
	}
}

func TestListChangedFloodCoalesced(t *testing.T) {
	dirs := mkdirs(t, "a", "b")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	h.clientSend(rootsReply(id, dirs[0]))
	h.sync("init")

	const flood = 1000
	for range flood {
		h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	}
	// The client's ping waits while the roots change: it reaches the server once the last
	// fetch is answered. Until then, answer every roots/list.
	after, afterReply := ping(`"after"`), `{"jsonrpc":"2.0","id":"after","result":{}}`
	h.clientSend(after)
	fetches, notified := 0, 0
	for done := false; !done; {
		select {
		case l := <-h.cliLines:
			if l == afterReply {
				done = true
				continue
			}
			m := decode(t, l)
			if m["method"] != "roots/list" {
				t.Fatalf("unexpected %v", m)
			}
			fetches++
			h.clientSend(rootsReply(m["id"].(string), dirs[0], dirs[1]))
		case l := <-h.srvLines:
			switch l {
			case after:
				h.serverSend(afterReply)
			case `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`:
				notified++
			default:
				t.Fatalf("server got %s", l)
			}
		case <-time.After(hang):
			t.Fatal("stuck")
		}
	}
	t.Logf("%d list_changed notifications caused %d roots/list fetches and %d list_changed to the server", flood, fetches, notified)
	if notified != fetches {
		t.Errorf("server notified %d times, want %d (once per swap)", notified, fetches)
	}
	if fetches != 2 {
		t.Errorf("%d fetches, want 2 (one in flight, one queued)", fetches)
	}
	if got := h.b.roots.fetchCount(); got != 3 {
		t.Errorf("bridge counted %d fetches in all, want 3 (initial + 2)", got)
	}
	if fmt.Sprint(entryNames(h.view.Table())) != "[a b]" {
		t.Errorf("entries %v", entryNames(h.view.Table()))
	}
}

func TestListChangedReachesServerAfterSwap(t *testing.T) {
	dirs := mkdirs(t, "a", "b")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	h.clientSend(rootsReply(id, dirs[0]))
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{}}`)
	m := decode(t, h.clientRecv())
	h.clientSend(rootsReply(m["id"].(string), dirs[1]))
	// The first install is silent (the server asks when it wants); the second is announced,
	// after the swap.
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	if fmt.Sprint(entryNames(h.view.Table())) != "[b]" {
		t.Errorf("entries %v", entryNames(h.view.Table()))
	}
	h.serverSend(`{"jsonrpc":"2.0","id":2,"method":"roots/list"}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":2,"result":{"roots":[{"uri":"file:///b"}]}}`)
}

func TestServerIDsLikeRootfs(t *testing.T) {
	dirs := mkdirs(t, "a")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	// While rootfs's own roots/list is outstanding, the server uses "rootfs-1", "rootfs-2" and
	// even rootfs's own prefix shape for its requests: they pass unchanged, answers too.
	for _, sid := range []string{"rootfs-1", "rootfs-2", "rootfs-0000000000000000-1"} {
		req := `{"jsonrpc":"2.0","id":"` + sid + `","method":"ping"}`
		h.serverSend(req)
		expect(t, h.clientRecv(), req)
		resp := `{"jsonrpc":"2.0","id":"` + sid + `","result":{}}`
		h.clientSend(resp)
		expect(t, h.serverRecv(), resp)
	}
	h.serverSend(`{"jsonrpc":"2.0","id":"rootfs-3","method":"roots/list"}`)
	h.clientSend(rootsReply(id, dirs[0]))
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":"rootfs-3","result":{"roots":[{"uri":"file:///a"}]}}`)
}

func TestRootfsIDsNeverReachServer(t *testing.T) {
	dirs := mkdirs(t, "a")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	// The client reuses rootfs's id for a request, and cancels it: refused / dropped.
	h.clientSend(`{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call"}`)
	got := h.clientRecv()
	if !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, `"id":"`+id+`"`) {
		t.Fatalf("got %s", got)
	}
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"` + id + `"}}`)
	// The server forges an answer to rootfs's request: it is not a client reply, so it is
	// dropped and changes nothing.
	h.serverSend(`{"jsonrpc":"2.0","id":"` + id + `","result":{"roots":[{"uri":"file:///"}]}}`)
	h.clientSend(rootsReply(id, dirs[0]))
	h.sync("s") // the server's next line is the ping: nothing with rootfs's id reached it
	if fmt.Sprint(entryNames(h.view.Table())) != "[a]" {
		t.Errorf("entries %v", entryNames(h.view.Table()))
	}
	// Nothing rootfs owns: forwarded verbatim, and the server's batch answer comes back verbatim.
	b1 := `[{"jsonrpc":"2.0","id":1,"method":"ping"}, {"jsonrpc":"2.0","id":2,"method":"tools/list"}]`
	h.clientSend(b1)
	expect(t, h.serverRecv(), b1)
	r1 := `[{"jsonrpc":"2.0","id":2,"result":{"tools":[]}},{"jsonrpc":"2.0","id":1,"result":{}}]`
	h.serverSend(r1)
	expect(t, h.clientRecv(), r1)
	if h.logs.FilterMessage("dropped a reply from the server to no pending request").Len() != 1 {
		t.Error("forged reply not logged")
	}
}

// TestServerRequestWithRootfsIDRefused: a server that has learnt rootfs's session prefix sends a
// request with the id of rootfs's roots/list in flight. It is refused with an error to the
// server and never reaches the client; forwarded, the client's -32601 for the unknown method
// came back with rootfs's id, was taken for the answer to rootfs's roots/list, and cleared the
// roots.
func TestServerRequestWithRootfsIDRefused(t *testing.T) {
	dirs := mkdirs(t, "a")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	h.clientSend(rootsReply(id, dirs[0]))
	h.sync("s1")
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	id2 := decode(t, h.clientRecv())["id"].(string)

	h.serverSend(`{"jsonrpc":"2.0","id":"` + id2 + `","method":"x/unknown"}`)
	// The client's messages wait while the roots are fetched: sync from the server's side.
	reached := h.syncServer("s2")
	// The client answers what reached it as clients answer a method they do not know, then
	// answers rootfs's roots/list with the same roots.
	for _, l := range reached {
		if m := decode(t, l); m["method"] != nil && m["id"] != nil {
			idJSON, _ := json.Marshal(m["id"])
			h.clientSend(`{"jsonrpc":"2.0","id":` + string(idJSON) + `,"error":{"code":-32601,"message":"Method not found"}}`)
		}
	}
	h.clientSend(rootsReply(id2, dirs[0]))
	h.sync("s3")
	if len(reached) != 0 {
		t.Errorf("reached the client: %q", reached)
	}
	if got := fmt.Sprint(entryNames(h.view.Table())); got != "[a]" {
		t.Fatalf("entries %s after the forged request, want [a]", got)
	}
	// The refusal is the server's: an error for its own id, in the order rootfs sent it.
	refusal := ""
	for _, l := range h.srvSkipped {
		if strings.Contains(l, `"error"`) {
			refusal = l
		}
	}
	if refusal == "" {
		refusal = h.serverRecv()
	}
	wantError(t, refusal, `"`+id2+`"`, codeInvalidRequest)
	if !strings.Contains(refusal, "session prefix") {
		t.Errorf("the refusal does not say why: %s", refusal)
	}
}

// TestClientIDsCarryingPrefixRefused: a client request or cancel whose id carries rootfs's
// session prefix anywhere, not only at the start, is refused or dropped as one that starts with
// it, as replies are: forwarded, it would hand the server the prefix.
func TestClientIDsCarryingPrefixRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(true, true)
	ids := []string{"0" + h.b.prefix + "1", "x-" + h.b.prefix, h.b.prefix + "7"}
	for _, id := range ids {
		h.clientSend(`{"jsonrpc":"2.0","id":"` + id + `","method":"tools/list"}`)
		h.clientSend(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"` + id + `"}}`)
	}
	refusals := h.sync("s")
	if len(h.srvSkipped) != 0 {
		t.Fatalf("reached the server: %q", h.srvSkipped)
	}
	if len(refusals) != len(ids) {
		t.Fatalf("the client got %q, want a refusal for each of %q", refusals, ids)
	}
	for i, id := range ids {
		wantError(t, refusals[i], `"`+id+`"`, codeInvalidRequest)
	}
}

// TestServerCancelOfRootfsIDDropped: a server that has learnt rootfs's session prefix cancels
// rootfs's roots/list in flight. The cancel never reaches the client, so the client's answer
// removes the root; forwarded, a client that honours it never answered, and the root the client
// dropped stayed in the view.
func TestServerCancelOfRootfsIDDropped(t *testing.T) {
	dirs := mkdirs(t, "a", "b")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	h.clientSend(rootsReply(id, dirs[0], dirs[1]))
	h.sync("s1")
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	id2 := decode(t, h.clientRecv())["id"].(string)

	h.serverSend(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"` + id2 + `"}}`)
	// The client's messages wait while the roots are fetched: sync from the server's side.
	reached := h.syncServer("s2")
	if len(reached) == 0 { // a client that honours a cancel does not answer
		h.clientSend(rootsReply(id2, dirs[0]))
	}
	h.sync("s3")
	if len(reached) != 0 {
		t.Errorf("reached the client: %q", reached)
	}
	if got := fmt.Sprint(entryNames(h.view.Table())); got != "[a]" {
		t.Fatalf("entries %s, want [a]: the client's answer was cancelled", got)
	}
	if h.logs.FilterMessage("dropped a cancel from the server of an id that carries rootfs's prefix").Len() != 1 {
		t.Error("the dropped cancel is not logged")
	}
}

func TestCancellation(t *testing.T) {
	dirs := mkdirs(t, "a")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	// A roots/list the server sends before the roots are known is held; cancelling it drops it.
	h.serverSend(`{"jsonrpc":"2.0","id":6,"method":"roots/list"}`)
	h.serverSend(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}}`)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	h.clientSend(rootsReply(id, dirs[0]))

	// Forwarded request: the cancel goes through with the same id, byte for byte.
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}`
	h.clientSend(call)
	expect(t, h.serverRecv(), call)
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`
	h.clientSend(cancel)
	expect(t, h.serverRecv(), cancel)
	// The server's late answer to the cancelled request is dropped.
	h.serverSend(`{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`)

	// A roots/list rootfs answered: the server's cancel for it is swallowed.
	h.serverSend(`{"jsonrpc":"2.0","id":8,"method":"roots/list"}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":8,"result":{"roots":[{"uri":"file:///a"}]}}`)
	h.serverSend(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":8}}`)
	// Server→client cancels of forwarded requests pass.
	c2 := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`
	h.serverSend(c2)
	expect(t, h.clientRecv(), c2) // nothing before it: not 7's late answer, not 8's cancel
}

func TestBatches(t *testing.T) {
	dirs := mkdirs(t, "a")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)

	// A reply to rootfs and a discover probe hidden in a batch are handled; the rest is
	// forwarded as a new array; rootfs's replies come back as one array.
	h.clientSend(`[{"jsonrpc":"2.0","id":3,"method":"ping"},` + rootsReply(id, dirs[0]) + `,{"jsonrpc":"2.0","id":"d","method":"server/discover"},{"x":1}]`)
	expect(t, h.serverRecv(), `[{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
	got := h.clientRecv()
	if !strings.HasPrefix(got, `[{"jsonrpc":"2.0","id":"d","error":{"code":-32601,`) || !strings.Contains(got, `},{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`) {
		t.Errorf("own replies: %s", got)
	}
	h.sync("s")
	if fmt.Sprint(entryNames(h.view.Table())) != "[a]" {
		t.Errorf("entries %v", entryNames(h.view.Table()))
	}
	// From the server: a roots/list inside a batch is answered, the rest forwarded.
	h.serverSend(`[{"jsonrpc":"2.0","id":4,"method":"roots/list"},{"jsonrpc":"2.0","method":"notifications/message","params":{}}]`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":4,"result":{"roots":[{"uri":"file:///a"}]}}`)
	expect(t, h.clientRecv(), `[{"jsonrpc":"2.0","method":"notifications/message","params":{}}]`)
}

func TestDiscoverProbe(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(true, true)
	h.clientSend(`{"jsonrpc":"2.0","id":"discover-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	expect(t, h.clientRecv(), `{"jsonrpc":"2.0","id":"discover-1","error":{"code":-32601,"message":"method not found: server/discover (rootfs speaks the initialize handshake)"}}`)
	// initialize on the same process works; the probe never reached the server.
	h.handshake(`{}`)
}

func TestProbeThenEOF(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(true, true)
	h.clientSend(`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`)
	start := time.Now()
	h.cliW.Close()
	expect(t, h.clientRecv(), `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found: server/discover (rootfs speaks the initialize handshake)"}}`)
	err := h.wait()
	if !errors.Is(err, ErrClientClosed) {
		t.Fatalf("Run: %v, want ErrClientClosed", err)
	}
	t.Logf("probe then stdin EOF: Run returned %v after EOF", h.ended.Sub(start))
	if _, ok := <-h.srvLines; ok {
		t.Error("the server got a message")
	} // closed: the server's stdin was closed
}

func TestClientEOFClosesServerStdin(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(true, true)
	h.handshake(`{}`)
	last := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`
	h.clientSend(last)
	start := time.Now()
	h.cliW.Close()
	expect(t, h.serverRecv(), last) // delivered before stdin is closed
	if _, ok := <-h.srvLines; ok {
		t.Error("more server input")
	}
	eof := time.Since(start)
	err := h.wait()
	if !errors.Is(err, ErrClientClosed) {
		t.Fatalf("Run: %v, want ErrClientClosed", err)
	}
	t.Logf("client EOF: server stdin closed after %v, Run returned after %v", eof, h.ended.Sub(start))
}

func TestServerExitAnswersPending(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(true, true)
	h.handshake(`{}`)
	for _, id := range []string{`3`, `"x"`} {
		h.clientSend(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"hang"}}`)
		h.serverRecv()
	}
	start := time.Now()
	h.srvW.Close()
	got := map[string]bool{}
	for range 2 {
		m := decode(t, h.clientRecv())
		if m["error"] == nil {
			t.Fatalf("want an error reply, got %v", m)
		}
		got[fmt.Sprint(m["id"])] = true
	}
	if !got["3"] || !got["x"] {
		t.Errorf("answered %v", got)
	}
	err := h.wait()
	if !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Run: %v, want ErrServerClosed", err)
	}
	t.Logf("server exit: pending answered and Run returned after %v", h.ended.Sub(start))
}

func TestStaticRootsPathForm(t *testing.T) {
	dirs := mkdirs(t, "s1", "s2")
	h := newHarness(t, func(o *Options) {
		o.Static = []rootset.Root{{URI: dirs[0]}, {URI: "file://" + dirs[1], Name: "two"}, {URI: filepath.Join(dirs[0], "missing")}}
	})
	h.startRaw(true, true)
	h.handshake(`{"sampling":{}}`)
	h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///s1"},{"uri":"file:///s2","name":"two"}]}}`)
	if h.logs.FilterMessage("root skipped").Len() != 1 {
		t.Error("the missing static root was not logged")
	}
}

func TestContextCancelClosesServerStdin(t *testing.T) {
	// Peers that do nothing: Run still ends on cancel, and the server's stdin is closed.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runAgain(ctx, t) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

// runAgain runs a second bridge on fresh pipes that nobody serves and returns Run's result.
func runAgain(ctx context.Context, t *testing.T) error {
	cinR, _ := io.Pipe()
	_, coutW := io.Pipe()
	sinR, sinW := io.Pipe()
	soutR, _ := io.Pipe()
	b, err := New(Options{ClientIn: cinR, ClientOut: coutW, ServerIn: sinW, ServerOut: soutR, Installer: newTestView(nil)})
	if err != nil {
		return err
	}
	err = b.Run(ctx)
	if _, rerr := sinR.Read(make([]byte, 1)); rerr != io.EOF {
		t.Errorf("server stdin not closed: %v", rerr)
	}
	return err
}

func TestModernRequestRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(true, true)
	h.clientSend(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	expect(t, h.clientRecv(), `{"jsonrpc":"2.0","id":2,"error":{"code":-32022,"message":"unsupported protocol version: rootfs speaks the initialize-based versions","data":{"supported":["2025-11-25","2025-06-18","2025-03-26","2024-11-05"],"requested":"2026-07-28"}}}`)
	// A legacy request with other _meta passes.
	m := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`
	h.clientSend(m)
	expect(t, h.serverRecv(), m)
}

func TestMalformedRootsResultsKeepView(t *testing.T) {
	dirs := mkdirs(t, "a")
	for _, tt := range []struct{ name, result string }{
		{"roots is a string", `{"roots":"x"}`},
		{"roots null", `{"roots":null}`},
		{"roots missing", `{}`},
		{"result not an object", `[]`},
		{"internal error", ``},
	} {
		t.Run(tt.name, func(t *testing.T) {
			view := newTestView(build([]rootset.Root{{URI: dirs[0]}}))
			h := newHarness(t, func(o *Options) { o.Installer = view })
			h.startRaw(true, true)
			id := h.handshake(`{"roots":{}}`)
			if tt.result == "" {
				h.clientSend(`{"jsonrpc":"2.0","id":"` + id + `","error":{"code":-32603,"message":"boom"}}`)
			} else {
				h.clientSend(`{"jsonrpc":"2.0","id":"` + id + `","result":` + tt.result + `}`)
			}
			h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
			expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///a"}]}}`)
			if view.swaps.Load() != 0 {
				t.Error("view swapped")
			}
		})
	}
}

func TestDuplicateResultKeysRefused(t *testing.T) {
	// G4: a reply whose meaning depends on the parser is refused, not acted on.
	h := newHarness(t, func(o *Options) { o.RootsTimeout = 200 * time.Millisecond })
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{}}`)
	h.clientSend(`{"jsonrpc":"2.0","id":"` + id + `","result":{"roots":[]},"result":{"roots":[{"uri":"file:///"}]}}`)
	if got := h.clientRecv(); !strings.Contains(got, `"code":-32600`) {
		t.Fatalf("got %s", got)
	}
	h.sync("s")
	if h.view.swaps.Load() != 0 {
		t.Error("view swapped")
	}
}

func TestRequestsWaitForFirstRoots(t *testing.T) {
	// A client that calls a tool right after initialized must not race the roots/list round
	// trip: the call reaches the server only once the client's roots are in the view.
	dirs := mkdirs(t, "proj")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read","arguments":{"path":"/proj/x"}}}`
	h.clientSend(call)
	// A response to a server request is not held: the server may be waiting for it.
	h.serverSend(`{"jsonrpc":"2.0","id":"s1","method":"ping"}`)
	expect(t, h.clientRecv(), `{"jsonrpc":"2.0","id":"s1","method":"ping"}`)
	h.clientSend(`{"jsonrpc":"2.0","id":"s1","result":{}}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":"s1","result":{}}`)
	if n := len(entryNames(h.view.Table())); n != 0 {
		t.Fatalf("view has %d entries before the client answered", n)
	}
	h.clientSend(rootsReply(id, dirs[0]))
	expect(t, h.serverRecv(), call)
	if got := fmt.Sprint(entryNames(h.view.Table())); got != "[proj]" {
		t.Fatalf("when the call reached the server the view held %s, want [proj]", got)
	}
}

func TestUnsafeIntegerIDRefused(t *testing.T) {
	// An id a float64 peer cannot hold would come back altered and never match its request:
	// refused up front with a reason, the session goes on.
	h := newHarness(t, nil)
	h.startRaw(true, true)
	h.handshake(`{}`)
	h.clientSend(`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`)
	got := h.clientRecv()
	if !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, "2^53") {
		t.Fatalf("got %s", got)
	}
	h.sync("after")
}

func TestEmptyClientRootsUseStatic(t *testing.T) {
	// A client that declares roots and answers with none (Claude Desktop) gets the static
	// roots, which are for exactly the case where the client has none.
	dirs := mkdirs(t, "static")
	h := newHarness(t, func(o *Options) { o.Static = []rootset.Root{{URI: dirs[0]}} })
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	h.clientSend(`{"jsonrpc":"2.0","id":"` + id + `","result":{"roots":[]}}`)
	h.sync("s")
	if got := fmt.Sprint(entryNames(h.view.Table())); got != "[static]" {
		t.Fatalf("entries %s, want [static]", got)
	}
}
