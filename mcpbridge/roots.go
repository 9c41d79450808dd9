package mcpbridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/rootfs-dev/rootfs/vfs"
	"go.uber.org/zap"
)

// rootsState is the roots state machine. It decides; the Bridge does the I/O its answers call
// for (send a roots/list, answer waiters, release held messages, swap the view).
//
//	unknown ──client initialized, roots declared──▶ first fetch ──answer, -32601, timeout──▶ known
//	   └─────client initialized, no roots (static)──────────────────────────────────────▶ known
//	known ──list_changed──▶ fetch (one in flight, one queued) ──answer──▶ swap, list_changed to the server
//
// While the first roots are unknown the server's roots/list wait (waiters, at most maxWaiters),
// and once the first fetch has started the client's messages for the server are held (at most
// maxHeld messages and MaxLine bytes).
type rootsState struct {
	prefix          string // "rootfs-<nonce>-": every id rootfs sends to the client starts with it
	timeout         time.Duration
	onFetchTimeout  func(msgID) // run by the timer of a fetch that went unanswered
	onWaiterTimeout func(msgID) // run by the timer of a waiter whose roots never came

	// mu guards the fields that follow.
	mu sync.Mutex
	// clientRoots: the client's initialize declared an object "roots" capability.
	clientRoots, clientListChanged bool
	initialized                    bool // client sent notifications/initialized
	unsupported                    bool // client answered roots/list with -32601
	known                          bool // first roots settled (fetched, fallen back, or timed out)
	seq                            int
	fetch                          msgID // rootfs's roots/list in flight (null: none)
	fetchTimer                     *time.Timer
	fetchQueued                    bool
	waiters                        map[msgID]*time.Timer // server roots/list waiting for the first roots
	answered                       []msgID               // recent rootfs-answered server ids (ring)
	answeredSet                    map[msgID]bool
	warnedEmpty                    bool
	// holding: the first client roots are being fetched; client messages for the server wait
	// in held (in order) so that a request sent right after initialized sees those roots.
	holding              bool
	held                 [][]byte
	heldCount, heldBytes int // counted by hold (bounded by maxHeld and maxHeldBytes)
	maxHeldBytes         int
	fetches              int // roots/list requests sent to the client (tests)
}

func newRootsState(prefix string, timeout time.Duration, maxHeldBytes int) *rootsState {
	return &rootsState{
		prefix: prefix, timeout: timeout, maxHeldBytes: maxHeldBytes,
		waiters: map[msgID]*time.Timer{}, answeredSet: map[msgID]bool{},
	}
}

// declare notes the roots capability of the client's initialize.
func (s *rootsState) declare(roots, listChanged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clientRoots, s.clientListChanged = roots, listChanged
}

// initialize marks the client initialized (ok is false if it already was) and reports whether to
// fetch its roots; if so, client messages are held from now on.
func (s *rootsState) initialize() (fetch, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.initialized {
		return false, false
	}
	s.initialized = true
	s.holding = s.clientRoots
	return s.clientRoots, true
}

// requestFetch coalesces fetches: at most one roots/list in flight and one queued. It returns
// the id of a roots/list to send now (null: none; why says why not, when it is not queued).
func (s *rootsState) requestFetch() (id msgID, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.initialized || !s.clientRoots:
		return msgID{}, "client not initialized or declared no roots"
	case s.unsupported:
		return msgID{}, "client does not support roots/list"
	case !s.fetch.isNull():
		s.fetchQueued = true
		return msgID{}, ""
	}
	return s.startLocked(), ""
}

func (s *rootsState) startLocked() msgID {
	s.seq++
	s.fetches++
	id := stringID(s.prefix + strconv.Itoa(s.seq))
	s.fetch = id
	s.fetchTimer = time.AfterFunc(s.timeout, func() { s.onFetchTimeout(id) })
	return id
}

