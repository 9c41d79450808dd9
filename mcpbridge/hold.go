package mcpbridge

// This file is the hold's parts of the roots state machine (see rootsState): the queue of the
// client's held messages, the ping that tells when the server has read its roots, and the settle
// that may follow. Each is guarded by rootsState.mu; rootsState decides how they combine.

import (
	"strconv"
	"time"
)

// noRootsMethods are the client requests that cannot depend on the roots: they do not wait for
// the settle.
var noRootsMethods = map[string]bool{
	"ping": true, methodInitialize: true, "tools/list": true, "prompts/list": true,
	"resources/templates/list": true, "logging/setLevel": true,
}

// holdQueue is the client's messages for the server held for the roots, oldest first, bounded
// by maxHeld messages and maxBytes bytes. A message is counted (reserve) when it is routed, and
// kept (push) once routed: a batch is counted element by element and kept as one message.
// Guarded by rootsState.mu, apart from maxBytes, which never changes.
type holdQueue struct {
	maxBytes int // Options.MaxLine: the hold costs at most one message at the limit

	on           bool // client messages for the server are held
	msgs         []heldMsg
	count, bytes int     // counted by reserve, for what is held or being routed into it
	routed       counted // counted by reserve, not kept yet
	epoch        int     // the current hold's epoch
	release      int     // held messages of epochs up to this one may go
	releasing    bool    // take handed out messages that may not be forwarded yet
}

// heldMsg is one held message, and what reserve counted for it.
type heldMsg struct {
	msg   []byte
	epoch int
	waits bool // may depend on the roots: waits for the settle
	counted
}

type counted struct{ n, bytes int }

func newHoldQueue(maxBytes int) holdQueue {
	return holdQueue{maxBytes: maxBytes, release: -1} // nothing goes before the first release
}

// newEpoch turns the hold on for a change of roots: what is kept from now on waits for the
// release of this epoch.
func (q *holdQueue) newEpoch() {
	q.on = true
	q.epoch++
}

// releaseAll lets the messages of every epoch so far go.
func (q *holdQueue) releaseAll() { q.release = q.epoch }

// allReleased reports whether every epoch so far may go.
func (q *holdQueue) allReleased() bool { return q.release == q.epoch }

func (q *holdQueue) empty() bool { return len(q.msgs) == 0 }

// reserve counts a message of n bytes toward the hold, when it is on, and reports false (nothing
// counted) if that would pass maxHeld messages or maxBytes.
func (q *holdQueue) reserve(n int) bool {
	if !q.on {
		return true
	}
	if q.count >= maxHeld || q.bytes+n > q.maxBytes {
		return false
	}
	q.count++
	q.bytes += n
	q.routed.n++
	q.routed.bytes += n
	return true
}

// unreserve takes back what reserve counted for a message that is not kept after all.
func (q *holdQueue) unreserve() {
	q.count -= q.routed.n
	q.bytes -= q.routed.bytes
	q.routed = counted{}
}

// push keeps a copy of msg (it points into the line buffer) in the current epoch, with what
// reserve counted for it.
func (q *holdQueue) push(msg []byte, waits bool) {
	q.msgs = append(q.msgs, heldMsg{msg: append([]byte(nil), msg...), epoch: q.epoch, waits: waits, counted: q.routed})
	q.routed = counted{}
}

// take returns the messages that may go now, oldest first: those of released epochs, up to the
// first that waits for the settle while settling.
func (q *holdQueue) take(settling bool) [][]byte {
	var out [][]byte
	i := 0
	for ; i < len(q.msgs) && q.msgs[i].epoch <= q.release && !(settling && q.msgs[i].waits); i++ {
		out = append(out, q.msgs[i].msg)
		q.count -= q.msgs[i].n
		q.bytes -= q.msgs[i].bytes
	}
	q.msgs = append(q.msgs[:0:0], q.msgs[i:]...)
	q.releasing = len(out) > 0
	return out
}

// stop turns the hold off once nothing is held.
func (q *holdQueue) stop() {
	q.on = false
	q.count, q.bytes, q.routed = 0, 0, counted{}
}

// drain turns the hold off and returns everything held, oldest first.
func (q *holdQueue) drain() [][]byte {
	out := make([][]byte, 0, len(q.msgs))
	for _, h := range q.msgs {
		out = append(out, h.msg)
	}
	q.msgs, q.on = nil, false
	return out
}

// pingBarrier is rootfs's ping to the server after a swap: its pong means the server has read
// what rootfs sent before it. One is in flight at a time; the pings of one swap end at the latest
// wait after it. Guarded by rootsState.mu, apart from its first three fields, which never change.
type pingBarrier struct {
	prefix    string        // "rootfs-<other nonce>-": every id rootfs sends to the server starts with it
	wait      time.Duration // pingTimeout, or RootsTimeout if shorter
	onTimeout func(msgID)   // run by the timer of a ping the server did not answer

	id     msgID // in flight (null: none)
	timer  *time.Timer
	until  time.Time // the pings of this swap end at the latest then
	seq    int
	asked  bool // the server's roots/list was answered while the ping was in flight
	pongs  int  // pings the server answered
	silent bool // a ping timed out before the server ever answered one: ping no more
}

func (p *pingBarrier) inFlight() bool { return !p.id.isNull() }

// begin starts the pings of a swap: it returns the id of the first.
func (p *pingBarrier) begin() msgID {
	p.until = time.Now().Add(p.wait)
	return p.start()
}

// start returns the id of a new ping (one in flight is replaced: its pong is then ignored),
// timed to end at until.
func (p *pingBarrier) start() msgID {
	if p.timer != nil {
		p.timer.Stop()
	}
	p.seq++
	id := stringID(p.prefix + strconv.Itoa(p.seq))
	p.id, p.asked = id, false
	p.timer = time.AfterFunc(time.Until(p.until), func() { p.onTimeout(id) })
	return id
}

// end ends the ping id, answered (timedOut false) or not in time, and reports whether it was the
// one in flight.
func (p *pingBarrier) end(id msgID, timedOut bool) bool {
	if p.id.isNull() || p.id != id {
		return false
	}
	p.timer.Stop()
	p.id, p.timer = msgID{}, nil
	if !timedOut {
		p.pongs++
	} else if p.pongs == 0 {
		p.silent = true
	}
	return true
}

func (p *pingBarrier) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// settleWindow is the wait after a release during which held requests that may depend on the
// roots keep waiting, when the server fetched roots in that cycle. Guarded by rootsState.mu,
// apart from d and onEnd, which never change.
type settleWindow struct {
	d     time.Duration // Options.RootsSettle; zero: no settle
	onEnd func()        // run by the timer when the settle ends

	served bool      // the server was given roots in this cycle (a settle follows the release)
	until  time.Time // requests that may depend on the roots wait until then
	timer  *time.Timer
}

// begin starts the settle if the server was given roots since the last release (restarting one
// under way), and starts a new cycle.
func (w *settleWindow) begin() {
	if w.served && w.d > 0 {
		if w.timer != nil {
			w.timer.Stop()
		}
		w.until = time.Now().Add(w.d)
		w.timer = time.AfterFunc(w.d, w.onEnd)
	}
	w.served = false
}

// active reports whether the settle lasts at now.
func (w *settleWindow) active(now time.Time) bool { return now.Before(w.until) }

func (w *settleWindow) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}
