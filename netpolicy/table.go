package netpolicy

import (
	"container/list"
	"net/netip"
	"slices"
	"sync"
)

// Bounds of a Table: the sandbox chooses the names it resolves, so it
// chooses how much the table would hold.
const (
	// DefaultTableSize is the number of addresses a Table keeps by
	// default; the least recently resolved goes first.
	DefaultTableSize = 4096
	// MaxNamesPerAddr is how many names a Table keeps per address (a CDN
	// address serves many); the least recent goes first.
	MaxNamesPerAddr = 8
)

// Table records which names resolved (through rootfs) to which
// addresses, so that a connection to an address is judged by the names
// the sandbox used for it. It holds at most its size in addresses and
// MaxNamesPerAddr names each: an entry pushed out only makes a later
// connection to its address judged by the address alone. Safe for
// concurrent use.
type Table struct {
	max int
	// mu guards the fields that follow.
	mu     sync.Mutex
	byAddr map[netip.Addr]*list.Element // of *tableEntry
	lru    list.List                    // front: most recently resolved
}

type tableEntry struct {
	addr  netip.Addr
	names []string // most recent last
}

// NewTable returns an empty table of at most size addresses (size <= 0:
// DefaultTableSize).
func NewTable(size int) *Table {
	if size <= 0 {
		size = DefaultTableSize
	}
	return &Table{max: size, byAddr: make(map[netip.Addr]*list.Element)}
}

// Add records that name resolved to addrs.
func (t *Table) Add(name string, addrs []netip.Addr) {
	name = CanonName(name)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if el, ok := t.byAddr[a]; ok {
			e := el.Value.(*tableEntry)
			if i := slices.Index(e.names, name); i >= 0 {
				e.names = slices.Delete(e.names, i, i+1)
			} else if len(e.names) >= MaxNamesPerAddr {
				e.names = slices.Delete(e.names, 0, 1)
			}
			e.names = append(e.names, name)
			t.lru.MoveToFront(el)
			continue
		}
		if t.lru.Len() >= t.max {
			old := t.lru.Back()
			t.lru.Remove(old)
			delete(t.byAddr, old.Value.(*tableEntry).addr)
		}
		t.byAddr[a] = t.lru.PushFront(&tableEntry{addr: a, names: []string{name}})
	}
}

// Names returns the names that resolved to a, most recent first; nil when
// none did (or it was pushed out).
func (t *Table) Names(a netip.Addr) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.byAddr[a.Unmap().WithZone("")]
	if !ok {
		return nil
	}
	n := slices.Clone(el.Value.(*tableEntry).names)
	slices.Reverse(n)
	return n
}

// Len is the number of addresses held.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}
