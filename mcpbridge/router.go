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
			b.sendClient(errorReply(msgID{}, codeInvalidRequest,
				fmt.Sprintf("message too large: over %d bytes; rootfs refuses larger lines (raise --max-line)", b.opts.MaxLine), nil))
			continue
		}
		if err != nil {
			b.end(true, err)
			return
		}
		b.fromClient(line)
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
		b.fromServer(line)
	}
}

// fromClient handles one line read from the client: it answers what rootfs owns and forwards
// the rest to the server (inside the handler lock: Run closes the server's stdin, which ends a
// stuck forward).
func (b *Bridge) fromClient(line []byte) {
	b.hmu.RLock()
	defer b.hmu.RUnlock()
	if b.isDone() {
		return
	}
	t := trimmed(line)
	if len(t) == 0 {
		return
	}
	if !json.Valid(t) {
		err := syntaxError(t)
		b.log.Warn("client sent a line that is not json", zap.Error(err), zap.String("line", lineSnippet(t)))
		b.sendClient(errorReply(msgID{}, codeParseError, "parse error: "+err.Error(), nil))
		return
	}
	if t[0] != '[' {
		r := b.routeClient(t)
		if r.fwd != nil {
			b.forwardToServer(r.fwd, r.kind == kindResponse, r.waits)
		}
		if r.reply != nil {
			b.sendClient(r.reply)
		}
		if r.after != nil {
			r.after()
		}
		return
	}
	els, ok := splitBatch(t, maxBatch)
	if !ok {
		b.refused.batch.add(b.log, "refused a batch over the limit from the client", zap.Int("max_batch", maxBatch))
		b.sendClient(errorReply(msgID{}, codeInvalidRequest,
			fmt.Sprintf("invalid request: a batch of more than %d messages; rootfs refuses larger batches (send fewer at once)", maxBatch), nil))
		return
	}
	if len(els) == 0 {
		b.sendClient(errorReply(msgID{}, codeInvalidRequest, "invalid request: empty batch", nil))
		return
	}
	// While messages are held, a batch is held rebuilt from its forwarded elements, whose bytes
	// the hold has counted (the line's whitespace is not).
	verbatim := !b.roots.isHolding()
	responses, waits := true, false
	var fwds, replies [][]byte
	var afters []func()
	for _, el := range els {
		r := b.routeClient(el)
		if r.fwd == nil || !sameBytes(r.fwd, el) {
			verbatim = false
		}
		if r.fwd != nil {
			fwds = append(fwds, r.fwd)
			responses = responses && r.kind == kindResponse
			waits = waits || r.waits
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
		b.forwardToServer(t, responses, waits)
	case len(fwds) > 0:
		b.forwardToServer(joinBatch(fwds), responses, waits)
	}
	if len(replies) > 0 {
		b.sendClient(withNewline(joinBatch(replies)))
	}
	for _, f := range afters {
		f()
	}
}

// fromServer handles one line read from the server: it answers what rootfs owns and forwards the
// rest to the client, after the handler lock (Run never closes the client's stdout, so a write
// the client never takes must not hold up Run's return).
func (b *Bridge) fromServer(line []byte) {
	var fwd []byte
	b.hmu.RLock()
	if !b.isDone() {
		fwd = b.routeServerLine(line)
	}
	b.hmu.RUnlock()
	if fwd != nil {
		_ = b.toClient.forward(fwd) // fails only once the bridge is shutting down or the client broke
	}
}

// route is what handling one message decided.
type route struct {
	kind  kind   // of the message forwarded
	waits bool   // a request that may depend on the roots (see rootsState's settle)
	fwd   []byte // bytes to forward (the message itself, or an edited copy); nil: not forwarded
	reply []byte // rootfs's own reply to the sender (ends in '\n'); nil: none
	after func() // run after fwd is written (or held)
}

// routeClient decides what to do with one message (a JSON value) from the client.
func (b *Bridge) routeClient(el []byte) route {
	if el[0] != '{' {
		return route{reply: errorReply(msgID{}, codeInvalidRequest, "invalid request: a message must be a JSON object", nil)}
	}
	var e envelope // on the stack: what is retained is copied
	if err := parseValid(el, &e); err != nil {
		b.log.Warn("client sent an invalid message", zap.Error(err), zap.String("line", lineSnippet(el)))
		return route{reply: errorReply(msgID{}, codeInvalidRequest, err.Error(), nil)}
	}
	switch e.kind {
	case kindRequest:
		if b.carriesPrefix(e.id) {
			// Checked anywhere in the id, as for replies below: forwarded, the request would hand
			// the server rootfs's prefix.
			return route{reply: errorReply(e.id, codeInvalidRequest, "invalid request: ids containing "+b.prefix+" are rootfs's own", nil)}
		}
		if e.method == methodDiscover {
			// Force the legacy era (initialize) until modern-era bridging exists.
			return route{reply: errorReply(e.id, codeMethodNotFound, "method not found: server/discover (rootfs speaks the initialize handshake)", nil)}
		}
		if v, ok := modernVersion(e.params); ok {
			// A 2026-07-28 request would let a dual-era server run statelessly and fetch roots
			// through MRTR from the client directly, around rootfs. Refuse it until that era is
			// bridged; the client falls back to initialize.
			b.log.Warn("refused a modern-era request", zap.String("method", e.method), zap.String("version", v))
			return route{reply: unsupportedVersionReply(e.id, v)}
		}
		if msg := b.init.goneMessage(); msg != "" {
			// The server has ended and the client has not initialized: tell it why. The wait
			// for the initialize ends after the reply is queued (after runs after it is sent),
			// or Run could stop the client's writer first and lose it.
			r := route{reply: errorReply(e.id, codeInternalError, msg, nil)}
			if e.method == methodInitialize {
				r.after = b.init.settle
			}
			return r
		}
		if len(e.rawID) > maxIDLen {
			return route{reply: errorReply(e.id, codeInvalidRequest,
				fmt.Sprintf("invalid request: an id of %d bytes; rootfs keeps ids of at most %d (use a shorter id)", len(e.rawID), maxIDLen), nil)}
		}
		if !b.pending.add(e.id) {
			b.refused.pending.add(b.log, "refused a client request over the in-flight limit", zap.Int("max_pending", maxPending))
			return route{reply: errorReply(e.id, codeLimit,
				fmt.Sprintf("rootfs: %d requests to the server are already in flight; wait for some to be answered", maxPending), nil)}
		}
		if !b.roots.hold(len(el)) {
			b.pending.take(e.id)
			b.refused.held.add(b.log, "refused a client request: too many messages held for the roots",
				zap.String("method", e.method), zap.Int("max_held", maxHeld))
			return route{reply: errorReply(e.id, codeLimit, fmt.Sprintf(
				"rootfs: still giving the server the client's roots (roots/list) and already holding %d messages (or %d bytes) for it; retry once roots/list is answered", maxHeld, b.opts.MaxLine), nil)}
		}
		if e.method == methodInitialize {
			b.init.forwarded()
			return route{kind: kindRequest, fwd: b.editInitialize(&e)}
		}
		return route{kind: kindRequest, fwd: el, waits: !noRootsMethods[e.method]}
	case kindNotification:
		switch e.method {
		case methodInitialized:
			return route{kind: kindNotification, fwd: el, after: b.onInitialized}
		case methodRootsChanged:
			return route{after: b.requestFetch}
		case methodCancelled:
			ids := cancelledIDs(e.params)
			for _, id := range ids {
				if b.carriesPrefix(id) {
					return route{}
				}
			}
			for _, id := range ids {
				b.pending.take(id)
			}
		}
		if !b.roots.hold(len(el)) {
			b.refused.held.add(b.log, "dropped a client notification: too many messages held for the roots",
				zap.String("method", e.method), zap.Int("max_held", maxHeld))
			return route{}
		}
		return route{kind: kindNotification, fwd: el}
	default: // response
		if e.id.isNull() {
			b.log.Warn("dropped an error reply with a null id from the client", zap.String("line", lineSnippet(el)))
			return route{}
		}
		if b.ours(e.id) {
			fe := new(envelope)
			*fe = e
			return route{after: func() { b.handleFetchReply(fe) }}
		}
		if b.carriesPrefix(e.id) {
			// Not a reply to the server (its ids never carry rootfs's
			// session prefix) and not to rootfs: forwarding it would hand
			// the server rootfs's prefix.
			b.log.Warn("dropped a reply from the client whose id carries rootfs's prefix but answers nothing", zap.String("line", lineSnippet(el)))
			return route{}
		}
		return route{kind: kindResponse, fwd: el}
	}
}

// legacyVersions are the protocol versions rootfs bridges (the initialize-based ones).
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

func unsupportedVersionReply(id msgID, requested string) []byte {
	data, _ := json.Marshal(struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}{legacyVersions, requested})
	return errorReply(id, codeUnsupportedProtocolVersion, "unsupported protocol version: rootfs speaks the initialize-based versions", data)
}

