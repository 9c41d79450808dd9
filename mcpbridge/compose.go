package mcpbridge

// This file is the messages rootfs composes: its replies, requests and notifications, the batch
// it joins from elements, and its one edit of a peer's message (the roots capability of the
// client's initialize, every other byte kept). Like wire.go, it does no I/O and holds no state.

import (
	"encoding/json"
	"strconv"
)

// ---- replies, requests and notifications ----

// errorReply is a JSON-RPC error response (ending in '\n'); data, when not nil, is the error's
// data member (raw JSON).
func errorReply(id msgID, code int, message string, data []byte) []byte {
	m, _ := json.Marshal(message)
	out := make([]byte, 0, 64+len(id.str)+len(m)+len(data))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = id.appendJSON(out)
	out = append(out, `,"error":{"code":`...)
	out = strconv.AppendInt(out, int64(code), 10)
	out = append(out, `,"message":`...)
	out = append(out, m...)
	if data != nil {
		out = append(out, `,"data":`...)
		out = append(out, data...)
	}
	return append(out, "}}\n"...)
}

// resultReply is a JSON-RPC result response (ending in '\n'); result is raw JSON.
func resultReply(id msgID, result []byte) []byte {
	out := make([]byte, 0, 40+len(id.str)+len(result))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = id.appendJSON(out)
	out = append(out, `,"result":`...)
	out = append(out, result...)
	return append(out, "}\n"...)
}

// requestLine is a JSON-RPC request (ending in '\n'); a null id makes it a notification, nil
// params omits them.
func requestLine(id msgID, method string, params []byte) []byte {
	m, _ := json.Marshal(method)
	out := make([]byte, 0, 48+len(id.str)+len(m)+len(params))
	out = append(out, `{"jsonrpc":"2.0",`...)
	if !id.isNull() {
		out = append(out, `"id":`...)
		out = id.appendJSON(out)
		out = append(out, ',')
	}
	out = append(out, `"method":`...)
	out = append(out, m...)
	if params != nil {
		out = append(out, `,"params":`...)
		out = append(out, params...)
	}
	return append(out, "}\n"...)
}

// notificationLine is a JSON-RPC notification (ending in '\n').
func notificationLine(method string, params []byte) []byte {
	return requestLine(msgID{}, method, params)
}

// ---- batches ----

// joinBatch makes one JSON array of messages, each with or without a trailing '\n' (dropped);
// the array has no newline.
func joinBatch(els [][]byte) []byte {
	n := 2
	for _, e := range els {
		n += len(e) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range els {
		if i > 0 {
			out = append(out, ',')
		}
		if k := len(e); k > 0 && e[k-1] == '\n' {
			e = e[:k-1]
		}
		out = append(out, e...)
	}
	return append(out, ']')
}

// withNewline returns a fresh copy of b followed by '\n', ready for peerWriter.send.
func withNewline(b []byte) []byte {
	out := make([]byte, len(b)+1)
	copy(out, b)
	out[len(b)] = '\n'
	return out
}

// ---- the initialize edit ----

// withRootsCapability returns the initialize message raw with params.capabilities.roots set to
// {"listChanged":true}, every other byte unchanged, and what the client declared (an object
// "roots" capability, and its listChanged). why is not empty when raw is returned unchanged.
func withRootsCapability(raw []byte) (msg []byte, declared, listChanged bool, why string) {
	ms, _ := members(raw, nil) // parseValid accepted them
	pm := find(ms, "params")
	if pm == nil || raw[pm.valStart] != '{' {
		return raw, false, false, "initialize without params object"
	}
	params := raw[pm.valStart:pm.valEnd]
	pms, err := members(params, nil)
	if err != nil {
		return raw, false, false, "initialize params refused: " + err.Error()
	}
	newCaps := []byte(`{"roots":{"listChanged":true}}`)
	if cm := find(pms, "capabilities"); cm != nil && params[cm.valStart] == '{' {
		caps := params[cm.valStart:cm.valEnd]
		if cms, err := members(caps, nil); err == nil {
			if rm := find(cms, "roots"); rm != nil && caps[rm.valStart] == '{' {
				declared = true
				roots := caps[rm.valStart:rm.valEnd]
				if rms, err := members(roots, nil); err == nil {
					if lm := find(rms, "listChanged"); lm != nil {
						listChanged = string(roots[lm.valStart:lm.valEnd]) == "true"
					}
				}
			}
			newCaps = setMember(caps, cms, "roots", []byte(`{"listChanged":true}`))
		}
	}
	newParams := setMember(params, pms, "capabilities", newCaps)
	return splice(raw, pm.valStart, pm.valEnd, newParams), declared, listChanged, ""
}

// setMember sets key to val in the JSON object obj (valid JSON), keeping every other byte.
// An existing member's value is replaced in place; a new member is inserted first.
func setMember(obj []byte, ms []member, key string, val []byte) []byte {
	if m := find(ms, key); m != nil {
		return splice(obj, m.valStart, m.valEnd, val)
	}
	open := skipSpace(obj, 0) + 1 // just after '{'
	kv, _ := json.Marshal(key)
	ins := append(append(kv, ':'), val...)
	if len(ms) > 0 {
		ins = append(ins, ',')
	}
	return splice(obj, open, open, ins)
}

// splice returns b with b[start:end] replaced by repl (a new slice).
func splice(b []byte, start, end int, repl []byte) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(repl)+1)
	out = append(out, b[:start]...)
	out = append(out, repl...)
	out = append(out, b[end:]...)
	return out
}
