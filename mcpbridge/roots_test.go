package mcpbridge

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Tests of the roots state machine's parts on their own, without a bridge. The parts expect
// rootsState.mu held; where a timer runs a hook, the test holds a lock of its own the same way.

// timeouts records the ids a part's timer hook was called with, under the lock the part's
// methods are called with (as the Bridge's hooks take rootsState.mu).
type timeouts struct {
	mu  sync.Mutex
	ids []msgID
}

func (r *timeouts) hook(id msgID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
}

func (r *timeouts) got() []msgID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

func heldStrings(msgs [][]byte) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m))
	}
	return out
}

func TestHoldQueueBound(t *testing.T) {
	setLimit(t, &maxHeld, 3)
	tests := []struct {
		name     string
		maxBytes int
		sizes    []int
		want     []bool
	}{
		{"count", 100, []int{1, 1, 1, 1}, []bool{true, true, true, false}},
		{"bytes", 10, []int{6, 5, 4, 1}, []bool{true, false, true, false}},
		{"a message at the limit", 10, []int{10, 1}, []bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newHoldQueue(tt.maxBytes)
			q.newEpoch()
			for i, n := range tt.sizes {
				if got := q.reserve(n); got != tt.want[i] {
					t.Fatalf("reserve(%d) #%d = %v, want %v", n, i, got, tt.want[i])
				}
				if tt.want[i] {
					q.push([]byte(strconv.Itoa(i)), false)
				}
			}
			// What is taken is no longer counted: the queue has room again.
			q.releaseAll()
			if got := q.take(false); len(got) == 0 {
				t.Fatal("took nothing after the release")
			}
			if q.count != 0 || q.bytes != 0 {
				t.Fatalf("after taking everything: count %d, bytes %d, want 0 0", q.count, q.bytes)
			}
			if !q.reserve(tt.sizes[0]) {
				t.Error("refused a message once the queue was emptied")
			}
		})
	}
}

func TestHoldQueueOff(t *testing.T) {
	setLimit(t, &maxHeld, 1)
	q := newHoldQueue(1)
	for i := range 3 {
		if !q.reserve(100) {
			t.Fatalf("reserve #%d refused with the hold off", i)
		}
	}
	if q.count != 0 || q.bytes != 0 {
		t.Errorf("the hold off counted %d messages, %d bytes", q.count, q.bytes)
	}
}

// TestHoldQueueOrder: messages go oldest first, a release lets go of the epochs so far and not
// of a later one, and during the settle the first message that waits stops the rest.
func TestHoldQueueOrder(t *testing.T) {
	q := newHoldQueue(1 << 10)
	keep := func(msg string, waits bool) {
		t.Helper()
		if !q.reserve(len(msg)) {
			t.Fatalf("reserve %q refused", msg)
		}
		q.push([]byte(msg), waits)
	}
	take := func(settling bool, want ...string) {
		t.Helper()
		if got := heldStrings(q.take(settling)); !slices.Equal(got, want) {
			t.Fatalf("take(settling=%v) = %q, want %q", settling, got, want)
		}
	}

	q.newEpoch()
	keep("a", true)
	keep("b", false)
	take(false) // nothing is released yet
	q.releaseAll()
	q.newEpoch() // a list_changed: what comes now waits for its own release
	keep("c", false)
	take(false, "a", "b")
	if len(q.msgs) != 1 || q.allReleased() {
		t.Fatalf("after the first release: %d held, all released %v; want 1 (c), false", len(q.msgs), q.allReleased())
	}
	keep("d", true)
	keep("e", false)
	take(false)
	q.releaseAll()
	keep("f", false)
	take(true, "c")            // d waits for the settle, and e and f are behind it
	take(false, "d", "e", "f") // the settle is over
	if q.count != 0 || q.bytes != 0 || !q.empty() {
		t.Errorf("after taking everything: count %d, bytes %d, held %d", q.count, q.bytes, len(q.msgs))
	}
}

func TestHoldQueueUnreserveAndDrain(t *testing.T) {
	q := newHoldQueue(1 << 10)
	q.newEpoch()
	q.reserve(5)
	q.unreserve() // routed, then not held after all
	if q.count != 0 || q.bytes != 0 {
		t.Fatalf("after unreserve: count %d, bytes %d", q.count, q.bytes)
	}
	q.reserve(1)
	q.push([]byte("x"), true)
	q.reserve(1)
	q.push([]byte("y"), false)
	if got := heldStrings(q.drain()); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("drain = %q, want x y", got)
	}
	if q.on || !q.empty() {
		t.Errorf("after drain: on %v, held %d", q.on, len(q.msgs))
	}
}

// TestHoldQueueCopies: the queue keeps its own copy of a message, which points into the line
// buffer when it is pushed.
func TestHoldQueueCopies(t *testing.T) {
	q := newHoldQueue(1 << 10)
	q.newEpoch()
	buf := []byte("abc")
	q.reserve(len(buf))
	q.push(buf, false)
	copy(buf, "xyz")
	q.releaseAll()
	if got := heldStrings(q.take(false)); !slices.Equal(got, []string{"abc"}) {
		t.Errorf("took %q, want abc", got)
	}
}

