package mcpbridge

import (
	"strconv"
	"sync"
	"time"

	"github.com/rootfs-dev/rootfs/internal/control"
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
// queues a fetch, the client's messages for the server wait in the hold queue (at most maxHeld
// messages and MaxLine bytes; responses to the server's requests are never held). They are
// released, in order, once the server has been given the roots:
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
//
// Its state is in parts, one per job, all under mu: what the client said (rootsClient), rootfs's
// roots/list to the client (fetcher), the server's roots/list (waiters), the client's held
// messages (holdQueue), the ping that ends the hold (pingBarrier) and the settle that may follow
// (settleWindow). The transitions read and change several parts at once (a settle answers the
// waiters, starts a queued fetch and a ping; a release frees the queue and starts the settle), so
// the parts share the one lock rather than have one each: the invariants are between them.
type rootsState struct {
	// mu guards the fields that follow, and so every part's fields: a part's methods are called
	// with mu held. (The hooks, prefixes and durations in the parts are set by newRootsState and
	// never change.)
	mu          sync.Mutex
	known       bool         // first roots settled (fetched, fallen back, or timed out)
	warnedEmpty bool         // the warning that the server sees no roots was logged
	client      rootsClient  // what the client said about roots
	fetch       fetcher      // rootfs's roots/list to the client
	waiters     waiters      // the server's roots/list: waiting for the first roots, answered
	queue       holdQueue    // the client's messages held for the roots
	barrier     pingBarrier  // rootfs's ping to the server, which ends the hold
	settling    settleWindow // the wait after a release for a server that takes roots in slowly
}

// rootsHooks are what the state machine's timers run: the Bridge's handlers, which take the
// Bridge's handler lock, then call back into the rootsState.
type rootsHooks struct {
	fetchTimeout   func(msgID) // a fetch went unanswered
	waiterTimeout  func(msgID) // a waiter's roots never came
	barrierTimeout func(msgID) // the server did not answer the ping
	settled        func()      // the settle ended
}

func newRootsState(prefix, srvPrefix string, timeout, settle time.Duration, maxHeldBytes int, hooks rootsHooks) *rootsState {
	return &rootsState{
		fetch:    fetcher{prefix: prefix, timeout: timeout, onTimeout: hooks.fetchTimeout},
		waiters:  newWaiters(timeout, hooks.waiterTimeout),
		queue:    newHoldQueue(maxHeldBytes),
		barrier:  pingBarrier{prefix: srvPrefix, wait: min(timeout, pingTimeout), onTimeout: hooks.barrierTimeout},
		settling: settleWindow{d: settle, onEnd: hooks.settled},
	}
}

// rootsClient is what the client said about roots. Guarded by rootsState.mu.
type rootsClient struct {
	roots       bool // its initialize declared an object "roots" capability
	listChanged bool // ... with listChanged true
	initialized bool // it sent notifications/initialized
	unsupported bool // it answered roots/list with -32601
}

// fetcher is rootfs's roots/list to the client: at most one in flight, and one queued behind it
// however many list_changed arrive. Guarded by rootsState.mu, apart from its first three fields,
// which never change.
type fetcher struct {
	prefix    string        // "rootfs-<nonce>-": every id rootfs sends to the client starts with it
	timeout   time.Duration // how long the client has to answer (Options.RootsTimeout)
	onTimeout func(msgID)   // run by the timer of a fetch that went unanswered

	id     msgID // in flight (null: none)
	timer  *time.Timer
	queued bool
	seq    int
	count  int // roots/list requests sent to the client (tests)
}

func (f *fetcher) inFlight() bool { return !f.id.isNull() }

// idle reports whether no fetch is in flight or queued.
func (f *fetcher) idle() bool { return f.id.isNull() && !f.queued }

// start sends a fetch: it returns the id of the roots/list to send, timed by timeout.
func (f *fetcher) start() msgID {
	f.seq++
	f.count++
	id := stringID(f.prefix + strconv.Itoa(f.seq))
	f.id = id
	f.timer = time.AfterFunc(f.timeout, func() { f.onTimeout(id) })
	return id
}

// end ends the fetch id and reports whether it was the one in flight.
func (f *fetcher) end(id msgID) bool {
	if f.id.isNull() || f.id != id {
		return false
	}
	f.timer.Stop()
	f.id, f.timer = msgID{}, nil
	return true
}

func (f *fetcher) stop() {
	if f.timer != nil {
		f.timer.Stop()
	}
}

// waiters are the server's roots/list that rootfs answers: those waiting for the first roots (at
// most maxWaiters, each for at most timeout), and the ids of the last answeredMemory answered,
// so that a late cancel of one is swallowed. Guarded by rootsState.mu, apart from timeout and
// onTimeout, which never change.
type waiters struct {
	timeout   time.Duration // how long one waits (Options.RootsTimeout)
	onTimeout func(msgID)   // run by the timer of a waiter whose roots never came

	waiting     map[msgID]*time.Timer
	answered    []msgID // ring, oldest first
	answeredSet map[msgID]bool
}

func newWaiters(timeout time.Duration, onTimeout func(msgID)) waiters {
	return waiters{timeout: timeout, onTimeout: onTimeout, waiting: map[msgID]*time.Timer{}, answeredSet: map[msgID]bool{}}
}

// add makes id wait, timed by timeout, and reports false (nothing kept) when maxWaiters other ids
// already wait. An id that waits already waits once, timed from now.
func (w *waiters) add(id msgID) bool {
	old := w.waiting[id]
	if old == nil && len(w.waiting) >= maxWaiters {
		return false
	}
	if old != nil {
		old.Stop()
	}
	w.waiting[id] = time.AfterFunc(w.timeout, func() { w.onTimeout(id) })
	return true
}

// takeAll stops every wait and returns the ids that waited (in no particular order).
func (w *waiters) takeAll() []msgID {
	var out []msgID
	for id, t := range w.waiting {
		t.Stop()
		out = append(out, id)
	}
	clear(w.waiting)
	return out
}

// timedOut removes the waiter id and reports whether it was waiting.
func (w *waiters) timedOut(id msgID) bool {
	_, ok := w.waiting[id]
	delete(w.waiting, id)
	return ok
}

// remember notes that rootfs answered id, forgetting the oldest past answeredMemory.
func (w *waiters) remember(id msgID) {
	if w.answeredSet[id] {
		return
	}
	if len(w.answered) >= answeredMemory {
		delete(w.answeredSet, w.answered[0])
		w.answered = w.answered[1:]
	}
	w.answered = append(w.answered, id)
	w.answeredSet[id] = true
}

// cancel reports whether a cancel of id refers to a roots/list rootfs answered or holds; one
// that waits stops waiting, unanswered.
func (w *waiters) cancel(id msgID) bool {
	if t := w.waiting[id]; t != nil {
		t.Stop()
		delete(w.waiting, id)
		return true
	}
	return w.answeredSet[id]
}

func (w *waiters) stop() {
	for _, t := range w.waiting {
		t.Stop()
	}
}

// declare notes the roots capability of the client's initialize.
func (s *rootsState) declare(roots, listChanged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.client.roots, s.client.listChanged = roots, listChanged
}

// initialize marks the client initialized (ok is false if it already was) and reports whether to
// fetch its roots. Client messages are held from now on until the server has its first roots.
func (s *rootsState) initialize() (fetch, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client.initialized {
		return false, false
	}
	s.client.initialized = true
	s.queue.on = !control.On(control.NoRootsHold)
	return s.client.roots, true
}

// requestFetch coalesces fetches: at most one roots/list in flight and one queued. It returns
// the id of a roots/list to send now (null: none; why says why not, when it is not queued).
// A fetch started or queued starts a new epoch of the hold: what the client sends from now on
// waits until the server has the roots it announced.
func (s *rootsState) requestFetch() (id msgID, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.client.initialized || !s.client.roots:
		return msgID{}, "client not initialized or declared no roots"
	case s.client.unsupported:
		return msgID{}, "client does not support roots/list"
	}
	if !control.On(control.NoRootsHold) {
		s.queue.newEpoch()
	}
	if s.fetch.inFlight() {
		s.fetch.queued = true
		return msgID{}, ""
	}
	return s.fetch.start(), ""
}

