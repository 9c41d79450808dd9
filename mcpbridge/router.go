package mcpbridge

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// Methods rootfs owns.
const (
	methodInitialize   = "initialize"
	methodInitialized  = "notifications/initialized"
	methodRootsList    = "roots/list"
	methodRootsChanged = "notifications/roots/list_changed"
	methodCancelled    = "notifications/cancelled"
	methodDiscover     = "server/discover"
)

func (b *Bridge) clientLoop() {
	lr := newLineReader(b.opts.ClientIn, b.opts.MaxLine)
	for {
		line, err := lr.next()
		if b.isDone() {
			return
		}
		if errors.Is(err, errLineTooLong) {
			b.log.Warn("refused an oversized message from the client", zap.Int("max_line", b.opts.MaxLine))
			b.sendClient(errorReply(nil, codeInvalidRequest,
				fmt.Sprintf("message too large: over %d bytes; rootfs refuses larger lines (raise --max-line)", b.opts.MaxLine)))
			continue
		}
		if err != nil {
			b.end(true, err)
			return
		}
		b.hmu.RLock()
		if !b.isDone() {
			b.handleClientLine(line)
		}
		b.hmu.RUnlock()
	}
}

func (b *Bridge) serverLoop() {
	lr := newLineReader(b.opts.ServerOut, b.opts.MaxLine)
	for {
		line, err := lr.next()
		if b.isDone() {
			return
		}
		if errors.Is(err, errLineTooLong) {
			b.log.Warn("dropped an oversized message from the server", zap.Int("max_line", b.opts.MaxLine))
			continue
		}
		if err != nil {
			b.end(false, err)
			return
		}
		var fwd []byte
		b.hmu.RLock()
		if !b.isDone() {
			fwd = b.routeServerLine(line)
		}
		b.hmu.RUnlock()
		if fwd != nil {
			// Outside hmu: Run does not close the client's stdout, so a write the client never
			// takes must not hold up Run's return.
			_ = b.toClient.forward(fwd) // fails only once the bridge is shutting down or the client broke
		}
	}
}

// route is what handling one message decided.
type route struct {
	kind  kind   // of the message routed (0: refused before it was parsed)
	fwd   []byte // bytes to forward (the message itself, or an edited copy); nil: not forwarded
	reply []byte // rootfs's own reply to the sender (ends in '\n'); nil: none
	after func() // run after fwd is written (or held)
}

func (b *Bridge) handleClientLine(line []byte) {
	t := trimmed(line)
	if len(t) == 0 {
		return
	}
	if !json.Valid(t) {
		err := syntaxError(t)
		b.log.Warn("client sent a line that is not json", zap.Error(err), zap.String("line", lineSnippet(t)))
		b.sendClient(errorReply(nil, codeParseError, "parse error: "+err.Error()))
		return
	}
	if t[0] == '[' {
		b.clientBatch(t)
		return
	}
	r := b.routeClient(t)
	if r.fwd != nil {
		b.forwardToServer(r.fwd, r.kind == kindResponse)
	}
	if r.reply != nil {
		b.sendClient(r.reply)
	}
	if r.after != nil {
		r.after()
	}
}

func (b *Bridge) clientBatch(t []byte) {
	els, ok := elements(t, maxBatch)
	if !ok {
		b.refusedBatch.add(b.log, "refused a batch over the limit from the client", zap.Int("max_batch", maxBatch))
		b.sendClient(errorReply(nil, codeInvalidRequest,
			fmt.Sprintf("invalid request: a batch of more than %d messages; rootfs refuses larger batches (send fewer at once)", maxBatch)))
		return
	}
	if len(els) == 0 {
		b.sendClient(errorReply(nil, codeInvalidRequest, "invalid request: empty batch"))
		return
	}
	var fwds, replies [][]byte
	var afters []func()
	// While messages are held, a batch is held rebuilt from its forwarded elements, whose bytes
	// the hold has counted (the line's whitespace is not).
	verbatim := !b.isHolding()
	responses := true
	for _, el := range els {
		r := b.routeClient(el)
		if r.fwd == nil || !sameBytes(r.fwd, el) {
			verbatim = false
		}
		if r.fwd != nil && r.kind != kindResponse {
			responses = false
		}
		if r.fwd != nil {
			fwds = append(fwds, r.fwd)
		}
		if r.reply != nil {
			replies = append(replies, r.reply)
		}
		if r.after != nil {
			afters = append(afters, r.after)
		}
	}
	switch {
	case verbatim:
		b.forwardToServer(t, responses)
	case len(fwds) > 0:
		b.forwardToServer(arrayOf(fwds), responses)
	}
	if len(replies) > 0 {
		b.sendClient(withNewline(arrayOf(trimNewlines(replies))))
	}
	for _, f := range afters {
		f()
	}
}

