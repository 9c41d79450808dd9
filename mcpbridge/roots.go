package mcpbridge

import (
	"strconv"
	"sync"
	"time"
)

// rootsState is the roots state machine. It decides; the Bridge does the I/O its answers call
// for (send a roots/list, answer waiters, ping the server, release held messages, swap the view).
//
//	unknown ──client initialized, roots declared──▶ first fetch ──answer, -32601, timeout──▶ known
//	   └─────client initialized, no roots (static)──────────────────────────────────────▶ known
//	known ──list_changed──▶ fetch (one in flight, one queued) ──answer──▶ swap, list_changed to the server
//
// While the first roots are unknown the server's roots/list wait (waiters, at most maxWaiters).
//
// The hold. From the client's initialized, and again from each list_changed that starts or
// queues a fetch, the client's messages for the server wait in held (at most maxHeld messages
// and MaxLine bytes; responses to the server's requests are never held). They are released, in
// order, once the server has been given the roots:
//
//	initialized / list_changed ──▶ fetch ──▶ swap ──▶ waiters answered, list_changed to the server
//	    ──▶ barrier: rootfs's ping to the server ──pong──▶ the server asked roots/list since? ──yes──▶ ping again
//	                                                                    └──no──▶ release ──▶ settle
//
// A server reads its messages in order, so its pong means it has read everything rootfs sent it
// before the ping: the answers to its roots/list and the list_changed. A server that asks for
// roots when told (on initialized or list_changed) sends that roots/list before the pong, and it
// is answered from the new view; the ping is then sent again, so that the client's held messages
// come after the server has read that answer too. Without it the held messages, released as
// soon as the view had the roots, reached a server that had not asked for them yet, or whose
// answer came after them. The barrier ends at the latest pingTimeout (or RootsTimeout, if
// shorter) after the swap; a server that has never answered a ping by then is not pinged again,
// so a server that ignores ping costs that wait once.
//
// Settle. Having read the answer is not having taken it in: server-filesystem checks each root
// (realpath, stat) asynchronously and meanwhile answers tool calls with the directories it had,
// none at first. No message tells when it is done, so when the server fetched roots in this
// cycle, held requests that may depend on them (all but those in noRootsMethods) wait settle
// more after the release, and so do those that arrive meanwhile; the others go at once unless
// one that waits is ahead of them. It is a bound on the server's work, not a signal from it.
//
// Held messages carry the epoch of the hold they arrived in (each list_changed that holds starts
// one); a release lets go of those up to the epoch that was current when it was decided, so a
// message sent after a later list_changed waits for that change.
type rootsState struct {
	prefix           string // "rootfs-<nonce>-": every id rootfs sends to the client starts with it
	srvPrefix        string // "rootfs-<other nonce>-": every id rootfs sends to the server starts with it
	timeout          time.Duration
	onFetchTimeout   func(msgID)   // run by the timer of a fetch that went unanswered
	onWaiterTimeout  func(msgID)   // run by the timer of a waiter whose roots never came
	onBarrierTimeout func(msgID)   // run by the timer of a barrier the server did not answer
	onSettled        func()        // run by the timer of the settle
	settleFor        time.Duration // the settle (Options.RootsSettle)

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
	// The hold (see above). holding: client messages for the server are kept in held.
	holding              bool
	held                 []heldMsg
	heldCount, heldBytes int     // counted by hold, for what is held or being routed into it
	routed               counted // counted by hold, not kept yet (a batch is kept as one message)
	maxHeldBytes         int
	epoch                int // the current hold's epoch
	release              int // held messages of epochs up to this one may go
	barrier              msgID
	barrierTimer         *time.Timer
	barrierUntil         time.Time // the barrier of this swap ends at the latest then
	barrierSeq           int
	askedDuringBarrier   bool      // the server's roots/list was answered while the barrier was in flight
	pongs                int       // barriers the server answered
	silent               bool      // a barrier timed out before the server ever answered one: ping no more
	served               bool      // the server was given roots in this cycle (settle follows)
	settleUntil          time.Time // requests that may depend on the roots wait until then
	settleTimer          *time.Timer
	releasing            bool // takeHeld handed out messages that may not be forwarded yet
	fetches              int  // roots/list requests sent to the client (tests)
}