// endFetch ends the fetch id and reports whether it was the one in flight.
func (s *rootsState) endFetch(id msgID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetch.end(id)
}

func (s *rootsState) setUnsupported() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.client.unsupported = true
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
	waiters = s.waiters.takeAll()
	if !s.fetch.inFlight() && s.fetch.queued {
		s.fetch.queued = false
		if !s.client.unsupported {
			next = s.fetch.start()
		}
	}
	s.settling.served = s.settling.served || len(waiters) > 0
	switch {
	case !s.queue.on || s.fetch.inFlight():
	case s.barrier.silent:
		s.releaseLocked()
		release = true
	default:
		barrier = s.barrier.begin()
	}
	return first, waiters, next, barrier, release
}

// endBarrier ends the barrier id, answered by the server (timedOut false) or not in time. It
// reports whether id was the barrier in flight, the id of the next barrier ping to send (null:
// none), and whether to release the held messages now.
func (s *rootsState) endBarrier(id msgID, timedOut bool) (current bool, next msgID, release bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.barrier.end(id, timedOut) {
		return false, msgID{}, false
	}
	switch {
	case !s.fetch.idle():
		// The client announced another change: its settle starts a new barrier.
		return true, msgID{}, false
	case s.barrier.asked && !timedOut && time.Now().Before(s.barrier.until):
		return true, s.barrier.start(), false
	}
	s.releaseLocked()
	return true, msgID{}, true
}

