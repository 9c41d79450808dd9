package vfs

import (
	"sync/atomic"

	"github.com/rootfs-dev/rootfs/rootset"
)

// snapshot is what the synthetic part serves: a table plus the
// incarnation of each visible entry, keyed by its ViewPath, and (host
// layout) the synthetic directories that lead to them. Immutable once
// published.
type snapshot struct {
	gen    uint64 // unique in the view; names it in listing offsets
	table  *rootset.Table
	order  []string        // entry keys, in table order
	byName map[string]slot // entry key -> slot
	// dirs maps each synthetic directory ("" is the top level) to the
	// names in it that lead to entries, in table order; in flat layout
	// only "" is there.
	dirs map[string][]string
}

type slot struct {
	inc   *rootInc
	entry *rootset.Entry // of snapshot.table
}

// rootInc is one incarnation of a root: the same name re-pointed at another
// inode, or removed and re-added, is a new incarnation with new node
// identities, so old nodes can never alias new ones.
type rootInc struct {
	gen      uint64 // StableAttr.Gen of every node of this incarnation
	name     string
	hostPath string
	dev, ino uint64
	isDir    bool
	revoked  atomic.Bool
	// revokedSaid: an operation refused because the root left is in the
	// audit log (once per incarnation: a server that spins on a dead
	// descriptor must not fill it).
	revokedSaid atomic.Bool
}

// leavingOf returns the names of old whose incarnation is not in ns, and
// those incarnations.
func leavingOf(old, ns *snapshot) (removed []string, leaving map[*rootInc]bool) {
	leaving = map[*rootInc]bool{}
	for _, name := range old.order {
		if ns.byName[name].inc != old.byName[name].inc {
			removed = append(removed, name)
			leaving[old.byName[name].inc] = true
		}
	}
	return removed, leaving
}
