package mcpbridge

import "sync"

// forwarded is the table of the client's requests forwarded to the server and not yet answered:
// a server response is forwarded only if it answers one (and removes it), and when the server
// exits each left gets an error reply. It holds at most maxPending.
type forwarded struct {
	// mu guards the field that follows.
	mu  sync.Mutex
	ids map[msgID]struct{}
}

func newForwarded() *forwarded { return &forwarded{ids: map[msgID]struct{}{}} }

// add records id, unless maxPending others are in flight (then it reports false). An id already
// in flight is not a new entry.
func (f *forwarded) add(id msgID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.ids[id]; !dup && len(f.ids) >= maxPending {
		return false
	}
	f.ids[id] = struct{}{}
	return true
}

// take removes id and reports whether it was in flight.
func (f *forwarded) take(id msgID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.ids[id]
	delete(f.ids, id)
	return ok
}

// drain removes and returns every id in flight.
func (f *forwarded) drain() []msgID {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]msgID, 0, len(f.ids))
	for id := range f.ids {
		out = append(out, id)
	}
	clear(f.ids)
	return out
}
