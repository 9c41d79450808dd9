package mcpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rootfs-dev/rootfs/rootset"
)

// testView is a RootInstaller holding its table in an atomic pointer, as vfs.View does, minus FUSE.
// Install builds with build (rootset.BuildTable with no rules) unless noIO is set.
type testView struct {
	cur   atomic.Pointer[rootset.Table]
	swaps atomic.Int32
	noIO  bool // Install builds an empty table: no I/O on fuzzed URIs
}

// newEmptyTestView is a testView whose Install always installs an empty table.
func newEmptyTestView() *testView {
	v := newTestView(nil)
	v.noIO = true
	return v
}

func newTestView(initial *rootset.Table) *testView {
	v := &testView{}
	if initial == nil {
		initial = rootset.EmptyTable()
	}
	v.cur.Store(initial)
	return v
}

func (v *testView) Table() *rootset.Table { return v.cur.Load() }

func (v *testView) Install(r []rootset.Root) (*rootset.Table, error) {
	t := rootset.EmptyTable()
	if !v.noIO {
		t = build(r)
	}
	old := v.cur.Swap(t)
	v.swaps.Add(1)
	return t, old.Close()
}

func build(r []rootset.Root) *rootset.Table { return rootset.BuildTable(r, rootset.TableOptions{}) }

// mkdirs makes directories under a temp dir and returns their paths.
func mkdirs(t *testing.T, names ...string) []string {
	t.Helper()
	base := t.TempDir()
	var out []string
	for _, n := range names {
		p := filepath.Join(base, n)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// harness runs a Bridge between pipe pairs. The test plays client and/or server, either raw
// (send/recv lines) or through go-sdk transports on the exposed pipe ends.
type harness struct {
	t    *testing.T
	b    *Bridge
	view *testView
	logs *observer.ObservedLogs

	// client side: the test writes cliW (bridge's ClientIn), reads cliR (bridge's ClientOut)
	cliW *io.PipeWriter
	cliR *io.PipeReader
	// server side: the test reads srvR (bridge's ServerIn), writes srvW (bridge's ServerOut)
	srvR *io.PipeReader
	srvW *io.PipeWriter

	cliLines, srvLines chan string // filled by startRaw readers
	srvSkipped         []string    // server lines sync passed over
	// manualPings: the test answers rootfs's pings to the server itself; otherwise the raw
	// server's reader answers them at once and the test never sees them.
	manualPings bool
	done        chan error
	ended       time.Time
}

func newHarness(t *testing.T, mod func(*Options)) *harness {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))
	h := &harness{t: t, logs: logs, view: newTestView(nil), done: make(chan error, 1)}
	cinR, cinW := io.Pipe()
	coutR, coutW := io.Pipe()
	sinR, sinW := io.Pipe()
	soutR, soutW := io.Pipe()
	h.cliW, h.cliR, h.srvR, h.srvW = cinW, coutR, sinR, soutW
	opts := Options{
		ClientIn: cinR, ClientOut: coutW, ServerIn: sinW, ServerOut: soutR,
		Installer: h.view, Logger: log,
	}
	if mod != nil {
		mod(&opts)
	}
	if v, ok := opts.Installer.(*testView); ok {
		h.view = v
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.b = b
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		err := b.Run(ctx)
		h.ended = time.Now()
		h.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		cinW.Close()
		coutR.Close()
		sinR.Close()
		soutW.Close()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("bridge did not stop")
		}
	})
	return h
}

// startRaw starts line readers on the client and server ends (for raw tests).
func (h *harness) startRaw(client, server bool) {
	read := func(r io.Reader, ch chan string) {
		s := bufio.NewScanner(r)
		s.Buffer(nil, 64<<20)
		for s.Scan() {
			ch <- s.Text()
		}
		close(ch)
	}
	if client {
		h.cliLines = make(chan string, 4096)
		go read(h.cliR, h.cliLines)
	}
	if server {
		h.srvLines = make(chan string, 4096)
		if h.manualPings {
			go read(h.srvR, h.srvLines)
			return
		}
		pings := make(chan string, 4096)
		go read(h.srvR, pings)
		go func() {
			defer close(h.srvLines)
			for l := range pings {
				if id, ok := h.rootfsPing(l); ok {
					_, _ = io.WriteString(h.srvW, `{"jsonrpc":"2.0","id":"`+id+`","result":{}}`+"\n")
					continue
				}
				h.srvLines <- l
			}
		}()
	}
}