// heldMsg is one held message, and what hold counted for it.
type heldMsg struct {
	msg   []byte
	epoch int
	waits bool // may depend on the roots: waits for the settle
	counted
}

// noRootsMethods are the client requests that cannot depend on the roots: they do not wait for
// the settle.
var noRootsMethods = map[string]bool{
	"ping": true, methodInitialize: true, "tools/list": true, "prompts/list": true,
	"resources/templates/list": true, "logging/setLevel": true,
}

type counted struct{ n, bytes int }

// holdForRoots turns the hold on. Only negative controls turn it off (export_test.go, and the
// test-only build tag rootfs_control_nohold).
var holdForRoots = true

func newRootsState(prefix, srvPrefix string, timeout, settle time.Duration, maxHeldBytes int) *rootsState {
	return &rootsState{
		prefix: prefix, srvPrefix: srvPrefix, timeout: timeout, settleFor: settle, maxHeldBytes: maxHeldBytes,
		waiters: map[msgID]*time.Timer{}, answeredSet: map[msgID]bool{},
		release: -1, // nothing goes before the first release
	}
}

// declare notes the roots capability of the client's initialize.
func (s *rootsState) declare(roots, listChanged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clientRoots, s.clientListChanged = roots, listChanged
}

// initialize marks the client initialized (ok is false if it already was) and reports whether to
// fetch its roots. Client messages are held from now on until the server has its first roots.
func (s *rootsState) initialize() (fetch, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.initialized {
		return false, false
	}
	s.initialized = true
	s.holding = holdForRoots
	return s.clientRoots, true
}