// endFetch ends the fetch id and reports whether it was the one in flight.
func (s *rootsState) endFetch(id msgID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fetch.isNull() || s.fetch != id {
		return false
	}
	s.fetchTimer.Stop()
	s.fetch, s.fetchTimer = msgID{}, nil
	return true
}

func (s *rootsState) setUnsupported() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsupported = true
}

// settle marks the first roots known. It returns whether they were not known before, the
// waiters to answer now, and the id of a queued fetch to send now (null: none).
func (s *rootsState) settle() (first bool, waiters []msgID, next msgID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first = !s.known
	s.known = true
	for id, t := range s.waiters {
		t.Stop()
		waiters = append(waiters, id)
	}
	clear(s.waiters)
	if s.fetch.isNull() && s.fetchQueued {
		s.fetchQueued = false
		if !s.unsupported {
			next = s.startLocked()
		}
	}
	return first, waiters, next
}

// wait makes the server's roots/list id wait for the first roots. It reports answerNow when they
// are known, and refused when maxWaiters already wait. A waiting id sent again waits once.
func (s *rootsState) wait(id msgID) (answerNow, refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known {
		return true, false
	}
	old := s.waiters[id]
	if old == nil && len(s.waiters) >= maxWaiters {
		return false, true
	}
	if old != nil {
		old.Stop()
	}
	s.waiters[id] = time.AfterFunc(s.timeout, func() { s.onWaiterTimeout(id) })
	return false, false
}

// waiterTimedOut removes the waiter id and reports whether it was waiting.
func (s *rootsState) waiterTimedOut(id msgID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.waiters[id]
	delete(s.waiters, id)
	return ok
}

// answered notes that rootfs answered the server's roots/list id (the last answeredMemory).
func (s *rootsState) remember(id msgID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answeredSet[id] {
		return
	}
	if len(s.answered) >= answeredMemory {
		delete(s.answeredSet, s.answered[0])
		s.answered = s.answered[1:]
	}
	s.answered = append(s.answered, id)
	s.answeredSet[id] = true
}

// swallowCancel reports whether a server's notifications/cancelled refers to a roots/list that
// rootfs answered or holds; a held one is dropped unanswered.
func (s *rootsState) swallowCancel(id msgID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.waiters[id]; t != nil {
		t.Stop()
		delete(s.waiters, id)
		return true
	}
	return s.answeredSet[id]
}

func (s *rootsState) isHolding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holding
}

// hold counts a client request or notification of n bytes toward the hold, when messages are
// held, and reports false (nothing counted) if it would pass maxHeld messages or maxHeldBytes:
// the caller then refuses it.
func (s *rootsState) hold(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.holding {
		return true
	}
	if s.heldCount >= maxHeld || s.heldBytes+n > s.maxHeldBytes {
		return false
	}
	s.heldCount++
	s.heldBytes += n
	return true
}

// keep holds a copy of msg if messages are held and it is not only responses (responses to the
// server's own requests are never held: the server may be waiting for them), and reports whether
// it did. What is held was counted by hold when it was routed.
func (s *rootsState) keep(msg []byte, responses bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.holding || responses {
		return false
	}
	s.held = append(s.held, append([]byte(nil), msg...)) // msg points into the line buffer
	return true
}

// takeHeld returns what is held, oldest first; when nothing is, holding stops.
func (s *rootsState) takeHeld() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.held
	s.held = nil
	if len(held) == 0 {
		s.holding = false
		s.heldCount, s.heldBytes = 0, 0
	}
	return held
}

// warnEmptyOnce reports true the first time it is called.
func (s *rootsState) warnEmptyOnce() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	warn := !s.warnedEmpty
	s.warnedEmpty = true
	return warn
}

func (s *rootsState) fetchCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

func (s *rootsState) stopTimers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fetchTimer != nil {
		s.fetchTimer.Stop()
	}
	for _, t := range s.waiters {
		t.Stop()
	}
}

// ---- the Bridge's side: the I/O the state machine calls for ----