// routeClient decides what to do with one message (a JSON value) from the client.
func (b *Bridge) routeClient(el []byte) route {
	if el[0] != '{' {
		return route{reply: errorReply(nil, codeInvalidRequest, "invalid request: a message must be a JSON object")}
	}
	var e envelope // on the stack: what is retained is copied
	if err := parseValid(el, &e); err != nil {
		b.log.Warn("client sent an invalid message", zap.Error(err), zap.String("line", lineSnippet(el)))
		return route{reply: errorReply(nil, codeInvalidRequest, err.Error())}
	}
	switch e.kind {
	case kindRequest:
		if b.ours(e.idStr) {
			return route{reply: errorReply(e.id, codeInvalidRequest, "invalid request: ids starting with "+b.prefix+" are rootfs's own")}
		}
		switch e.method {
		case methodDiscover:
			// Force the legacy era (initialize) until modern-era bridging exists.
			return route{reply: errorReply(e.id, codeMethodNotFound, "method not found: server/discover (rootfs speaks the initialize handshake)")}
		}
		if v, ok := modernVersion(e.params); ok {
			// A 2026-07-28 request would let a dual-era server run statelessly and fetch roots
			// through MRTR from the client directly, around rootfs. Refuse it until that era is
			// bridged; the client falls back to initialize.
			b.log.Warn("refused a modern-era request", zap.String("method", e.method), zap.String("version", v))
			return route{reply: unsupportedVersionReply(e.id, v)}
		}
		if len(e.id) > maxIDLen {
			return route{reply: errorReply(e.id, codeInvalidRequest,
				fmt.Sprintf("invalid request: an id of %d bytes; rootfs keeps ids of at most %d (use a shorter id)", len(e.id), maxIDLen))}
		}
		if !b.addPending(&e) {
			b.refusedPending.add(b.log, "refused a client request over the in-flight limit", zap.Int("max_pending", maxPending))
			return route{reply: errorReply(e.id, codeLimit,
				fmt.Sprintf("rootfs: %d requests to the server are already in flight; wait for some to be answered", maxPending))}
		}
		if !b.holdReserve(len(el)) {
			b.removePending(&e)
			b.refusedHeld.add(b.log, "refused a client request: too many messages held for the first roots",
				zap.String("method", e.method), zap.Int("max_held", maxHeld))
			return route{reply: errorReply(e.id, codeLimit, fmt.Sprintf(
				"rootfs: still fetching the client's first roots and already holding %d messages (or %d bytes) for the server; retry once roots/list is answered", maxHeld, b.opts.MaxLine))}
		}
		if e.method == methodInitialize {
			return route{kind: kindRequest, fwd: b.editInitialize(&e)}
		}
		return route{kind: kindRequest, fwd: el}
	case kindNotification:
		switch e.method {
		case methodInitialized:
			return route{kind: kindNotification, fwd: el, after: b.onInitialized}
		case methodRootsChanged:
			return route{after: b.requestFetch}
		case methodCancelled:
			ids := cancelledIDs(e.params)
			for _, c := range ids {
				if b.ours(c.idStr) {
					return route{}
				}
			}
			b.mu.Lock()
			for _, c := range ids {
				delete(b.pending, c.key)
			}
			b.mu.Unlock()
		}
		if !b.holdReserve(len(el)) {
			b.refusedHeld.add(b.log, "dropped a client notification: too many messages held for the first roots",
				zap.String("method", e.method), zap.Int("max_held", maxHeld))
			return route{}
		}
		return route{kind: kindNotification, fwd: el}
	default: // response
		if e.id == nil {
			b.log.Warn("dropped an error reply with a null id from the client", zap.String("line", lineSnippet(el)))
			return route{}
		}
		if b.ours(e.idStr) {
			fe := new(envelope)
			*fe = e
			return route{after: func() { b.handleFetchReply(fe) }}
		}
		return route{kind: kindResponse, fwd: el}
	}
}