// releaseLocked lets the held messages of the epochs so far go, and starts the settle when the
// server fetched roots in this cycle.
func (s *rootsState) releaseLocked() {
	s.queue.releaseAll()
	s.settling.begin()
}

// wait makes the server's roots/list id wait for the first roots. It reports answerNow when they
// are known, and refused when maxWaiters already wait. A waiting id sent again waits once.
func (s *rootsState) wait(id msgID) (answerNow, refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known {
		if s.barrier.inFlight() {
			s.barrier.asked, s.settling.served = true, true
		}
		return true, false
	}
	return false, !s.waiters.add(id)
}

// waiterTimedOut removes the waiter id and reports whether it was waiting.
func (s *rootsState) waiterTimedOut(id msgID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiters.timedOut(id)
}

// remember notes that rootfs answered the server's roots/list id (the last answeredMemory).
func (s *rootsState) remember(id msgID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiters.remember(id)
}

// swallowCancel reports whether a server's notifications/cancelled refers to a roots/list that
// rootfs answered or holds; a held one is dropped unanswered.
func (s *rootsState) swallowCancel(id msgID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiters.cancel(id)
}

func (s *rootsState) isHolding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue.on
}

// hold counts a client request or notification of n bytes toward the hold, when messages are
// held, and reports false (nothing counted) if it would pass maxHeld messages or MaxLine bytes:
// the caller then refuses it.
func (s *rootsState) hold(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue.reserve(n)
}

// keep holds a copy of msg if messages are held and it is not only responses (responses to the
// server's own requests are never held: the server may be waiting for them), and reports whether
// it did. What is held was counted by hold when it was routed. waits: msg may depend on the
// roots (see noRootsMethods); during the settle one that need not wait, with nothing ahead of
// it, is not held.
func (s *rootsState) keep(msg []byte, responses, waits bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.queue.on || responses {
		return false
	}
	if !waits && s.queue.empty() && !s.queue.releasing && s.queue.allReleased() && !s.barrier.inFlight() && s.fetch.idle() {
		// Not held after all: what hold counted for it is not either.
		s.queue.unreserve()
		return false
	}
	s.queue.push(msg, waits)
	return true
}

// takeHeld returns the held messages that may go now, oldest first: those of released epochs,
// up to the first that waits for the settle while it lasts. The caller forwards them and calls
// again. When none is left and nothing holds them any more (no fetch, no barrier, no later epoch,
// no settle), the hold stops.
func (s *rootsState) takeHeld() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	settling := s.settling.active(time.Now())
	out := s.queue.take(settling)
	if s.queue.empty() && !settling && s.known && s.fetch.idle() && !s.barrier.inFlight() && s.queue.allReleased() {
		s.queue.stop()
	}
	return out
}

// drainHeld stops the hold and returns everything held, oldest first (the client has gone).
func (s *rootsState) drainHeld() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue.drain()
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
	return s.fetch.count
}

func (s *rootsState) stopTimers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetch.stop()
	s.barrier.stop()
	s.settling.stop()
	s.waiters.stop()
}
