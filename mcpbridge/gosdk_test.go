package mcpbridge

//lint:file-ignore SA1019 go-sdk deprecates roots (SEP-2577), but rootfs exists to enforce them and every real client still sends them until at least 2027-07-28

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rootfs-dev/rootfs/rootset"
)

// goPair is a real go-sdk client and server talking through the bridge.
type goPair struct {
	h       *harness
	client  *mcp.Client
	cs      *mcp.ClientSession
	ss      *mcp.ServerSession
	changed chan struct{} // RootsListChangedHandler calls on the server
}

func startGoPair(t *testing.T, copts *mcp.ClientOptions, sopts *ClientSessionOpts, mod func(*Options), roots ...*mcp.Root) *goPair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	t.Cleanup(cancel)
	p := &goPair{h: newHarness(t, mod), changed: make(chan struct{}, 16)}
	inited := make(chan *mcp.ServerSession, 1)
	server := mcp.NewServer(&mcp.Implementation{Name: "go-server", Version: "v0"}, &mcp.ServerOptions{
		InitializedHandler:      func(_ context.Context, r *mcp.InitializedRequest) { inited <- r.Session },
		RootsListChangedHandler: func(context.Context, *mcp.RootsListChangedRequest) { p.changed <- struct{}{} },
	})
	ss, err := server.Connect(ctx, &mcp.IOTransport{Reader: p.h.srvR, Writer: p.h.srvW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	p.client = mcp.NewClient(&mcp.Implementation{Name: "go-client", Version: "v0"}, copts)
	p.client.AddRoots(roots...)
	var so *mcp.ClientSessionOptions
	if sopts != nil {
		so = &mcp.ClientSessionOptions{ProtocolVersion: sopts.ProtocolVersion}
	}
	cs, err := p.client.Connect(ctx, &mcp.IOTransport{Reader: p.h.cliR, Writer: p.h.cliW}, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	p.cs = cs
	select {
	case p.ss = <-inited:
	case <-ctx.Done():
		t.Fatal("server never initialized")
	}
	return p
}

type ClientSessionOpts struct{ ProtocolVersion string }

func (p *goPair) listRoots(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	res, err := p.ss.ListRoots(ctx, nil)
	if err != nil {
		t.Fatalf("ListRoots: %v", err)
	}
	var out []string
	for _, r := range res.Roots {
		out = append(out, fmt.Sprintf("%s|%s|%v", r.URI, r.Name, r.Meta))
	}
	sort.Strings(out)
	return out
}

func TestGoSDKRootsTranslatedAfterProbe(t *testing.T) {
	dirs := mkdirs(t, "alpha", "beta", "gamma")
	// Default client options: the v1.8.0 client probes server/discover first.
	p := startGoPair(t, nil, nil, nil,
		&mcp.Root{URI: "file://" + dirs[0], Name: "Alpha", Meta: mcp.Meta{"k": "v"}},
		&mcp.Root{URI: "file://" + dirs[1]})
	if v := p.cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("negotiated %q, want the legacy 2025-11-25 after the probe", v)
	}
	if !p.ss.InitializeParams().Capabilities.Roots.ListChanged {
		t.Error("the server was not told roots.listChanged")
	}
	got := p.listRoots(t)
	want := []string{"file:///alpha|Alpha|map[k:v]", "file:///beta||map[]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("server saw %v, want %v", got, want)
	}

	// list_changed: fetched, swapped, then announced to the server.
	p.client.AddRoots(&mcp.Root{URI: "file://" + dirs[2], Name: "G"})
	select {
	case <-p.changed:
	case <-time.After(hang):
		t.Fatal("the server never got roots list_changed")
	}
	if names := entryNames(p.h.view.Table()); fmt.Sprint(names) != "[alpha beta gamma]" {
		t.Errorf("view entries %v", names)
	}
	got = p.listRoots(t)
	if len(got) != 3 || got[2] != "file:///gamma|G|map[]" {
		t.Errorf("after list_changed the server saw %v", got)
	}
	for _, r := range got {
		if strings.Contains(r, filepath.Dir(dirs[0])) {
			t.Errorf("host path leaked to the server: %s", r)
		}
	}
	if p.h.view.swaps.Load() != 2 {
		t.Errorf("%d swaps, want 2", p.h.view.swaps.Load())
	}
}

func TestGoSDKStaticFallbackWithoutRootsCapability(t *testing.T) {
	dirs := mkdirs(t, "static")
	p := startGoPair(t, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}, nil,
		func(o *Options) { o.Static = []rootset.Root{{URI: dirs[0], Name: "S"}} })
	if got := p.listRoots(t); fmt.Sprint(got) != "[file:///static|S|map[]]" {
		t.Errorf("server saw %v", got)
	}
	if !p.ss.InitializeParams().Capabilities.Roots.ListChanged {
		t.Error("roots capability not injected for the server")
	}
}

