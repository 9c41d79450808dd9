package mcpbridge

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// wantError fails unless line is an error reply with id and code (id "" for null).
func wantError(t *testing.T, line, id string, code int) {
	t.Helper()
	m := decode(t, line)
	e, _ := m["error"].(map[string]any)
	if e == nil || e["code"] != float64(code) {
		t.Fatalf("want an error %d, got %s", code, line)
	}
	gotID, _ := json.Marshal(m["id"])
	wantID := id
	if id == "" {
		wantID = "null"
	}
	if string(gotID) != wantID {
		t.Fatalf("error for id %s, want %s: %s", gotID, wantID, line)
	}
}

func ping(id string) string { return `{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}` }

// TestWaitersBounded: before the first roots, the server's roots/list past maxWaiters is refused
// at once with -32000 (the flood test shows what it costs without); those within the bound are
// answered once the roots are known, and the server is served afterwards.
func TestWaitersBounded(t *testing.T) {
	setLimit(t, &maxWaiters, 2)
	dirs := mkdirs(t, "proj")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	h.clientSend(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	h.serverRecv()
	for i := 1; i <= 2; i++ {
		h.serverSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"roots/list"}`, i))
	}
	h.serverSend(`{"jsonrpc":"2.0","id":3,"method":"roots/list"}`)
	wantError(t, h.serverRecv(), "3", codeLimit)
	// Re-sending a waiting id replaces it; it does not count twice.
	h.serverSend(`{"jsonrpc":"2.0","id":2,"method":"roots/list"}`)
	h.serverSend(`{"jsonrpc":"2.0","id":"x","method":"roots/list"}`)
	wantError(t, h.serverRecv(), `"x"`, codeLimit)

	h.serverSend(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`)
	h.clientRecv()
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	h.serverRecv()
	id := decode(t, h.clientRecv())["id"].(string)
	h.clientSend(rootsReply(id, dirs[0]))
	got := []string{h.serverRecv(), h.serverRecv()}
	for _, l := range got {
		if !strings.Contains(l, `"result":{"roots":[{"uri":"file:///proj"`) {
			t.Fatalf("waiter not answered with the roots: %s", l)
		}
	}
	h.serverSend(`{"jsonrpc":"2.0","id":4,"method":"roots/list"}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":4,"result":{"roots":[{"uri":"file:///proj"}]}}`)
	if n := h.logs.FilterMessage("refused a server roots/list: too many waiting for the first roots").Len(); n != 2 {
		t.Errorf("%d log lines for 2 refusals, want 2 (1st and 2nd)", n)
	}
}

// TestPendingBounded: the client's requests in flight past maxPending are refused with -32000;
// once one is answered the next goes through.
func TestPendingBounded(t *testing.T) {
	setLimit(t, &maxPending, 2)
	h := newHarness(t, nil)
	h.startRaw(true, true)
	h.clientSend(ping("1"))
	expect(t, h.serverRecv(), ping("1"))
	h.clientSend(ping(`"two"`))
	expect(t, h.serverRecv(), ping(`"two"`))
	h.clientSend(ping("3"))
	wantError(t, h.clientRecv(), "3", codeLimit)
	// A request in a batch is refused alone; the batch's other messages go on.
	h.clientSend(`[` + ping("4") + `,{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]`)
	wantError(t, strings.Trim(h.clientRecv(), "[]"), "4", codeLimit)
	expect(t, h.serverRecv(), `[{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]`)
	// The same id again is not a new entry.
	h.clientSend(ping("1"))
	expect(t, h.serverRecv(), ping("1"))

	h.serverSend(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	expect(t, h.clientRecv(), `{"jsonrpc":"2.0","id":1,"result":{}}`)
	h.clientSend(ping("5"))
	expect(t, h.serverRecv(), ping("5"))
	// A cancel frees the slot too.
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"two"}}`)
	h.serverRecv()
	h.clientSend(ping("6"))
	expect(t, h.serverRecv(), ping("6"))
}

// TestLongIDsRefused: an id rootfs would keep is at most maxIDLen bytes, either way.
func TestLongIDsRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(true, true)
	long := `"` + strings.Repeat("i", maxIDLen) + `"` // 2 bytes over
	h.clientSend(ping(long))
	wantError(t, h.clientRecv(), long, codeInvalidRequest)
	h.serverSend(`{"jsonrpc":"2.0","id":` + long + `,"method":"roots/list"}`)
	wantError(t, h.serverRecv(), long, codeInvalidRequest)
	ok := `"` + strings.Repeat("i", maxIDLen-2) + `"`
	h.clientSend(ping(ok))
	expect(t, h.serverRecv(), ping(ok))
	h.sync("after")
}

// TestHeldBounded: while the first roots are fetched, client messages past maxHeld (or past
// MaxLine bytes in all) are refused (requests, -32000) or dropped (notifications), and what was
// held reaches the server once the roots are known, then traffic flows.
func TestHeldBounded(t *testing.T) {
	setLimit(t, &maxHeld, 2)
	dirs := mkdirs(t, "proj")
	h := newHarness(t, func(o *Options) { o.MaxLine = 400 })
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{}}`)
	h.clientSend(ping("10"))
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`)
	h.clientSend(ping("12"))
	wantError(t, h.clientRecv(), "12", codeLimit)
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`) // dropped
	h.clientSend(rootsReply(id, dirs[0]))
	expect(t, h.serverRecv(), ping("10"))
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`)
	h.clientSend(ping("13"))
	expect(t, h.serverRecv(), ping("13"))
	if n := h.logs.FilterMessage("dropped a client notification: too many messages held for the roots").Len(); n != 1 {
		t.Errorf("%d drop logs, want 1", n)
	}
}

func TestHeldBytesBounded(t *testing.T) {
	dirs := mkdirs(t, "proj")
	h := newHarness(t, func(o *Options) { o.MaxLine = 400 })
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{}}`)
	pad := strings.Repeat("p", 250)
	a := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"pad":"` + pad + `"}}`
	b := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"pad":"` + pad + `"}}`
	h.clientSend(a)
	h.clientSend(b) // 2 × ~300 bytes > MaxLine 400
	wantError(t, h.clientRecv(), "2", codeLimit)
	h.clientSend(rootsReply(id, dirs[0]))
	expect(t, h.serverRecv(), a)
	h.clientSend(b)
	expect(t, h.serverRecv(), b)
}