// rootfsPing reports whether line is rootfs's ping to the server, and its id.
func (h *harness) rootfsPing(line string) (string, bool) {
	var m struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	if json.Unmarshal([]byte(line), &m) != nil || m.Method != "ping" {
		return "", false
	}
	id, ok := m.ID.(string)
	return id, ok && strings.HasPrefix(id, h.b.srvPrefix)
}

const hang = 10 * time.Second // guard against a hung test, not a timing assertion

func (h *harness) clientSend(s string) {
	h.t.Helper()
	if _, err := io.WriteString(h.cliW, s+"\n"); err != nil {
		h.t.Fatalf("client write: %v", err)
	}
}

func (h *harness) serverSend(s string) {
	h.t.Helper()
	if _, err := io.WriteString(h.srvW, s+"\n"); err != nil {
		h.t.Fatalf("server write: %v", err)
	}
}

func recvLine(t *testing.T, ch chan string, who string) string {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatalf("%s: stream closed", who)
		}
		return l
	case <-time.After(hang):
		t.Fatalf("%s: nothing received", who)
	}
	return ""
}

func (h *harness) clientRecv() string { h.t.Helper(); return recvLine(h.t, h.cliLines, "client") }
func (h *harness) serverRecv() string { h.t.Helper(); return recvLine(h.t, h.srvLines, "server") }

// expect fails unless got == want.
func expect(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// decode parses a line into a generic map.
func decode(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("not json: %q: %v", line, err)
	}
	return m
}

// handshake runs initialize / initialized with the raw client and raw server. caps is the
// client's capabilities JSON. It returns the id of rootfs's roots/list request when the client
// declared roots ("" otherwise).
func (h *harness) handshake(caps string) string {
	h.t.Helper()
	h.clientSend(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"clientInfo":{"name":"raw","version":"1"}}}`)
	h.serverRecv()
	h.serverSend(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`)
	h.clientRecv()
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	expect(h.t, h.serverRecv(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if !strings.Contains(caps, `"roots"`) {
		return ""
	}
	m := decode(h.t, h.clientRecv())
	if m["method"] != "roots/list" {
		h.t.Fatalf("want roots/list, got %v", m)
	}
	return m["id"].(string)
}

func rootsReply(id string, uris ...string) string {
	var rs []string
	for _, u := range uris {
		rs = append(rs, `{"uri":"file://`+u+`"}`)
	}
	return `{"jsonrpc":"2.0","id":"` + id + `","result":{"roots":[` + strings.Join(rs, ",") + `]}}`
}

// sync makes a ping round trip client→server→client, so that everything the bridge read from
// the client before it has been handled.
func (h *harness) sync(id string) (skipped []string) {
	h.t.Helper()
	ping := `{"jsonrpc":"2.0","id":"` + id + `","method":"ping"}`
	h.clientSend(ping)
	for {
		l := h.serverRecv()
		if l == ping {
			break
		}
		h.srvSkipped = append(h.srvSkipped, l)
	}
	h.serverSend(`{"jsonrpc":"2.0","id":"` + id + `","result":{}}`)
	for {
		l := h.clientRecv()
		if l == `{"jsonrpc":"2.0","id":"`+id+`","result":{}}` {
			return skipped
		}
		skipped = append(skipped, l)
	}
}

// syncServer makes a ping round trip server→client→server, so that everything the bridge read
// from the server before it has been handled (client messages held for the roots do not delay
// it: the client's answer to a server request is never held). It returns the client lines it
// passed over; the server lines go to srvSkipped.
func (h *harness) syncServer(id string) (skipped []string) {
	h.t.Helper()
	ping := `{"jsonrpc":"2.0","id":"` + id + `","method":"ping"}`
	h.serverSend(ping)
	for {
		l := h.clientRecv()
		if l == ping {
			break
		}
		skipped = append(skipped, l)
	}
	reply := `{"jsonrpc":"2.0","id":"` + id + `","result":{}}`
	h.clientSend(reply)
	for {
		l := h.serverRecv()
		if l == reply {
			return skipped
		}
		h.srvSkipped = append(h.srvSkipped, l)
	}
}

func (h *harness) wait() error {
	h.t.Helper()
	select {
	case err := <-h.done:
		h.done <- err // for Cleanup
		return err
	case <-time.After(hang):
		h.t.Fatal("Run did not return")
	}
	return nil
}

func entryNames(t *rootset.Table) []string {
	var n []string
	for _, e := range t.Entries() {
		n = append(n, e.Name)
	}
	return n
}
