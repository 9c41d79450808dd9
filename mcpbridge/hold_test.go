package mcpbridge

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/testutil"
	"github.com/rootfs-dev/rootfs/rootset"
)

// The hold: the client's messages for the server wait until the server has been given the roots
// (see rootsState). Each test plays a raw client and a raw server that answers rootfs's pings
// itself (manualPings), and has a negative control with the hold off (control.NoRootsHold, run
// in a control build of the test binary), where the same sequence lets the client's call
// overtake the roots.

const callLine = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_allowed_directories","arguments":{}}}`

// holdHarness is a raw harness whose test answers rootfs's pings.
func holdHarness(t *testing.T, mod func(*Options)) *harness {
	t.Helper()
	h := newHarness(t, mod)
	h.manualPings = true
	h.startRaw(true, true)
	return h
}

// pingID returns the id of rootfs's ping to the server in line, or fails.
func (h *harness) pingID(line string) string {
	h.t.Helper()
	id, ok := h.rootfsPing(line)
	if !ok {
		h.t.Fatalf("want rootfs's ping, got %s", line)
	}
	return id
}

// rootsAnswer is rootfs's answer to the server's roots/list id with the one root dir (the
// test view lays roots out flat).
func rootsAnswer(id, dir string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"roots":[{"uri":"file:///` + filepath.Base(dir) + `"}]}}`
}

func (h *harness) pong(id string) { h.serverSend(`{"jsonrpc":"2.0","id":"` + id + `","result":{}}`) }

// serverQuiet fails if the server receives anything within d (the hold is on).
func (h *harness) serverQuiet(d time.Duration, why string) {
	h.t.Helper()
	select {
	case l := <-h.srvLines:
		h.t.Fatalf("%s: the server got %s", why, l)
	case <-time.After(d):
	}
}

// TestFirstCallAfterServerRoots is server-filesystem's first-call sequence at the wire: the
// server asks roots/list on initialized, the client calls a tool at once. The call reaches the
// server after the server's roots/list answer (with the client's root) and after the server
// answered the ping that follows it, never before. Before, the held call was released before the
// server's waiting roots/list was answered, and the server answered the call with no roots.
func TestFirstCallAfterServerRoots(t *testing.T) {
	for _, hold := range []bool{true, false} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			if !hold && testutil.Control(t, control.NoRootsHold) {
				return // run in a control build
			}
			dirs := mkdirs(t, "proj")
			h := holdHarness(t, nil)
			id := h.handshake(`{"roots":{"listChanged":true}}`)
			// The server asks on initialized; its roots/list waits for the client's roots.
			h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
			h.syncServer("s")
			h.clientSend(callLine)
			h.clientSend(rootsReply(id, dirs[0]))
			answer := rootsAnswer("1", dirs[0])
			if !hold { // the negative control: the call overtakes the server's roots
				expect(t, h.serverRecv(), callLine)
				expect(t, h.serverRecv(), answer)
				return
			}
			expect(t, h.serverRecv(), answer)
			p := h.pingID(h.serverRecv())
			h.serverQuiet(50*time.Millisecond, "before the server answered the ping")
			h.pong(p)
			expect(t, h.serverRecv(), callLine)
		})
	}
}

// TestFirstCallAfterStaticRoots: a client without roots gets the static roots (here with a
// pinned one, as run installs from the server's arguments); its first call still waits until the
// server's roots/list, which asked before initialized was handled, has been answered with them.
func TestFirstCallAfterStaticRoots(t *testing.T) {
	dirs := mkdirs(t, "static", "pinned")
	h := holdHarness(t, func(o *Options) {
		o.Static, o.Pinned = []rootset.Root{{URI: dirs[0]}}, []rootset.Root{{URI: dirs[1]}}
	})
	h.clientSend(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	h.serverRecv()
	h.serverSend(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`)
	h.clientRecv()
	h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`) // early: it waits
	h.syncServer("s")
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	h.clientSend(callLine)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///static"},{"uri":"file:///pinned"}]}}`)
	p := h.pingID(h.serverRecv())
	h.serverQuiet(50*time.Millisecond, "before the server answered the ping")
	h.pong(p)
	expect(t, h.serverRecv(), callLine)
}