func TestWaitersBound(t *testing.T) {
	setLimit(t, &maxWaiters, 2)
	w := newWaiters(time.Hour, func(msgID) {})
	defer w.stop()
	a, b, c := stringID("a"), stringID("b"), stringID("c")
	for _, step := range []struct {
		id   msgID
		want bool
	}{{a, true}, {b, true}, {c, false}, {a, true}} { // a waits already: not a new waiter
		if got := w.add(step.id); got != step.want {
			t.Fatalf("add(%v) = %v, want %v", step.id, got, step.want)
		}
	}
	got := w.takeAll()
	slices.SortFunc(got, func(x, y msgID) int { return cmpString(x.str, y.str) })
	if !slices.Equal(got, []msgID{a, b}) {
		t.Fatalf("takeAll = %v, want a b", got)
	}
	if !w.add(c) {
		t.Error("add refused once the waiters were answered")
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestWaitersTimeout: a waiter times out after timeout, once; an id sent again waits from then;
// a cancelled or answered one never times out.
func TestWaitersTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fired timeouts
		w := newWaiters(time.Second, fired.hook)
		a, b, c := stringID("a"), stringID("b"), stringID("c")
		w.add(a)
		w.add(b)
		w.add(c)
		time.Sleep(500 * time.Millisecond)
		w.add(a) // again: its wait starts over
		if !w.cancel(b) {
			t.Fatal("cancel of a waiter reported false")
		}
		time.Sleep(600 * time.Millisecond)
		synctest.Wait()
		if got := fired.got(); !slices.Equal(got, []msgID{c}) {
			t.Fatalf("at 1.1s timed out: %v, want c", got)
		}
		if !w.timedOut(c) || w.timedOut(c) {
			t.Error("timedOut(c) is not true once, then false")
		}
		w.takeAll() // a is answered
		time.Sleep(time.Second)
		synctest.Wait()
		if got := fired.got(); !slices.Equal(got, []msgID{c}) {
			t.Errorf("at 2.1s timed out: %v, want c only", got)
		}
	})
}

func TestWaitersAnsweredMemory(t *testing.T) {
	w := newWaiters(time.Hour, func(msgID) {})
	id := func(i int) msgID { return msgID{kind: idNumber, num: int64(i)} }
	for i := range answeredMemory {
		w.remember(id(i))
	}
	w.remember(id(0)) // already remembered: evicts nothing
	if !w.cancel(id(0)) {
		t.Fatal("forgot the oldest answered id before the memory was full")
	}
	w.remember(id(answeredMemory))
	if w.cancel(id(0)) {
		t.Error("remembers more than answeredMemory answered ids")
	}
	if !w.cancel(id(1)) || !w.cancel(id(answeredMemory)) {
		t.Error("forgot an answered id within the memory")
	}
	if len(w.answered) != answeredMemory || len(w.answeredSet) != answeredMemory {
		t.Errorf("memory holds %d ids (%d in the set), want %d", len(w.answered), len(w.answeredSet), answeredMemory)
	}
}

func TestFetcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fired timeouts
		f := fetcher{prefix: "p-", timeout: time.Second, onTimeout: fired.hook}
		if !f.idle() {
			t.Fatal("a new fetcher is not idle")
		}
		id := f.start()
		if id != stringID("p-1") || !f.inFlight() {
			t.Fatalf("start = %v (in flight %v), want \"p-1\" in flight", id, f.inFlight())
		}
		if f.end(stringID("p-2")) {
			t.Error("end of another id reported true")
		}
		if !f.end(id) || f.end(id) || !f.idle() {
			t.Error("end of the fetch in flight is not true once, then false, leaving it idle")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := fired.got(); len(got) != 0 {
			t.Fatalf("an answered fetch timed out: %v", got)
		}
		id = f.start()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := fired.got(); !slices.Equal(got, []msgID{stringID("p-2")}) || id != got[0] {
			t.Errorf("timed out: %v, want \"p-2\"", got)
		}
		if f.count != 2 {
			t.Errorf("count %d, want 2", f.count)
		}
	})
}

// TestPingBarrier: the pings of a swap end at wait after it, however often they restart; a
// server that never answered one is silent after the first that times out, one that answered
// once never is.
func TestPingBarrier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fired timeouts
		p := pingBarrier{prefix: "s-", wait: 2 * time.Second, onTimeout: fired.hook}
		first := p.begin()
		time.Sleep(time.Second)
		second := p.start() // replaces the first, within the same swap's time
		if p.end(first, false) {
			t.Error("the pong of a replaced ping ended the barrier")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := fired.got(); !slices.Equal(got, []msgID{second}) {
			t.Fatalf("at 2s timed out: %v, want %v", got, second)
		}
		if !p.end(second, true) || !p.silent || p.inFlight() {
			t.Fatalf("after the first timeout: silent %v, in flight %v", p.silent, p.inFlight())
		}

		q := pingBarrier{prefix: "s-", wait: time.Second, onTimeout: func(msgID) {}}
		if id := q.begin(); !q.end(id, false) || q.pongs != 1 {
			t.Fatal("a pong did not end the ping")
		}
		if id := q.begin(); !q.end(id, true) || q.silent {
			t.Error("a server that answered a ping is silent after one timeout")
		}
		q.stop()
	})
}

func TestSettleWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		ended := 0
		w := settleWindow{d: time.Second, onEnd: func() { mu.Lock(); ended++; mu.Unlock() }}
		w.begin() // the server was not given roots: no settle
		if w.active(time.Now()) || w.timer != nil {
			t.Fatal("a settle started though the server fetched no roots")
		}
		w.served = true
		w.begin()
		if w.served || !w.active(time.Now()) {
			t.Fatalf("after begin: served %v, active %v; want false, true", w.served, w.active(time.Now()))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if ended != 1 || w.active(time.Now()) {
			t.Errorf("after the settle: ended %d times, active %v", ended, w.active(time.Now()))
		}

		off := settleWindow{onEnd: func() { t.Error("a zero settle ran its hook") }, served: true}
		off.begin()
		if off.active(time.Now()) {
			t.Error("a zero settle is active")
		}
	})
}
