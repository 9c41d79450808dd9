package mcpbridge

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// oldModernVersion is modernVersion as of 0103c8e, kept as the negative control: it looked for
// the bytes "protocolVersion" before parsing, so a key spelled with an escape slipped through.
func oldModernVersion(params json.RawMessage) (string, bool) {
	if len(params) == 0 || params[0] != '{' || !bytes.Contains(params, []byte(`protocolVersion`)) {
		return "", false
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", false
	}
	raw, ok := p.Meta[metaProtocolVersion]
	if !ok {
		return "", false
	}
	var v string
	if json.Unmarshal(raw, &v) != nil || v < "2026-07-28" {
		return "", false
	}
	return v, true
}

// TestModernRequestEscapedRefused: a 2026-07-28 request is refused however its _meta is
// spelled, as the server's parser reads it. The control shows the escaped key passed the old
// byte check (and so reached a dual-era server, which would then ask the client for roots
// around rootfs).
func TestModernRequestEscapedRefused(t *testing.T) {
	for _, tt := range []struct {
		name, params  string
		slippedBefore bool
	}{
		{"plain", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, false},
		{"key u-escape", `{"_meta":{"io.modelcontextprotocol/protocol\u0056ersion":"2026-07-28"}}`, true},
		{"key all escaped", `{"_meta":{"\u0069\u006f.modelcontextprotocol/\u0070\u0072\u006f\u0074\u006f\u0063\u006f\u006c\u0056\u0065\u0072\u0073\u0069\u006f\u006e":"2026-07-28"}}`, true},
		{"key solidus escape", `{"_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}`, false},
		{"_meta escaped", `{"\u005fmeta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, false},
		{"value escaped", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026\u002d07-28"}}`, false},
		{"duplicate _meta, last null", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"_meta":null}`, true},
		{"duplicate key", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := modernVersion(json.RawMessage(tt.params)); !ok {
				t.Fatalf("modernVersion missed %s", tt.params)
			}
			if _, old := oldModernVersion(json.RawMessage(tt.params)); old == tt.slippedBefore {
				t.Errorf("control: the old check found it = %v, want %v", old, !tt.slippedBefore)
			}
			h := newHarness(t, nil)
			h.startRaw(true, true)
			h.clientSend(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":` + tt.params + `}`)
			wantError(t, h.clientRecv(), "2", codeUnsupportedProtocolVersion)
			h.sync("after") // the request never reached the server; the session goes on
			if len(h.srvSkipped) != 0 {
				t.Fatalf("reached the server: %q", h.srvSkipped)
			}
		})
	}
	// Not modern: a key that only looks like it to a case-insensitive parser, an older version.
	for _, p := range []string{
		`{"_meta":{"io.modelcontextprotocol/PROTOCOLVERSION":"2026-07-28"}}`,
		`{"_META":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		`{"_meta":{"io.modelcontextprotocol/protocol\u0056ersion":"2025-11-25"}}`,
		`{"name":"x","arguments":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	} {
		if v, ok := modernVersion(json.RawMessage(p)); ok {
			t.Errorf("modernVersion(%s) = %q, want not modern", p, v)
		}
	}
}

// TestEscapedMethodsAndKeys: rootfs routes on decoded names, so a method or member name spelled
// with escapes is handled exactly as its plain spelling (as every peer's parser reads it).
func TestEscapedMethodsAndKeys(t *testing.T) {
	dirs := mkdirs(t, "proj")
	h := newHarness(t, nil)
	h.startRaw(true, true)
	// server/discover with an escaped solidus is still answered by rootfs.
	h.clientSend(`{"jsonrpc":"2.0","id":"d","method":"server\/discover"}`)
	wantError(t, h.clientRecv(), `"d"`, codeMethodNotFound)
	// initialize with escapes in its method, key names and roots capability is still edited.
	h.clientSend(`{"jsonrpc":"2.0","\u0069d":0,"method":"initiali\u007ae","params":{"protocolVersion":"2025-11-25","capabilit\u0069es":{"r\u006fots":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if got := h.serverRecv(); !strings.Contains(got, `"r\u006fots":{"listChanged":true}`) {
		t.Fatalf("initialize not edited: %s", got)
	}
	h.serverSend(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`)
	h.clientRecv()
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications\/initialized"}`)
	h.serverRecv()
	id := decode(t, h.clientRecv())["id"].(string) // the client declared roots: rootfs asks
	h.clientSend(rootsReply(id, dirs[0]))
	// The server's roots/list with an escaped method is answered by rootfs, not forwarded.
	h.serverSend(`{"jsonrpc":"2.0","id":7,"method":"roots\u002flist"}`)
	expect(t, h.serverRecv(), `{"jsonrpc":"2.0","id":7,"result":{"roots":[{"uri":"file:///proj"}]}}`)
	// A cancel of a rootfs id with an escaped key never reaches the server.
	h.clientSend(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"request\u0049d":"` + id + `"}}`)
	h.sync("after")
	for _, l := range h.srvSkipped {
		if strings.Contains(l, h.b.prefix) {
			t.Fatalf("rootfs id reached the server: %s", l)
		}
	}
}

// TestIDSpellingsMatch: an id is matched by its value, as the peers parse it: a server that
// answers -0 with 0 (JavaScript's JSON.stringify(-0) is "0") or "\u0061" with "a" still reaches
// the client. The control is the old map key, built from the integer's bytes: "-0" and "0"
// differed, so the answer was dropped and the client waited forever.
func TestIDSpellingsMatch(t *testing.T) {
	oldKey := func(raw string) string { return "n:" + raw }
	if oldKey("-0") == oldKey("0") {
		t.Fatal("control: the old keys of -0 and 0 are equal")
	}
	h := newHarness(t, nil)
	h.startRaw(true, true)
	for _, tt := range []struct{ sent, answered string }{
		{"-0", "0"},
		{`"\u0061"`, `"a"`},
		{`"b"`, `"\u0062"`},
	} {
		h.clientSend(ping(tt.sent))
		expect(t, h.serverRecv(), ping(tt.sent))
		reply := `{"jsonrpc":"2.0","id":` + tt.answered + `,"result":{}}`
		h.serverSend(reply)
		expect(t, h.clientRecv(), reply)
	}
	if n := h.logs.FilterMessage("dropped a reply from the server to no pending request").Len(); n != 0 {
		t.Errorf("%d replies dropped", n)
	}
}
