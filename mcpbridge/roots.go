package mcpbridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rootfs-dev/rootfs/vfs"
	"go.uber.org/zap"
)

// onInitialized runs after the client's notifications/initialized has been forwarded.
func (b *Bridge) onInitialized() {
	b.mu.Lock()
	if b.initialized {
		b.mu.Unlock()
		return
	}
	b.initialized = true
	roots := b.clientRoots
	b.holding = roots
	b.mu.Unlock()
	if roots {
		b.requestFetch()
		return
	}
	b.useStatic("the client declared no roots capability")
	b.settle(false)
}

// requestFetch asks the client for its roots, coalescing: at most one roots/list in flight and
// one queued, however many list_changed notifications arrive.
func (b *Bridge) requestFetch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.initialized || !b.clientRoots:
		b.log.Debug("ignored roots list_changed: client not initialized or declared no roots")
	case b.rootsUnsupported:
		b.log.Debug("ignored roots list_changed: client does not support roots/list")
	case b.fetch != nil:
		b.fetchQueued = true
	default:
		b.startFetchLocked()
	}
}

func (b *Bridge) startFetchLocked() {
	b.seq++
	b.fetches++
	id := b.prefix + strconv.Itoa(b.seq)
	b.fetch = &fetchState{id: id, timer: time.AfterFunc(b.opts.RootsTimeout, func() { b.fetchTimedOut(id) })}
	idJSON, _ := json.Marshal(id)
	msg := []byte(`{"jsonrpc":"2.0","id":` + string(idJSON) + `,"method":"roots/list"}` + "\n")
	if err := b.toClient.send(msg); err != nil && !errors.Is(err, errQueueStopped) {
		b.log.Warn("could not send roots/list to the client", zap.Error(err))
	}
}

func (b *Bridge) fetchTimedOut(id string) {
	b.hmu.RLock()
	defer b.hmu.RUnlock()
	if b.isDone() {
		return
	}
	b.mu.Lock()
	if b.fetch == nil || b.fetch.id != id {
		b.mu.Unlock()
		return
	}
	b.fetch = nil
	b.mu.Unlock()
	b.log.Warn("client did not answer roots/list in time; keeping the previous view",
		zap.Duration("timeout", b.opts.RootsTimeout))
	idJSON, _ := json.Marshal(id)
	b.sendClient([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` +
		string(idJSON) + `,"reason":"rootfs: roots/list timed out"}}` + "\n"))
	b.settle(false)
}

// handleFetchReply handles the client's answer to rootfs's roots/list (runs on the client loop).
func (b *Bridge) handleFetchReply(e *envelope) {
	b.mu.Lock()
	if b.fetch == nil || b.fetch.id != e.idStr {
		b.mu.Unlock()
		b.log.Warn("dropped a late or unknown reply to rootfs's roots/list", zap.String("id", e.idStr))
		return
	}
	b.fetch.timer.Stop()
	b.fetch = nil
	b.mu.Unlock()

	changed := false
	if e.errRaw != nil {
		we := readError(e.errRaw)
		if we.Code == codeMethodNotFound {
			b.mu.Lock()
			b.rootsUnsupported = true
			b.mu.Unlock()
			changed = b.useStatic("the client answered roots/list with method not found")
		} else {
			b.log.Warn("client roots/list failed; keeping the previous view",
				zap.Int64("code", we.Code), zap.String("message", we.Message))
		}
	} else if roots, err := b.parseRoots(e.result); err != nil {
		b.log.Warn("client roots/list result refused; keeping the previous view", zap.Error(err))
	} else if len(roots) == 0 && len(b.opts.Static) > 0 {
		// Some clients declare roots and answer with none (Claude Desktop); the static roots
		// are for exactly the case where the client has none.
		changed = b.useStatic("the client answered roots/list with no roots")
	} else {
		changed = b.install(roots, "client")
	}
	b.settle(changed)
}

// settle marks the first roots as known (answering server roots/list waiting for them), starts
// a queued fetch, and tells the server when a later swap changed its roots.
func (b *Bridge) settle(changed bool) {
	b.mu.Lock()
	first := !b.rootsKnown
	b.rootsKnown = true
	ws := b.waiters
	b.waiters = map[string]*waiter{}
	if b.fetch == nil && b.fetchQueued {
		b.fetchQueued = false
		if !b.rootsUnsupported {
			b.startFetchLocked()
		}
	}
	b.mu.Unlock()
	if first {
		b.releaseHeld()
	}
	for key, w := range ws {
		w.timer.Stop()
		b.answerRoots(w.id, key)
	}
	if changed && !first {
		b.sendServer([]byte(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}` + "\n"))
	}
}