// ours reports whether id is one of rootfs's own (see the package doc).
func (b *Bridge) ours(id msgID) bool { return id.hasPrefix(b.prefix) }

// carriesPrefix reports whether id contains rootfs's session prefix anywhere. In an honest
// session only rootfs's own ids do (the prefix holds a random nonce: the client sees it only in
// rootfs's requests, the server never), so a peer's message with such an id that is not
// rootfs's own business is refused or dropped, never forwarded.
func (b *Bridge) carriesPrefix(id msgID) bool { return id.carries(b.prefix) }

// editInitialize returns the initialize message with the roots capability rootfs gives the server
// (see withRootsCapability) and notes what the client declared.
func (b *Bridge) editInitialize(e *envelope) []byte {
	msg, declared, listChanged, why := withRootsCapability(e.raw)
	if why != "" {
		b.log.Warn(why + "; forwarded unchanged")
		return msg
	}
	b.roots.declare(declared, listChanged)
	b.log.Debug("client initialize", zap.Bool("roots", declared), zap.Bool("list_changed", listChanged))
	if b.opts.ClientInfo != nil {
		var p struct {
			ClientInfo struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"clientInfo"`
		}
		if json.Unmarshal(e.params, &p) == nil {
			b.opts.ClientInfo(p.ClientInfo.Name, p.ClientInfo.Version)
		}
	}
	return msg
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
	if t[0] != '[' {
		return b.routeServer(t)
	}
	els, ok := splitBatch(t, maxBatch)
	if !ok {
		b.refused.batch.add(b.log, "dropped a batch over the limit from the server", zap.Int("max_batch", maxBatch))
		return nil
	}
	var fwds [][]byte
	verbatim := len(els) > 0
	for _, el := range els {
		fwd := b.routeServer(el)
		if fwd == nil || !sameBytes(fwd, el) {
			verbatim = false
		}
		if fwd != nil {
			fwds = append(fwds, fwd)
		}
	}
	switch {
	case verbatim:
		return t
	case len(fwds) > 0:
		return joinBatch(fwds)
	}
	return nil
}

// routeServer decides what to do with one message from the server and returns what to forward
// to the client (nil: nothing). Replies rootfs makes to the server are queued directly.
func (b *Bridge) routeServer(el []byte) []byte {
	if el[0] != '{' {
		b.log.Warn("dropped a message from the server that is not an object", zap.String("line", lineSnippet(el)))
		return nil
	}
	var e envelope // on the stack: what is retained is copied
	if err := parseValid(el, &e); err != nil {
		b.log.Warn("dropped an invalid message from the server", zap.Error(err), zap.String("line", lineSnippet(el)))
		return nil
	}
	switch e.kind {
	case kindRequest:
		if b.carriesPrefix(e.id) {
			// Forwarded, it would come back from the client as an answer with rootfs's own id,
			// taken for the answer to rootfs's roots/list: a client that answers a request it
			// does not know with -32601 (or with an empty list) would clear the roots. The id is
			// the server's own, so the refusal tells it nothing it did not send.
			b.log.Warn("refused a server request whose id carries rootfs's prefix", zap.String("method", e.method))
			b.sendServer(errorReply(e.id, codeInvalidRequest,
				"invalid request: the id carries rootfs's session prefix, which only rootfs's own requests to the client use (use another id)", nil))
			return nil
		}
		if e.method == methodRootsList {
			b.serverRootsList(&e)
			return nil
		}
	case kindNotification:
		if e.method == methodCancelled {
			for _, id := range cancelledIDs(e.params) {
				if b.carriesPrefix(id) {
					// The client would drop rootfs's roots/list in flight, and the view would
					// keep the roots it is about to lose until RootsTimeout.
					b.log.Warn("dropped a cancel from the server of an id that carries rootfs's prefix")
					return nil
				}
				if b.roots.swallowCancel(id) {
					return nil
				}
			}
		}
	default:
		if e.id.isNull() {
			b.log.Warn("dropped an error reply with a null id from the server", zap.String("line", lineSnippet(el)))
			return nil
		}
		if !b.pending.take(e.id) {
			if e.id.hasPrefix(b.srvPrefix) {
				b.barrierReply(e.id)
				return nil
			}
			b.log.Warn("dropped a reply from the server to no pending request", zap.Stringer("id", e.id))
			return nil
		}
	}
	return el
}