// metaProtocolVersion is the 2026-07-28 per-request version key.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// modernVersion reports the params._meta protocol version when it names the modern era. It
// decides on decoded names and values, as the server will read them: any spelling of the key
// (escapes included) counts, and so does any of duplicate _meta objects or keys, since parsers
// disagree on which duplicate wins.
func modernVersion(params json.RawMessage) (string, bool) {
	it := newMemberIter(params)
	for {
		k, v, ok := it.next()
		if !ok {
			return "", false
		}
		if string(k) != "_meta" {
			continue
		}
		mit := newMemberIter(v)
		for {
			mk, mv, ok := mit.next()
			if !ok {
				break
			}
			if string(mk) != metaProtocolVersion || mv[0] != '"' {
				continue
			}
			if s, err := decodeString(mv); err == nil && s >= "2026-07-28" {
				return s, true
			}
		}
	}
}

// legacyVersions are the protocol versions rootfs bridges (the initialize-based ones).
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

func unsupportedVersionReply(id json.RawMessage, requested string) []byte {
	data, _ := json.Marshal(struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}{legacyVersions, requested})
	msg := errorReply(id, codeUnsupportedProtocolVersion, "unsupported protocol version: rootfs speaks the initialize-based versions")
	// splice "data" into the error object: ...,"message":"..."}}\n → ...,"message":"...","data":{...}}}\n
	out := append([]byte(nil), msg[:len(msg)-3]...)
	out = append(out, `,"data":`...)
	out = append(out, data...)
	return append(out, "}}\n"...)
}

func (b *Bridge) ours(idStr string) bool {
	return len(idStr) >= len(b.prefix) && idStr[:len(b.prefix)] == b.prefix
}

// addPending records a request forwarded to the server, unless maxPending are in flight. An
// integer id is kept only in its key (see pendingID); a string id is copied (e.id points into
// the line buffer).
func (b *Bridge) addPending(e *envelope) bool {
	var kb [48]byte
	key := e.appendKey(kb[:0])
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, dup := b.pending[string(key)]; !dup && len(b.pending) >= maxPending {
		return false
	}
	var id json.RawMessage
	if e.id[0] == '"' {
		id = append(json.RawMessage(nil), e.id...)
	}
	b.pending[string(key)] = id
	return true
}

// removePending forgets a request recorded by addPending that was not forwarded after all.
func (b *Bridge) removePending(e *envelope) {
	key := e.idKey()
	b.mu.Lock()
	delete(b.pending, key)
	b.mu.Unlock()
}

// pendingID returns the id of a pending entry.
func pendingID(key string, id json.RawMessage) json.RawMessage {
	if id == nil {
		return json.RawMessage(key[len("n:"):])
	}
	return id
}

// editInitialize returns the initialize message with params.capabilities.roots set to
// {"listChanged":true}, every other byte unchanged, and notes what the client declared.
func (b *Bridge) editInitialize(e *envelope) []byte {
	ms, _ := members(e.raw, nil) // parseValid accepted them
	pm := find(ms, "params")
	if pm == nil || e.raw[pm.valStart] != '{' {
		b.log.Warn("initialize without params object; forwarded unchanged")
		return e.raw
	}
	params := e.raw[pm.valStart:pm.valEnd]
	pms, err := members(params, nil)
	if err != nil {
		b.log.Warn("initialize params refused; forwarded unchanged", zap.Error(err))
		return e.raw
	}
	newCaps := []byte(`{"roots":{"listChanged":true}}`)
	declared, listChanged := false, false
	if cm := find(pms, "capabilities"); cm != nil && params[cm.valStart] == '{' {
		caps := params[cm.valStart:cm.valEnd]
		if cms, err := members(caps, nil); err == nil {
			if rm := find(cms, "roots"); rm != nil && caps[rm.valStart] == '{' {
				declared = true
				if rms, err := members(caps[rm.valStart:rm.valEnd], nil); err == nil {
					if lm := find(rms, "listChanged"); lm != nil {
						listChanged = string(caps[rm.valStart:rm.valEnd][lm.valStart:lm.valEnd]) == "true"
					}
				}
			}
			newCaps = setMember(caps, cms, "roots", []byte(`{"listChanged":true}`))
		}
	}
	b.mu.Lock()
	b.clientRoots, b.clientListChanged = declared, listChanged
	b.mu.Unlock()
	b.log.Info("client initialize", zap.Bool("roots", declared), zap.Bool("list_changed", listChanged))
	newParams := setMember(params, pms, "capabilities", newCaps)
	return splice(e.raw, pm.valStart, pm.valEnd, newParams)
}