// requestFetch coalesces fetches: at most one roots/list in flight and one queued. It returns
// the id of a roots/list to send now (null: none; why says why not, when it is not queued).
// A fetch started or queued starts a new epoch of the hold: what the client sends from now on
// waits until the server has the roots it announced.
func (s *rootsState) requestFetch() (id msgID, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.initialized || !s.clientRoots:
		return msgID{}, "client not initialized or declared no roots"
	case s.unsupported:
		return msgID{}, "client does not support roots/list"
	}
	if holdForRoots {
		s.holding = true
		s.epoch++
	}
	if !s.fetch.isNull() {
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

// settle ends a fetch (answered, refused or timed out) and marks the first roots known. It
// returns whether they were not known before, the waiters to answer now, the id of a queued
// fetch to send now (null: none), and, when messages are held and no fetch follows, the id of
// the barrier ping to send the server after the waiters' answers and any list_changed (null:
// none), or, with a server that does not answer pings, release: release the held messages
// after those.
func (s *rootsState) settle() (first bool, waiters []msgID, next, barrier msgID, release bool) {
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
	s.served = s.served || len(waiters) > 0
	switch {
	case !s.holding || !s.fetch.isNull():
	case s.silent:
		s.releaseLocked()
		release = true
	default:
		s.barrierUntil = time.Now().Add(min(s.timeout, pingTimeout))
		barrier = s.startBarrierLocked()
	}
	return first, waiters, next, barrier, release
}

// startBarrierLocked starts a barrier ping (replacing one in flight, whose pong is then ignored),
// timed to end at barrierUntil.
func (s *rootsState) startBarrierLocked() msgID {
	if s.barrierTimer != nil {
		s.barrierTimer.Stop()
	}
	s.barrierSeq++
	id := stringID(s.srvPrefix + strconv.Itoa(s.barrierSeq))
	s.barrier, s.askedDuringBarrier = id, false
	s.barrierTimer = time.AfterFunc(time.Until(s.barrierUntil), func() { s.onBarrierTimeout(id) })
	return id
}

// endBarrier ends the barrier id, answered by the server (timedOut false) or not in time. It
// reports whether id was the barrier in flight, the id of the next barrier ping to send (null:
// none), and whether to release the held messages now.
func (s *rootsState) endBarrier(id msgID, timedOut bool) (current bool, next msgID, release bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.barrier.isNull() || s.barrier != id {
		return false, msgID{}, false
	}
	s.barrierTimer.Stop()
	s.barrier, s.barrierTimer = msgID{}, nil
	if !timedOut {
		s.pongs++
	} else if s.pongs == 0 {
		s.silent = true
	}
	switch {
	case !s.fetch.isNull() || s.fetchQueued:
		// The client announced another change: its settle starts a new barrier.
		return true, msgID{}, false
	case s.askedDuringBarrier && !timedOut && time.Now().Before(s.barrierUntil):
		return true, s.startBarrierLocked(), false
	}
	s.releaseLocked()
	return true, msgID{}, true
}

// releaseLocked lets the held messages of the epochs so far go, and starts the settle when the
// server fetched roots in this cycle.
func (s *rootsState) releaseLocked() {
	s.release = s.epoch
	if s.served && s.settleFor > 0 {
		if s.settleTimer != nil {
			s.settleTimer.Stop()
		}
		s.settleUntil = time.Now().Add(s.settleFor)
		s.settleTimer = time.AfterFunc(s.settleFor, s.onSettled)
	}
	s.served = false
}

// wait makes the server's roots/list id wait for the first roots. It reports answerNow when they
// are known, and refused when maxWaiters already wait. A waiting id sent again waits once.
func (s *rootsState) wait(id msgID) (answerNow, refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known {
		if !s.barrier.isNull() {
			s.askedDuringBarrier, s.served = true, true
		}
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
	s.routed.n++
	s.routed.bytes += n
	return true
}

// keep holds a copy of msg if messages are held and it is not only responses (responses to the
// server's own requests are never held: the server may be waiting for them), and reports whether
// it did. What is held was counted by hold when it was routed. waits: msg may depend on the
// roots (see noRootsMethods); during the settle one that need not wait, with nothing ahead of
// it, is not held.
func (s *rootsState) keep(msg []byte, responses, waits bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.holding || responses {
		return false
	}
	if !waits && len(s.held) == 0 && !s.releasing && s.release == s.epoch && s.barrier.isNull() && s.fetch.isNull() && !s.fetchQueued {
		// Not held after all: what hold counted for it is not either.
		s.heldCount -= s.routed.n
		s.heldBytes -= s.routed.bytes
		s.routed = counted{}
		return false
	}
	// msg points into the line buffer: copy it.
	s.held = append(s.held, heldMsg{msg: append([]byte(nil), msg...), epoch: s.epoch, waits: waits, counted: s.routed})
	s.routed = counted{}
	return true
}

// takeHeld returns the held messages that may go now, oldest first: those of released epochs,
// up to the first that waits for the settle while it lasts. The caller forwards them and calls
// again. When none is left and nothing holds them any more (no fetch, no barrier, no later epoch,
// no settle), the hold stops.
func (s *rootsState) takeHeld() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	settling := time.Now().Before(s.settleUntil)
	var out [][]byte
	i := 0
	for ; i < len(s.held) && s.held[i].epoch <= s.release && !(settling && s.held[i].waits); i++ {
		out = append(out, s.held[i].msg)
		s.heldCount -= s.held[i].n
		s.heldBytes -= s.held[i].bytes
	}
	s.held = append(s.held[:0:0], s.held[i:]...)
	s.releasing = len(out) > 0
	if len(s.held) == 0 && !settling && s.known && s.fetch.isNull() && !s.fetchQueued && s.barrier.isNull() && s.release == s.epoch {
		s.holding = false
		s.heldCount, s.heldBytes, s.routed = 0, 0, counted{}
	}
	return out
}

// drainHeld stops the hold and returns everything held, oldest first (the client has gone).
func (s *rootsState) drainHeld() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, 0, len(s.held))
	for _, h := range s.held {
		out = append(out, h.msg)
	}
	s.held, s.holding = nil, false
	return out
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
	if s.barrierTimer != nil {
		s.barrierTimer.Stop()
	}
	if s.settleTimer != nil {
		s.settleTimer.Stop()
	}
	for _, t := range s.waiters {
		t.Stop()
	}
}