// onInitialized runs after the client's notifications/initialized has been forwarded.
func (b *Bridge) onInitialized() {
	fetch, ok := b.roots.initialize()
	switch {
	case !ok:
	case fetch:
		b.requestFetch()
	default:
		b.useStatic("the client declared no roots capability")
		b.settle(false)
	}
}

// requestFetch asks the client for its roots (see rootsState.requestFetch).
func (b *Bridge) requestFetch() {
	id, why := b.roots.requestFetch()
	if why != "" {
		b.log.Debug("ignored roots list_changed: " + why)
	}
	b.sendFetch(id)
}

func (b *Bridge) sendFetch(id msgID) {
	if id.isNull() {
		return
	}
	if err := b.toClient.send(requestLine(id, methodRootsList, nil)); err != nil && !errors.Is(err, errQueueStopped) {
		b.log.Warn("could not send roots/list to the client", zap.Error(err))
	}
}

func (b *Bridge) fetchTimedOut(id msgID) {
	b.hmu.RLock()
	defer b.hmu.RUnlock()
	if b.isDone() || !b.roots.endFetch(id) {
		return
	}
	b.log.Warn("client did not answer roots/list in time; keeping the previous view",
		zap.Duration("timeout", b.opts.RootsTimeout))
	params := append(append([]byte(`{"requestId":`), id.appendJSON(nil)...), `,"reason":"rootfs: roots/list timed out"}`...)
	b.sendClient(notificationLine(methodCancelled, params))
	b.settle(false)
}