// handleServerLine handles one line from the server and forwards what is not rootfs's to the client.
func (b *Bridge) handleServerLine(line []byte) {
	if fwd := b.routeServerLine(line); fwd != nil {
		_ = b.toClient.forward(fwd)
	}
}

// routeServerLine handles what rootfs owns in one line from the server and returns what to
// forward to the client (nil: nothing).
func (b *Bridge) routeServerLine(line []byte) []byte {
	t := trimmed(line)
	if len(t) == 0 {
		return nil
	}
	if !json.Valid(t) {
		b.log.Warn("dropped a line from the server that is not json", zap.String("line", lineSnippet(t)))
		return nil
	}
	if t[0] == '[' {
		els, ok := elements(t, maxBatch)
		if !ok {
			b.refusedBatch.add(b.log, "dropped a batch over the limit from the server", zap.Int("max_batch", maxBatch))
			return nil
		}
		var fwds [][]byte
		verbatim := len(els) > 0
		for _, el := range els {
			r := b.routeServer(el)
			if r.fwd == nil || !sameBytes(r.fwd, el) {
				verbatim = false
			}
			if r.fwd != nil {
				fwds = append(fwds, r.fwd)
			}
		}
		switch {
		case verbatim:
			return t
		case len(fwds) > 0:
			return arrayOf(fwds)
		}
		return nil
	}
	return b.routeServer(t).fwd
}

// routeServer decides what to do with one message from the server. Replies rootfs makes to the
// server are queued directly.
func (b *Bridge) routeServer(el []byte) route {
	if el[0] != '{' {
		b.log.Warn("dropped a message from the server that is not an object", zap.String("line", lineSnippet(el)))
		return route{}
	}
	var e envelope // on the stack: what is retained is copied
	if err := parseValid(el, &e); err != nil {
		b.log.Warn("dropped an invalid message from the server", zap.Error(err), zap.String("line", lineSnippet(el)))
		return route{}
	}
	switch e.kind {
	case kindRequest:
		if e.method == methodRootsList {
			b.serverRootsList(&e)
			return route{}
		}
		return route{fwd: el}
	case kindNotification:
		if e.method == methodCancelled {
			for _, c := range cancelledIDs(e.params) {
				if b.swallowCancel(c.key) {
					return route{}
				}
			}
		}
		return route{fwd: el}
	default:
		if e.id == nil {
			b.log.Warn("dropped an error reply with a null id from the server", zap.String("line", lineSnippet(el)))
			return route{}
		}
		var kb [48]byte
		key := e.appendKey(kb[:0]) // string(key) in a map index does not allocate
		b.mu.Lock()
		_, ok := b.pending[string(key)]
		delete(b.pending, string(key))
		b.mu.Unlock()
		if !ok {
			b.log.Warn("dropped a reply from the server to no pending request", zap.String("id", string(e.id)))
			return route{}
		}
		return route{fwd: el}
	}
}

// cancelledID is one params.requestId of a notifications/cancelled.
type cancelledID struct {
	key, idStr string
}

// cancelledIDs reads params.requestId of a notifications/cancelled: every member whose decoded
// name is exactly requestId (a duplicate is read by some peers and not others, so each counts).
func cancelledIDs(params json.RawMessage) []cancelledID {
	var out []cancelledID
	it := newMemberIter(params)
	for {
		k, id, ok := it.next()
		if !ok {
			return out
		}
		if string(k) != "requestId" {
			continue
		}
		switch c := id[0]; {
		case c == '"':
			if s, err := decodeString(id); err == nil {
				out = append(out, cancelledID{key: "s:" + s, idStr: s})
			}
		case isInteger(id):
			out = append(out, cancelledID{key: "n:" + string(id)})
		}
	}
}

// elements splits a valid JSON array into its element values; ok is false when it has more than
// max (nothing is kept for them).
func elements(b []byte, max int) (out [][]byte, ok bool) {
	i := skipSpace(b, 0) + 1
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] == ']' {
			return out, true
		}
		if len(out) == max {
			return nil, false
		}
		j := skipValue(b, i)
		out = append(out, b[i:j])
		i = skipSpace(b, j)
		if i < len(b) && b[i] == ',' {
			i++
		}
	}
}

func arrayOf(els [][]byte) []byte {
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
		out = append(out, e...)
	}
	return append(out, ']')
}

func trimNewlines(ms [][]byte) [][]byte {
	out := make([][]byte, len(ms))
	for i, m := range ms {
		if n := len(m); n > 0 && m[n-1] == '\n' {
			m = m[:n-1]
		}
		out[i] = m
	}
	return out
}

func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
