//go:build linux

package vfs

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
)

// Under passthrough the kernel writes to the backing file itself, in the
// writer's context, so fanotify reports the writer's pid and not the
// daemon's, and the watcher would take every write made through the view
// for a host change: drop the file's attributes, pages and dentry (a
// notification per write, and a LOOKUP and GETATTR more after each). The
// kernel already knows these writes (it updates the size and drops its
// cached attributes after each one, and passthrough reads and mappings go
// to the backing file, not the page cache). So while a node has writable
// passthrough handles, its modification events are not acted on: the
// kernel's attributes are dropped once when the first such handle opens,
// every reply meanwhile is cached for the short timeout only (a host
// process writing the same file is seen after it, as without the
// watcher), and the last close drops attributes and pages once if a
// modification came in between. Events that are not plain modifications
// (attribute changes, renames, deletion) are acted on as always. A handle
// of the same file that is not passthrough (a set-ID file, opened while
// privileged) may read pages cached before a host write in that time.

// ptWindows are the writable passthrough handles (see passthroughWriter)
// and the nodes with any.
type ptWindows struct {
	// mu guards handles and the ptWindows in nodes.
	mu      sync.Mutex
	handles map[*fileHandle]struct{}
	nodes   sync.Map // *node -> *ptWindow; read on every reply of a passthrough view
}

// ptWindow is a node's time with writable passthrough handles.
type ptWindow struct {
	handles  int
	deferred bool // a modification was not acted on
}

// passthroughWriter records h, a handle the kernel writes through itself.
func (v *View) passthroughWriter(h *fileHandle) {
	w := v.watch
	if w == nil || !h.writable || control.On(control.NoPassthroughWindows) {
		return
	}
	w.pt.mu.Lock()
	if w.pt.handles == nil {
		w.pt.handles = map[*fileHandle]struct{}{}
	}
	w.pt.handles[h] = struct{}{}
	pw, _ := w.pt.nodes.Load(h.n)
	first := pw == nil
	if first {
		pw = &ptWindow{}
		w.pt.nodes.Store(h.n, pw)
	}
	pw.(*ptWindow).handles++
	w.pt.mu.Unlock()
	if first {
		// Attributes cached for long before the window would outlive a
		// host change made during it (whose event is not acted on).
		w.gen.Add(1)
		go w.notify(action{n: h.n}) // never from the OPEN handler itself
	}
}

// passthroughClosed is passthroughWriter's release.
func (v *View) passthroughClosed(h *fileHandle) {
	w := v.watch
	if w == nil {
		return
	}
	w.pt.mu.Lock()
	if _, ok := w.pt.handles[h]; !ok {
		w.pt.mu.Unlock()
		return
	}
	delete(w.pt.handles, h)
	v0, _ := w.pt.nodes.Load(h.n)
	pw := v0.(*ptWindow)
	pw.handles--
	last := pw.handles == 0
	if last {
		w.pt.nodes.Delete(h.n)
	}
	w.pt.mu.Unlock()
	if last && pw.deferred {
		w.gen.Add(1)
		go w.notify(action{n: h.n, data: true}) // never from the RELEASE handler itself
	}
}

// ptWriting reports whether n has writable passthrough handles.
func (w *hostWatch) ptWriting(n *node) bool {
	if !n.v.opts.Passthrough {
		return false
	}
	_, ok := w.pt.nodes.Load(n)
	return ok
}

// ptDefer reports whether a modification of n is left to the kernel (n is
// open for writing through passthrough), noting that one came.
func (w *hostWatch) ptDefer(n *node, mask uint64) bool {
	if mask&^(unix.FAN_MODIFY|unix.FAN_ONDIR) != 0 || !w.ptWriting(n) {
		return false
	}
	w.pt.mu.Lock()
	defer w.pt.mu.Unlock()
	if pw, ok := w.pt.nodes.Load(n); ok {
		pw.(*ptWindow).deferred = true
		return true
	}
	return false
}