// handleFetchReply handles the client's answer to rootfs's roots/list (runs on the client loop).
func (b *Bridge) handleFetchReply(e *envelope) {
	if !b.roots.endFetch(e.id) {
		b.log.Warn("dropped a late or unknown reply to rootfs's roots/list", zap.Stringer("id", e.id))
		return
	}
	changed := false
	if e.errRaw != nil {
		we := readError(e.errRaw)
		if we.Code == codeMethodNotFound {
			b.roots.setUnsupported()
			changed = b.useStatic("the client answered roots/list with method not found")
		} else {
			b.log.Warn("client roots/list failed; keeping the previous view",
				zap.Int64("code", we.Code), zap.String("message", we.Message))
		}
	} else if roots, err := b.parseRoots(e.result); errors.Is(err, vfs.ErrTooManyRoots) {
		// One line that says which bound refused the answer and what the server is left
		// with: before the first answer that is the static roots, or none.
		b.log.Warn("refused the client's roots/list answer whole: more roots than max_roots; the server keeps the roots it had",
			zap.Error(err), zap.Int("max_roots", maxRoots), zap.Int("roots_kept", len(b.opts.View.Table().Entries())))
	} else if err != nil {
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
	first, waiters, next := b.roots.settle()
	b.sendFetch(next)
	if first {
		b.releaseHeld()
	}
	for _, id := range waiters {
		b.answerRoots(id)
	}
	if changed && !first {
		b.sendServer(notificationLine(methodRootsChanged, nil))
	}
}

// useStatic installs the static roots.
func (b *Bridge) useStatic(reason string) bool {
	if len(b.opts.Static) == 0 && len(b.opts.Pinned) == 0 && b.opts.NoRoots != nil {
		b.log.Error("no roots from anywhere; stopping", zap.String("reason", reason), zap.Error(b.opts.NoRoots))
		b.end(true, b.opts.NoRoots)
		return false
	}
	if len(b.opts.Static) == 0 && len(b.opts.Pinned) == 0 {
		if b.roots.warnEmptyOnce() {
			b.log.Warn("no roots: the server sees no files (give --root or --roots-file, or use a client with roots)",
				zap.String("reason", reason))
		}
	} else {
		b.log.Debug("using the static roots", zap.String("reason", reason), zap.Int("roots", len(b.opts.Static)))
	}
	return b.install(b.opts.Static, "static")
}

// install installs roots, with the pinned ones, into the view (View.Install builds the table
// under the view's rules).
func (b *Bridge) install(roots []vfs.Root, source string) bool {
	t, err := b.opts.View.Install(vfs.UnionRoots(roots, b.opts.Pinned))
	for _, s := range t.Skipped() {
		b.log.Warn("root skipped", zap.String("source", source), s.Root.LogField(), zap.Error(s.Reason))
	}
	if err != nil {
		b.log.Error("view swap failed; keeping the previous view", zap.Error(err))
		return false
	}
	for _, e := range t.Entries() {
		if e.Displaced != nil {
			b.log.Warn("root not at its own path", e.Root.LogField(), zap.String("in_view", e.InView()), zap.String("reason", e.Displaced.Error()))
		}
	}
	b.log.Debug("roots installed", zap.String("source", source), zap.Int("entries", len(t.Entries())),
		zap.Int("skipped", len(t.Skipped())))
	return true
}

// parseRoots decodes a ListRootsResult (vfs.DecodeRoots, at most maxRoots roots). Malformed
// entries are dropped and logged; a malformed result as a whole is refused (nothing is ever
// added from it).
func (b *Bridge) parseRoots(result json.RawMessage) ([]vfs.Root, error) {
	roots, dropped, err := vfs.DecodeRoots(result, maxRoots)
	for _, d := range dropped {
		b.log.Warn("dropped a malformed root", zap.String("why", d.Error()))
	}
	return roots, err
}

// serverRootsList answers the server's roots/list from the current table, or waits (at most
// RootsTimeout) for the first roots.
func (b *Bridge) serverRootsList(e *envelope) {
	if len(e.rawID) > maxIDLen {
		b.sendServer(errorReply(e.id, codeInvalidRequest,
			fmt.Sprintf("invalid request: an id of %d bytes; rootfs keeps ids of at most %d (use a shorter id)", len(e.rawID), maxIDLen), nil))
		return
	}
	answerNow, refused := b.roots.wait(e.id)
	switch {
	case refused:
		b.refusedWaiters.add(b.log, "refused a server roots/list: too many waiting for the first roots", zap.Int("max_waiters", maxWaiters))
		b.sendServer(errorReply(e.id, codeLimit, fmt.Sprintf(
			"rootfs: %d roots/list requests already wait for the client's first roots; retry once initialization is complete", maxWaiters), nil))
	case answerNow:
		b.answerRoots(e.id)
	}
}

func (b *Bridge) waiterTimedOut(id msgID) {
	b.hmu.RLock()
	defer b.hmu.RUnlock()
	if b.isDone() || !b.roots.waiterTimedOut(id) {
		return
	}
	b.log.Warn("roots not known in time; answered the server's roots/list with the current view")
	b.answerRoots(id)
}

type wireRoot struct {
	URI  string          `json:"uri"`
	Name string          `json:"name,omitempty"`
	Meta json.RawMessage `json:"_meta,omitempty"`
}

func (b *Bridge) answerRoots(id msgID) {
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
	b.roots.remember(id)
	b.sendServer(resultReply(id, body))
}

// forwardToServer forwards a client message to the server, or holds it while the first client
// roots are being fetched (see rootsState.keep and releaseHeld). responses: msg holds only
// responses to the server's requests.
func (b *Bridge) forwardToServer(msg []byte, responses bool) {
	if b.roots.keep(msg, responses) {
		return
	}
	_ = b.toServer.forward(msg) // fails only once the bridge is shutting down or the server broke
}

// releaseHeld forwards, in order, what the client sent between its initialized and the first
// roots being settled (fetched, refused, or timed out after RootsTimeout), then stops holding.
// Without the hold, a tool call sent right after initialized would race the roots/list
// round trip and could find an empty view. Messages that arrive while it releases are held
// and released in turn, so order is kept.
func (b *Bridge) releaseHeld() {
	for {
		held := b.roots.takeHeld()
		if len(held) == 0 {
			return
		}
		b.log.Debug("releasing client messages held for the first roots", zap.Int("messages", len(held)))
		for _, m := range held {
			_ = b.toServer.forward(m)
		}
	}
}
