package mcpbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Close() error { return nil }

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fuzzBridge is a Bridge whose handlers are driven directly, with both outputs captured.
func fuzzBridge(t testing.TB) (*Bridge, *syncBuffer, *syncBuffer) {
	toClient, toServer := &syncBuffer{}, &syncBuffer{}
	b, err := New(Options{
		ClientIn: strings.NewReader(""), ClientOut: toClient,
		ServerIn: toServer, ServerOut: strings.NewReader(""),
		Installer:    newEmptyTestView(), // no I/O on fuzzed URIs
		RootsTimeout: time.Hour,
		Logger:       zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	b.toClient = newPeerWriter(toClient, nil)
	b.toServer = newPeerWriter(toServer, nil)
	return b, toClient, toServer
}

// FuzzRouter feeds lines to both sides of the router, through what the client and server loops
// run for each line they read (fromClient, fromServer). Each input line's first byte picks the side
// (even: from the client, odd: from the server); "PFX" is replaced by rootfs's id prefix so the
// fuzzer can aim at rootfs's own ids, and "SPFX" by the prefix of its pings to the server (so
// it can end the hold). Each input runs twice: on a bridge whose client has
// initialized and declared roots, so rootfs has a roots/list outstanding and holds the client's
// messages for the server, and on a fresh bridge, where the client's requests reach the server
// at once, before any roots are installed (as a client's requests before its initialized do).
//
// Properties: no panic; every line written to either peer is a valid JSON-RPC message or batch
// of them (nothing that failed to parse is forwarded); nothing written to the server carries
// rootfs's prefix, except rootfs's refusal of a server request whose own id carried it; no
// request or cancel written to the client carries it, except rootfs's own roots/list.
func FuzzRouter(f *testing.F) {
	for _, s := range []string{
		"0" + `{"jsonrpc":"2.0","id":"PFX1","result":{"roots":[{"uri":"file:///x"}]}}`,
		"0" + `{"jsonrpc":"2.0","id":"PFX1","method":"ping"}`,
		"0" + `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"PFX1","result":{"roots":[]}}]`,
		"0" + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"PFX1"}}`,
		"0" + `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}` + "\n0" + `{"jsonrpc":"2.0","id":"PFX2","error":{"code":-32601,"message":"x"}}`,
		"0" + `{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}`,
		"0" + `{"jsonrpc":"2.0","id":1,"method":`,
		"0" + `{"jsonrpc":"2.0","id":"PFX\u0031","result":{}}`,
		"0" + `{"jsonrpc":"2.0","id":"\u0050FX1","method":"x"}`,
		"1" + `{"jsonrpc":"2.0","id":9,"method":"roots/list"}` + "\n1" + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`,
		"1" + `[{"jsonrpc":"2.0","id":"PFX1","result":{}},{"jsonrpc":"2.0","id":2,"method":"roots/list"}]`,
		"1Server started on stdio",
		"0" + `[{"jsonrpc":"2.0","id":"a","method":"server/discover"},"x",[]]`,
		"0" + `{"jsonrpc":"2.0","id":"0PFX1","method":"tools/list"}`,
		"0" + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"0PFX"}}`,
		"1" + `{"jsonrpc":"2.0","id":"PFX1","method":"x/unknown"}` + "\n0" + `{"jsonrpc":"2.0","id":"PFX1","error":{"code":-32601,"message":"x"}}`,
		"1" + `[{"jsonrpc":"2.0","id":"0PFX","method":"sampling/createMessage"},{"jsonrpc":"2.0","id":3,"method":"ping"}]`,
		"1" + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"PFX1"}}`,
		"0" + `{"jsonrpc":"2.0","id":5,"method":"tools/call"}` + "\n0" + `{"jsonrpc":"2.0","id":"PFX1","result":{"roots":[]}}` +
			"\n1" + `{"jsonrpc":"2.0","id":7,"method":"roots/list"}` + "\n1" + `{"jsonrpc":"2.0","id":"SPFX1","result":{}}` +
			"\n1" + `{"jsonrpc":"2.0","id":"SPFX2","error":{"code":1,"message":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, initialized := range []bool{true, false} {
			routeFuzzed(t, data, initialized)
		}
	})
}

// routeFuzzed runs one FuzzRouter input on a new bridge (initialized: see FuzzRouter) and checks
// what it wrote to each peer.
func routeFuzzed(t *testing.T, data []byte, initialized bool) {
	b, toClient, toServer := fuzzBridge(t)
	if initialized {
		b.fromClient([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}`))
		b.fromClient([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	}
	serverIDs := map[msgID]bool{} // ids of the requests the server sent
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		msg := bytes.ReplaceAll(line[1:], []byte("SPFX"), []byte(b.srvPrefix))
		side, msg := line[0], bytes.ReplaceAll(msg, []byte("PFX"), []byte(b.prefix))
		if side%2 == 0 {
			b.fromClient(msg)
			continue
		}
		for _, e := range fuzzMessages(msg) {
			if e.kind == kindRequest {
				serverIDs[e.id] = true
			}
		}
		b.fromServer(msg)
	}
	// As Run ends: a release in progress (started by the server's answer to rootfs's ping)
	// finishes, a later one does nothing.
	close(b.life.closing)
	b.hmu.Lock()
	//lint:ignore SA2001 a barrier: wait for the releases in progress
	b.hmu.Unlock()
	b.toClient.closeAfterDrain(time.Minute)
	b.toServer.closeAfterDrain(time.Minute)
	b.stopTimers()
	check := func(who string, out []byte, allowed func(*envelope) bool) {
		for _, l := range bytes.Split(out, []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			if !json.Valid(l) {
				t.Fatalf("initialized=%v: to %s: invalid JSON %q", initialized, who, l)
			}
			els := [][]byte{trimmed(l)}
			if els[0][0] == '[' {
				els, _ = splitBatch(els[0], maxBatch)
			}
			for _, el := range els {
				e, err := parseMessage(el)
				if err != nil {
					t.Fatalf("initialized=%v: to %s: forwarded a message that does not parse: %q: %v", initialized, who, el, err)
				}
				if !allowed(e) {
					t.Fatalf("initialized=%v: to %s: rootfs's prefix leaked: %q", initialized, who, el)
				}
			}
		}
	}
	check("server", toServer.b.Bytes(), func(e *envelope) bool {
		if e.id.carries(b.prefix) {
			// Only rootfs's refusal of the server's own request with such an id.
			return e.kind == kindResponse && e.errRaw != nil && serverIDs[e.id]
		}
		if e.method == methodCancelled {
			for _, id := range cancelledIDs(e.params) {
				if id.carries(b.prefix) {
					return false
				}
			}
		}
		return true
	})
	check("client", toClient.b.Bytes(), func(e *envelope) bool {
		// Replies to the client's own requests may carry it (rootfs's refusals); a request
		// that carries it must be rootfs's own roots/list. rootfs cancels its own only when
		// one times out, which no input waits for.
		if e.method == methodCancelled {
			for _, id := range cancelledIDs(e.params) {
				if id.carries(b.prefix) {
					return false
				}
			}
		}
		return e.kind != kindRequest || !e.id.carries(b.prefix) || (b.ours(e.id) && e.method == methodRootsList)
	})
}

// fuzzMessages decodes the messages of one line as the router would route them (none if it
// would not route any).
func fuzzMessages(line []byte) []*envelope {
	t := trimmed(line)
	if len(t) == 0 || !json.Valid(t) {
		return nil
	}
	els := [][]byte{t}
	if t[0] == '[' {
		var ok bool
		if els, ok = splitBatch(t, maxBatch); !ok {
			return nil
		}
	}
	var out []*envelope
	for _, el := range els {
		if e, err := parseMessage(el); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// errParse wraps JSON syntax errors.
var errParse = errors.New("parse error")

// parseMessage decodes the routing envelope of one JSON object. b must not be modified while the
// envelope is in use. Errors wrap errParse (not JSON) or errInvalid (JSON, but not JSON-RPC 2.0).
func parseMessage(b []byte) (*envelope, error) {
	if !json.Valid(b) {
		return nil, fmt.Errorf("%w: %v", errParse, syntaxError(b))
	}
	e := new(envelope)
	if err := parseValid(b, e); err != nil {
		return nil, err
	}
	return e, nil
}