// TestServerAskingWhenToldIsWaitedFor: a server that asks roots/list only once it reads
// initialized, later than the client's roots arrive (a slow start), sends that roots/list before
// its pong; rootfs answers it, pings again, and releases the call after the second pong. Before,
// the call was released as soon as the view had the roots, before the server had asked.
func TestServerAskingWhenToldIsWaitedFor(t *testing.T) {
	dirs := mkdirs(t, "proj")
	h := holdHarness(t, nil)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	h.clientSend(callLine)
	h.clientSend(rootsReply(id, dirs[0]))
	p1 := h.pingID(h.serverRecv())
	h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`) // read initialized only now
	h.pong(p1)
	expect(t, h.serverRecv(), rootsAnswer("1", dirs[0]))
	p2 := h.pingID(h.serverRecv())
	if p2 == p1 {
		t.Fatal("the same ping twice")
	}
	h.serverQuiet(50*time.Millisecond, "before the second pong")
	h.pong(p2)
	expect(t, h.serverRecv(), callLine)
	// A server that answers a ping with an error has read what came before it as well.
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	m := decode(t, h.clientRecv())
	h.clientSend(rootsReply(m["id"].(string), dirs[0]))
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	p3 := h.pingID(h.serverRecv())
	h.clientSend(ping("6"))
	h.serverSend(`{"jsonrpc":"2.0","id":"` + p3 + `","error":{"code":-32601,"message":"Method not found"}}`)
	expect(t, h.serverRecv(), ping("6"))
}

// TestCallAfterListChangedSeesNewRoots: a tool called right after the client's list_changed
// waits for the fetch and the swap, the server's list_changed and its roots/list, and reaches
// the server after them; the view holds the new root by then. Before, the call overtook the
// change and the server answered it with the old roots.
func TestCallAfterListChangedSeesNewRoots(t *testing.T) {
	for _, hold := range []bool{true, false} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			if !hold && testutil.Control(t, control.NoRootsHold) {
				return // run in a control build
			}
			dirs := mkdirs(t, "old", "new")
			h := holdHarness(t, nil)
			id := h.handshake(`{"roots":{"listChanged":true}}`)
			h.clientSend(rootsReply(id, dirs[0]))
			if hold {
				h.pong(h.pingID(h.serverRecv()))
			}
			h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
			h.clientSend(callLine)
			fetch := decode(t, h.clientRecv())["id"].(string)
			if !hold { // the negative control: the call reaches the server before the change
				expect(t, h.serverRecv(), callLine)
				if got := fmt.Sprint(entryNames(h.view.Table())); got != "[old]" {
					t.Fatalf("the view held %s when the call reached the server, want [old]", got)
				}
				return
			}
			h.serverQuiet(50*time.Millisecond, "while the roots are fetched")
			h.clientSend(rootsReply(fetch, dirs[1]))
			expect(t, h.serverRecv(), `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
			p1 := h.pingID(h.serverRecv())
			h.serverSend(`{"jsonrpc":"2.0","id":2,"method":"roots/list"}`)
			h.pong(p1)
			expect(t, h.serverRecv(), rootsAnswer("2", dirs[1]))
			h.pong(h.pingID(h.serverRecv()))
			expect(t, h.serverRecv(), callLine)
			if got := fmt.Sprint(entryNames(h.view.Table())); got != "[new]" {
				t.Fatalf("the view held %s when the call reached the server, want [new]", got)
			}
		})
	}
}

// TestHoldEpochs: a message sent after a second list_changed waits for that change even when
// the first one's held messages are let go meanwhile (here, at the end of the settle), and order
// is kept throughout.
func TestHoldEpochs(t *testing.T) {
	const settle = 200 * time.Millisecond
	dirs := mkdirs(t, "a", "b", "c")
	h := holdHarness(t, func(o *Options) { o.RootsSettle = settle })
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	h.clientSend(rootsReply(id, dirs[0]))
	h.pong(h.pingID(h.serverRecv()))
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	f1 := decode(t, h.clientRecv())["id"].(string)
	h.clientSend(rootsReply(f1, dirs[1]))
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	p := h.pingID(h.serverRecv())
	h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	h.pong(p)
	h.serverRecv() // the answer
	h.pong(h.pingID(h.serverRecv()))
	h.syncServer("s") // the pong is handled: the first change is released, its settle runs
	// The call waits for the settle.
	h.clientSend(callLine)
	// The client changes its roots again: ping 2 belongs to the second change.
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	h.clientSend(ping("2"))
	f2 := decode(t, h.clientRecv())["id"].(string)
	expect(t, h.serverRecv(), callLine) // at the end of the settle
	h.serverQuiet(settle, "while the second change is fetched")
	h.clientSend(rootsReply(f2, dirs[2]))
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	h.pong(h.pingID(h.serverRecv()))
	expect(t, h.serverRecv(), ping("2"))
	h.clientSend(ping("3")) // the hold is over
	expect(t, h.serverRecv(), ping("3"))
}

