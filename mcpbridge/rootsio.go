package mcpbridge

// This file is the Bridge's side of the roots: the I/O the state machine in roots.go calls for
// (send a roots/list, answer the server's, ping the server, release held messages, install the
// view). rootsState decides under its lock; these do the I/O after it is released.

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/rootset"
)

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
	} else if roots, err := b.parseRoots(e.result); errors.Is(err, rootset.ErrTooManyRoots) {
		// One line that says which bound refused the answer and what the server is left
		// with: before the first answer that is the static roots, or none.
		b.log.Warn("refused the client's roots/list answer whole: more roots than max_roots; the server keeps the roots it had",
			zap.Error(err), zap.Int("max_roots", maxRoots), zap.Int("roots_kept", len(b.opts.Installer.Table().Entries())))
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
// a queued fetch, tells the server when a later swap changed its roots, and then starts the
// barrier that releases the held messages (in that order: the server reads them in order).
func (b *Bridge) settle(changed bool) {
	first, waiters, next, barrier, release := b.roots.settle()
	b.sendFetch(next)
	for _, id := range waiters {
		b.answerRoots(id)
	}
	if changed && !first {
		b.sendServer(notificationLine(methodRootsChanged, nil))
	}
	b.sendBarrier(barrier)
	if release {
		b.releaseHeld()
	}
}

// sendBarrier sends the server rootfs's ping id (null: none), which the hold waits for.
func (b *Bridge) sendBarrier(id msgID) {
	if id.isNull() {
		return
	}
	b.sendServer(requestLine(id, "ping", nil))
}

// barrierReply handles the server's answer (a result or an error: either way it has read what
// came before) to rootfs's ping id. It runs on the server loop.
func (b *Bridge) barrierReply(id msgID) {
	current, next, release := b.roots.endBarrier(id, false)
	if !current {
		b.log.Debug("dropped a late reply to rootfs's ping", zap.Stringer("id", id))
		return
	}
	b.log.Debug("server answered rootfs's ping", zap.Stringer("id", id), zap.Bool("again", !next.isNull()), zap.Bool("release", release))
	b.sendBarrier(next)
	if release {
		// Not on the server loop: forwarding blocks while the server does not read, and
		// the server may be blocked writing to rootfs.
		go b.releaseHeldLocked()
	}
}

func (b *Bridge) barrierTimedOut(id msgID) {
	b.hmu.RLock()
	defer b.hmu.RUnlock()
	if b.isDone() {
		return
	}
	if current, _, release := b.roots.endBarrier(id, true); current {
		b.log.Warn("server did not answer rootfs's ping in time; releasing the client's messages held for the roots",
			zap.Duration("timeout", min(b.opts.RootsTimeout, pingTimeout)))
		if release {
			b.releaseHeld()
		}
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

// install installs roots, with the pinned ones, into the view (Installer.Install builds the table
// under the view's rules).
func (b *Bridge) install(roots []rootset.Root, source string) bool {
	t, err := b.opts.Installer.Install(rootset.UnionRoots(roots, b.opts.Pinned))
	if b.opts.Installed != nil {
		b.opts.Installed(source, t, err)
	}
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

// parseRoots decodes a ListRootsResult (rootset.DecodeRoots, at most maxRoots roots). Malformed
// entries are dropped and logged; a malformed result as a whole is refused (nothing is ever
// added from it).
func (b *Bridge) parseRoots(result json.RawMessage) ([]rootset.Root, error) {
	roots, dropped, err := rootset.DecodeRoots(result, maxRoots)
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
		b.refused.waiters.add(b.log, "refused a server roots/list: too many waiting for the first roots", zap.Int("max_waiters", maxWaiters))
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
	entries := b.opts.Installer.Table().Entries()
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

// forwardToServer forwards a client message to the server, or holds it while the server is
// given the roots (see rootsState.keep and releaseHeld). responses: msg holds only responses to
// the server's requests; waits: it may depend on the roots.
func (b *Bridge) forwardToServer(msg []byte, responses, waits bool) {
	if b.roots.keep(msg, responses, waits) {
		return
	}
	_ = b.toServer.forward(msg) // fails only once the bridge is shutting down or the server broke
}

// releaseHeldLocked is releaseHeld under the handler lock, for a goroutine of its own (and the
// settle's timer).
func (b *Bridge) releaseHeldLocked() {
	b.hmu.RLock()
	defer b.hmu.RUnlock()
	if !b.isDone() {
		b.releaseHeld()
	}
}

// releaseHeld forwards, in order, what the client sent while the server was being given its
// roots (see rootsState), and stops holding when nothing holds the rest. Without the hold, a
// tool call sent right after initialized or list_changed would reach the server before it had
// the roots, and find none or the old ones. Messages that arrive while it releases are held and
// released in turn, so order is kept; relMu keeps two releases from interleaving.
func (b *Bridge) releaseHeld() {
	b.relMu.Lock()
	defer b.relMu.Unlock()
	for {
		held := b.roots.takeHeld()
		if len(held) == 0 {
			return
		}
		b.log.Debug("releasing client messages held for the roots", zap.Int("messages", len(held)))
		for _, m := range held {
			_ = b.toServer.forward(m)
		}
	}
}