// useStatic installs the static roots.
func (b *Bridge) useStatic(reason string) bool {
	if len(b.opts.Static) == 0 {
		b.mu.Lock()
		warn := !b.warnedEmpty
		b.warnedEmpty = true
		b.mu.Unlock()
		if warn {
			b.log.Warn("no roots: the server sees no files (give --root or --roots-file, or use a client with roots)",
				zap.String("reason", reason))
		}
	} else {
		b.log.Info("using the static roots", zap.String("reason", reason), zap.Int("roots", len(b.opts.Static)))
	}
	return b.install(b.opts.Static, "static")
}

// install builds a table from roots and swaps it into the view.
func (b *Bridge) install(roots []vfs.Root, source string) bool {
	t := b.opts.Build(roots)
	for _, s := range t.Skipped() {
		b.log.Warn("root skipped", zap.String("source", source), zap.String("uri", s.Root.URI), zap.Error(s.Reason))
	}
	if err := b.opts.View.Swap(t); err != nil {
		b.log.Error("view swap failed; keeping the previous view", zap.Error(err))
		t.Close()
		return false
	}
	b.log.Info("roots installed", zap.String("source", source), zap.Int("entries", len(t.Entries())),
		zap.Int("skipped", len(t.Skipped())))
	return true
}

// parseRoots decodes a ListRootsResult strictly. Malformed entries are dropped and logged; a
// malformed result as a whole is refused (nothing is ever added from it).
func (b *Bridge) parseRoots(result json.RawMessage) ([]vfs.Root, error) {
	if len(result) == 0 || result[0] != '{' {
		return nil, errors.New("result is not an object")
	}
	var r struct {
		Roots *[]json.RawMessage `json:"roots"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return nil, fmt.Errorf("roots: %w", err)
	}
	if r.Roots == nil {
		return nil, errors.New("roots missing or null")
	}
	if len(*r.Roots) > maxRoots {
		return nil, fmt.Errorf("%d roots; rootfs serves at most %d", len(*r.Roots), maxRoots)
	}
	roots := make([]vfs.Root, 0, len(*r.Roots))
	for i, raw := range *r.Roots {
		var w struct {
			URI  *string         `json:"uri"`
			Name *string         `json:"name"`
			Meta json.RawMessage `json:"_meta"`
		}
		skip := func(why string) { b.log.Warn("dropped a malformed root", zap.Int("index", i), zap.String("why", why)) }
		if len(raw) == 0 || raw[0] != '{' {
			skip("not an object")
			continue
		}
		if err := json.Unmarshal(raw, &w); err != nil {
			skip(err.Error())
			continue
		}
		if w.URI == nil {
			skip("no uri")
			continue
		}
		if !utf8.ValidString(*w.URI) || strings.ContainsRune(*w.URI, utf8.RuneError) {
			skip("uri is not valid utf-8")
			continue
		}
		root := vfs.Root{URI: *w.URI}
		if w.Name != nil {
			root.Name = *w.Name
		}
		switch {
		case len(w.Meta) == 0 || string(w.Meta) == "null":
		case w.Meta[0] == '{':
			root.Meta = append(json.RawMessage(nil), w.Meta...)
		default:
			skip("_meta is not an object")
			continue
		}
		roots = append(roots, root)
	}
	return roots, nil
}

// serverRootsList answers the server's roots/list from the current table, or waits (at most
// RootsTimeout) for the first roots.
func (b *Bridge) serverRootsList(e *envelope) {
	if len(e.id) > maxIDLen {
		b.sendServer(errorReply(e.id, codeInvalidRequest,
			fmt.Sprintf("invalid request: an id of %d bytes; rootfs keeps ids of at most %d (use a shorter id)", len(e.id), maxIDLen)))
		return
	}
	key := e.idKey()
	b.mu.Lock()
	if !b.rootsKnown {
		old := b.waiters[key]
		if old == nil && len(b.waiters) >= maxWaiters {
			b.mu.Unlock()
			b.refusedWaiters.add(b.log, "refused a server roots/list: too many waiting for the first roots", zap.Int("max_waiters", maxWaiters))
			b.sendServer(errorReply(e.id, codeLimit, fmt.Sprintf(
				"rootfs: %d roots/list requests already wait for the client's first roots; retry once initialization is complete", maxWaiters)))
			return
		}
		if old != nil {
			old.timer.Stop()
		}
		b.waiters[key] = &waiter{id: append(json.RawMessage(nil), e.id...), timer: time.AfterFunc(b.opts.RootsTimeout, func() { b.waiterTimedOut(key) })}
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.answerRoots(e.id, key)
}

func (b *Bridge) waiterTimedOut(key string) {
	b.hmu.RLock()
	defer b.hmu.RUnlock()
	if b.isDone() {
		return
	}
	b.mu.Lock()
	w := b.waiters[key]
	delete(b.waiters, key)
	b.mu.Unlock()
	if w != nil {
		b.log.Warn("roots not known in time; answered the server's roots/list with the current view")
		b.answerRoots(w.id, key)
	}
}

type wireRoot struct {
	URI  string          `json:"uri"`
	Name string          `json:"name,omitempty"`
	Meta json.RawMessage `json:"_meta,omitempty"`
}

func (b *Bridge) answerRoots(id json.RawMessage, key string) {
	entries := b.opts.View.Table().Entries()
	res := struct {
		Roots []wireRoot `json:"roots"`
	}{Roots: make([]wireRoot, 0, len(entries))}
	for _, e := range entries {
		res.Roots = append(res.Roots, wireRoot{URI: e.ViewURI(), Name: e.Root.Name, Meta: e.Root.Meta})
	}
	body, err := json.Marshal(res)
	if err != nil { // only a corrupt _meta could do this; answer without metadata
		for i := range res.Roots {
			res.Roots[i].Meta = nil
		}
		body, _ = json.Marshal(res)
	}
	b.mu.Lock()
	if !b.answeredSet[key] {
		if len(b.answered) >= answeredMemory {
			delete(b.answeredSet, b.answered[0])
			b.answered = b.answered[1:]
		}
		b.answered = append(b.answered, key)
		b.answeredSet[key] = true
	}
	b.mu.Unlock()
	b.sendServer(resultReply(id, body))
}

// swallowCancel reports whether a server's notifications/cancelled refers to a roots/list that
// rootfs answered or is holding; a held one is dropped unanswered.
func (b *Bridge) swallowCancel(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.waiters[key]; w != nil {
		w.timer.Stop()
		delete(b.waiters, key)
		return true
	}
	return b.answeredSet[key]
}

// forwardToServer forwards a client message to the server, or holds a client request or
// notification while the first client roots are being fetched (see releaseHeld). Responses to
// the server's own requests (responses: msg holds nothing else) are never held: the server may
// be waiting for them. What is held was counted by holdReserve when it was routed.
func (b *Bridge) forwardToServer(msg []byte, responses bool) {
	b.mu.Lock()
	if b.holding && !responses {
		b.held = append(b.held, append([]byte(nil), msg...)) // msg points into the line buffer
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	_ = b.toServer.forward(msg) // fails only once the bridge is shutting down or the server broke
}

// isHolding reports whether client messages for the server are being held.
func (b *Bridge) isHolding() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.holding
}

// holdReserve counts a client request or notification of n bytes toward the hold, when messages
// are held, and reports false (nothing counted) if it would pass maxHeld messages or MaxLine
// bytes: the caller then refuses it.
func (b *Bridge) holdReserve(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.holding {
		return true
	}
	if b.heldCount >= maxHeld || b.heldBytes+n > b.opts.MaxLine {
		return false
	}
	b.heldCount++
	b.heldBytes += n
	return true
}

// releaseHeld forwards, in order, what the client sent between its initialized and the first
// roots being settled (fetched, refused, or timed out after RootsTimeout), then stops holding.
// Without the hold, a tool call sent right after initialized would race the roots/list
// round trip and could find an empty view. Messages that arrive while it releases are held
// and released in turn, so order is kept.
func (b *Bridge) releaseHeld() {
	for {
		b.mu.Lock()
		batch := b.held
		b.held = nil
		if len(batch) == 0 {
			b.holding = false
			b.heldCount, b.heldBytes = 0, 0
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.log.Debug("releasing client messages held for the first roots", zap.Int("messages", len(batch)))
		for _, m := range batch {
			_ = b.toServer.forward(m)
		}
	}
}

// wireError is the code and message of a JSON-RPC error object.
type wireError struct {
	Code    int64
	Message string
}

// readError reads a JSON-RPC error object by exact, decoded member names (encoding/json would
// also match "CODE"); of duplicates the last counts, as in JavaScript's JSON.parse.
func readError(raw json.RawMessage) wireError {
	var we wireError
	it := newMemberIter(raw)
	for {
		k, v, ok := it.next()
		if !ok {
			return we
		}
		switch string(k) {
		case "code":
			if isInteger(v) {
				we.Code, _ = strconv.ParseInt(string(v), 10, 64)
			}
		case "message":
			if v[0] == '"' {
				we.Message, _ = decodeString(v)
			}
		}
	}
}