// TestHoldReleasedOnTimeouts: a fetch the client never answers, and a ping the server never
// answers, each release the held messages after RootsTimeout.
func TestHoldReleasedOnTimeouts(t *testing.T) {
	t.Run("fetch", func(t *testing.T) {
		dirs := mkdirs(t, "a")
		h := holdHarness(t, func(o *Options) { o.RootsTimeout = 200 * time.Millisecond })
		id := h.handshake(`{"roots":{"listChanged":true}}`)
		h.clientSend(rootsReply(id, dirs[0]))
		h.pong(h.pingID(h.serverRecv()))
		start := time.Now() // before the fetch starts
		h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
		decode(t, h.clientRecv()) // never answered
		h.clientSend(callLine)
		h.pong(h.pingID(h.serverRecv()))
		expect(t, h.serverRecv(), callLine)
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Errorf("released after %v, before the fetch timed out", d)
		}
	})
	t.Run("ping", func(t *testing.T) {
		// A server that ignores ping costs the wait once: it is not pinged again.
		dirs := mkdirs(t, "a", "b")
		h := holdHarness(t, func(o *Options) { o.RootsTimeout = 200 * time.Millisecond })
		id := h.handshake(`{"roots":{"listChanged":true}}`)
		h.clientSend(callLine)
		h.clientSend(rootsReply(id, dirs[0]))
		h.pingID(h.serverRecv()) // never answered
		expect(t, h.serverRecv(), callLine)
		if h.logs.FilterMessageSnippet("did not answer rootfs's ping in time").Len() != 1 {
			t.Error("the timeout is not logged")
		}
		h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
		h.clientSend(ping("6"))
		f := decode(t, h.clientRecv())["id"].(string)
		h.serverQuiet(50*time.Millisecond, "while the roots are fetched")
		h.clientSend(rootsReply(f, dirs[1]))
		expect(t, h.serverRecv(), `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
		expect(t, h.serverRecv(), ping("6"))
	})
}

// TestHeldQueueFullRefuses: past maxHeld while a change is fetched, a request gets a JSON-RPC
// error saying why (never dropped in silence), and what was held goes through in order.
func TestHeldQueueFullRefuses(t *testing.T) {
	setLimit(t, &maxHeld, 2)
	dirs := mkdirs(t, "a", "b")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	h.clientSend(rootsReply(id, dirs[0]))
	h.sync("s")
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	h.clientSend(ping("1"))
	h.clientSend(ping("2"))
	h.clientSend(ping("3"))
	f := decode(t, h.clientRecv())["id"].(string)
	refusal := h.clientRecv()
	wantError(t, refusal, "3", codeLimit)
	if !strings.Contains(refusal, "holding 2 messages") {
		t.Errorf("the refusal does not say why: %s", refusal)
	}
	h.clientSend(rootsReply(f, dirs[1]))
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	expect(t, h.serverRecv(), ping("1"))
	expect(t, h.serverRecv(), ping("2"))
}

// TestSettle: when the server fetched roots in the cycle, requests that may depend on them wait
// RootsSettle after the release (server-filesystem takes a root in asynchronously); those that
// cannot (tools/list, ping) go at once unless one that waits is ahead of them. A server that did
// not fetch roots gets the call at once.
func TestSettle(t *testing.T) {
	const settle = 300 * time.Millisecond
	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	t.Run("server fetched roots", func(t *testing.T) {
		dirs := mkdirs(t, "proj")
		h := holdHarness(t, func(o *Options) { o.RootsSettle = settle })
		id := h.handshake(`{"roots":{"listChanged":true}}`)
		h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
		h.syncServer("s") // it waits
		h.clientSend(list)
		h.clientSend(callLine)
		h.clientSend(ping("8"))
		h.clientSend(rootsReply(id, dirs[0]))
		h.serverRecv() // the roots/list answer
		p := h.pingID(h.serverRecv())
		released := time.Now() // rootfs starts the settle once it has read the pong
		h.pong(p)
		expect(t, h.serverRecv(), list)
		h.clientSend(`{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"file:///x"}}`)
		expect(t, h.serverRecv(), callLine)
		if d := time.Since(released); d < settle {
			t.Errorf("the call came %v after the release, before the settle (%v)", d, settle)
		}
		expect(t, h.serverRecv(), ping("8")) // behind the call
		expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"file:///x"}}`)
		h.clientSend(ping("10")) // the settle is over
		expect(t, h.serverRecv(), ping("10"))
	})
	t.Run("a ping during the settle goes at once", func(t *testing.T) {
		setLimit(t, &maxHeld, 2)
		dirs := mkdirs(t, "proj")
		h := holdHarness(t, func(o *Options) { o.RootsSettle = time.Hour })
		id := h.handshake(`{"roots":{"listChanged":true}}`)
		h.serverSend(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
		h.syncServer("s") // it waits
		h.clientSend(rootsReply(id, dirs[0]))
		h.serverRecv()
		h.pong(h.pingID(h.serverRecv()))
		// Pings are not held behind nothing, nor counted toward maxHeld.
		for i := range 5 {
			h.sync(fmt.Sprint("s", i))
		}
		h.clientSend(callLine)
		h.serverQuiet(100*time.Millisecond, "during the settle")
	})
	t.Run("server did not fetch roots", func(t *testing.T) {
		dirs := mkdirs(t, "proj")
		h := holdHarness(t, func(o *Options) { o.RootsSettle = time.Hour })
		id := h.handshake(`{"roots":{"listChanged":true}}`)
		h.clientSend(callLine)
		h.clientSend(rootsReply(id, dirs[0]))
		h.pong(h.pingID(h.serverRecv()))
		expect(t, h.serverRecv(), callLine)
	})
}