// TestBatchBounded: a batch of more than maxBatch elements is refused whole (-32600, id null)
// from the client and dropped from the server; smaller ones pass.
func TestBatchBounded(t *testing.T) {
	setLimit(t, &maxBatch, 2)
	h := newHarness(t, nil)
	h.startRaw(true, true)
	three := `[` + ping("1") + `,` + ping("2") + `,` + ping("3") + `]`
	h.clientSend(three)
	wantError(t, h.clientRecv(), "", codeInvalidRequest)
	two := `[` + ping("1") + `,` + ping("2") + `]`
	h.clientSend(two)
	expect(t, h.serverRecv(), two)
	h.serverSend(`[` + ping(`"s1"`) + `,` + ping(`"s2"`) + `,` + ping(`"s3"`) + `]`)
	h.serverSend(`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]`)
	expect(t, h.clientRecv(), `[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]`)
	if h.logs.FilterMessage("dropped a batch over the limit from the server").Len() != 1 {
		t.Error("no log for the server's batch")
	}
}

// TestRootsCountBounded: a roots/list result with more than maxRoots roots is refused whole (the
// view is kept); the next fetch is served.
func TestRootsCountBounded(t *testing.T) {
	setLimit(t, &maxRoots, 1)
	dirs := mkdirs(t, "a", "b")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	h.clientSend(rootsReply(id, dirs[0], dirs[1]))
	h.sync("s1")
	if h.view.swaps.Load() != 0 {
		t.Fatal("view swapped with too many roots")
	}
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	id = decode(t, h.clientRecv())["id"].(string)
	h.clientSend(rootsReply(id, dirs[1]))
	h.sync("s2")
	if got := fmt.Sprint(entryNames(h.view.Table())); got != "[b]" {
		t.Fatalf("entries %s, want [b]", got)
	}
}

// TestTooManyRootsStderrLine: a first answer with more than 1024 roots is refused whole and
// leaves the server with none; stderr, encoded as the CLI encodes it, says so in one line that
// names the bound.
func TestTooManyRootsStderrLine(t *testing.T) {
	if maxRoots != 1024 {
		t.Fatalf("maxRoots is %d; the README promises 1024", maxRoots)
	}
	var stderr syncBuffer
	enc := zap.NewDevelopmentEncoderConfig() // as cmd/rootfs/cli's newLogger
	enc.TimeKey, enc.EncodeCaller, enc.ConsoleSeparator = "", nil, " "
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(&stderr), zapcore.InfoLevel))
	h := newHarness(t, func(o *Options) { o.Logger = log })
	h.startRaw(true, true)
	id := h.handshake(`{"roots":{"listChanged":true}}`)
	uris := make([]string, maxRoots+1)
	for i := range uris {
		uris[i] = fmt.Sprintf("/nonexistent/r%d", i)
	}
	h.clientSend(rootsReply(id, uris...))
	h.sync("s1")
	if n := len(h.view.Table().Entries()); n != 0 || h.view.swaps.Load() != 0 {
		t.Fatalf("%d entries, %d swaps after a refused answer, want none", n, h.view.swaps.Load())
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if strings.Contains(l, "roots/list answer") || strings.Contains(l, "roots/list result") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("want one line about the answer on stderr, got %q\nstderr:\n%s", lines, stderr.String())
	}
	for _, want := range []string{"WARN", "refused the client's roots/list answer whole", "1024", `"max_roots": 1024`, `"roots_kept": 0`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the line lacks %q: %s", want, lines[0])
		}
	}
}

// TestOwnQueueBounded: messages rootfs makes for a peer that does not read are bounded in bytes
// and count; past that they are dropped, and once the peer reads again new ones go through.
func TestOwnQueueBounded(t *testing.T) {
	setLimit(t, &ownBytesLimit, 1000)
	unstuck := make(chan struct{})
	q := newPeerWriter(gateWriter{open: unstuck}, nil)
	msg := []byte(strings.Repeat("x", 99) + "\n")
	sent := 0
	for range 100 {
		if err := q.send(msg); err != nil {
			if err != errOwnFull {
				t.Fatal(err)
			}
			break
		}
		sent++
	}
	// One may be in the stuck Write already; the rest fill the byte budget.
	if sent > 11 {
		t.Fatalf("%d messages of 100 bytes queued under a 1000-byte limit", sent)
	}
	close(unstuck)
	deadline := time.Now().Add(hang)
	for q.send(msg) != nil {
		if time.Now().After(deadline) {
			t.Fatal("queue never drained")
		}
		time.Sleep(time.Millisecond)
	}
}

// gateWriter blocks writes until open is closed, then discards them.
type gateWriter struct {
	open chan struct{}
}

func (g gateWriter) Write(p []byte) (int, error) {
	<-g.open
	return len(p), nil
}