func TestGoSDKLegacyPinnedClient(t *testing.T) {
	dirs := mkdirs(t, "a")
	p := startGoPair(t, nil, &ClientSessionOpts{ProtocolVersion: "2025-06-18"}, nil, &mcp.Root{URI: "file://" + dirs[0]})
	if got := p.listRoots(t); fmt.Sprint(got) != "[file:///a||map[]]" {
		t.Errorf("server saw %v", got)
	}
	// Ordinary traffic both ways passes through.
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if err := p.cs.Ping(ctx, nil); err != nil {
		t.Errorf("client ping: %v", err)
	}
	if err := p.ss.Ping(ctx, nil); err != nil {
		t.Errorf("server ping: %v", err)
	}
}

func TestGoSDKClientCloseEndsBridge(t *testing.T) {
	dirs := mkdirs(t, "a")
	p := startGoPair(t, nil, nil, nil, &mcp.Root{URI: "file://" + dirs[0]})
	start := time.Now()
	p.cs.Close()
	err := p.h.wait()
	if !errors.Is(err, ErrClientClosed) {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("go-sdk client Close: Run returned after %v", p.h.ended.Sub(start))
	// The server saw its stdin close, so its session ends.
	if err := p.ss.Wait(); err != nil {
		t.Logf("server session ended: %v", err)
	}
}

func TestGoSDKServerExitFailsPendingCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	h := newHarness(t, nil)
	server := mcp.NewServer(&mcp.Implementation{Name: "go-server", Version: "v0"}, nil)
	entered := make(chan struct{})
	mcp.AddTool(server, &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		close(entered)
		<-ctx.Done()
		return nil, struct{}{}, ctx.Err()
	})
	ss, err := server.Connect(ctx, &mcp.IOTransport{Reader: h.srvR, Writer: h.srvW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"}, nil).Connect(ctx, &mcp.IOTransport{Reader: h.cliR, Writer: h.cliW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	callErr := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang"})
		callErr <- err
	}()
	<-entered
	start := time.Now()
	// The server process dies with the call pending: its stdout and stdin close. (ss.Close
	// would wait for the handler.)
	h.srvW.Close()
	h.srvR.Close()
	defer ss.Close()
	select {
	case err := <-callErr:
		if err == nil {
			t.Fatal("pending call succeeded")
		}
		t.Logf("pending call failed after %v: %v", time.Since(start), err)
	case <-ctx.Done():
		t.Fatal("pending call never answered")
	}
	if err := h.wait(); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("server exit: Run returned after %v", h.ended.Sub(start))
}

func TestGoSDKClientAnswersServerIDsLikeRootfs(t *testing.T) {
	h := newHarness(t, nil)
	h.startRaw(false, true)
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	dirs := mkdirs(t, "a")
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"}, nil)
	client.AddRoots(&mcp.Root{URI: "file://" + dirs[0]})
	connected := make(chan error, 1)
	go func() {
		cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: h.cliR, Writer: h.cliW}, nil)
		if err == nil {
			t.Cleanup(func() { cs.Close() })
		}
		connected <- err
	}()
	m := decode(t, h.serverRecv())
	if m["method"] != "initialize" {
		t.Fatalf("first message to the server: %v (the probe must not reach it)", m)
	}
	h.serverSend(`{"jsonrpc":"2.0","id":` + fmt.Sprint(m["id"]) + `,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`)
	if err := <-connected; err != nil {
		t.Fatal(err)
	}
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	// The server uses rootfs-looking string ids; the real client answers them through the bridge.
	h.serverSend(`{"jsonrpc":"2.0","id":"rootfs-1","method":"ping"}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":"rootfs-1","result":{}}`)
	h.serverSend(`{"jsonrpc":"2.0","id":"rootfs-2","method":"roots/list"}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":"rootfs-2","result":{"roots":[{"uri":"file:///a"}]}}`)
}
