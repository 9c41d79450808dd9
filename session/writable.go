package session

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/rootset"
)

// Writable is the server's writable set: the host directories the server of this session can
// write, or could in an earlier session started the same way. Nothing rootfs resolves for the
// server at start (auto-bind's links and #! lines, bind sources, the roots of every table) is
// reached through a symlink lying there, which the server may have planted.
//
// It has three parts, and three readers that see it at different moments of the start:
//
//   - forAutoBind, before the view exists: the roots at start as previewed (every entry) and
//     the --allow directories; nothing under --read-only, where no root is written.
//   - writeSet, for the view: the read-write binds; the view adds the directory roots of each
//     table it installs, unless --read-only.
//   - checkBindSources, once the view holds its first table: the binds, that table's directory
//     roots (or the working directory standing in for them) unless --read-only, and the
//     --allow directories, beneath which every client root will lie.
type Writable struct {
	readOnly bool
	// binds are the sources of the read-write binds.
	binds []string
	// roots are the host paths of the roots at start: the preview's entries until the view
	// has installed its first table, then that table's directories (startTable).
	roots []string
	// allow are the --allow directories, resolved: client roots arrive after the server has
	// started, but only at or beneath these, so whatever lies there is the server's to write
	// in this session or an earlier one.
	allow []string
}

func newWritable(o *Options) Writable {
	return Writable{readOnly: o.Roots.ReadOnly, allow: allowDirs(o.Roots.Allow)}
}

// allowDirs resolves the --allow directories; one that does not resolve holds nothing.
func allowDirs(allow []string) []string {
	var out []string
	for _, a := range allow {
		if abs, err := filepath.Abs(a); err == nil {
			if r, err := filepath.EvalSymlinks(abs); err == nil {
				out = append(out, r)
			}
		}
	}
	return out
}

// writableBinds are the sources of the read-write binds.
func writableBinds(binds []mountmgr.Bind) []string {
	var out []string
	for _, b := range binds {
		if !b.ReadOnly {
			out = append(out, b.Source)
		}
	}
	return out
}

// forAutoBind is what auto-bind must not follow a link through.
func (w *Writable) forAutoBind() []string {
	if w.readOnly {
		return nil
	}
	return append(append([]string(nil), w.roots...), w.allow...)
}

// writeSet starts the view's record of what the server can write with the read-write binds
// (nil under control.NoWriteSet). The caller closes it.
func (w *Writable) writeSet() (*rootset.WriteSet, error) {
	if control.On(control.NoWriteSet) {
		return nil, nil
	}
	ws := rootset.NewWriteSet(0)
	for _, src := range w.binds {
		if err := ws.AddPath(src); err != nil {
			ws.Close()
			return nil, fmt.Errorf("--bind %s: %w", src, err)
		}
	}
	return ws, nil
}

// startTable takes the roots at start from the view's first table: its directories, or the
// fallback roots when it has no entries.
func (w *Writable) startTable(first *rootset.Table, fallback []rootset.Root) {
	w.roots = nil
	for _, e := range first.Entries() {
		if e.IsDir {
			w.roots = append(w.roots, e.HostPath)
		}
	}
	if len(first.Entries()) == 0 {
		for _, r := range fallback {
			if p, err := rootset.ParseRoot(r.URI); err == nil {
				w.roots = append(w.roots, p)
			}
		}
	}
}

// checkBindSources refuses a bind whose source is reached through a symlink in the writable
// set, as BuildTable refuses such a root: a server that replaced ~/proj/cache by a link to
// ~/.ssh would otherwise have "--ro-bind ~/proj/cache" show it the keys at the next start. The
// kernel resolves the source again when the sandbox mounts it, before this session's server
// runs.
func (w *Writable) checkBindSources(binds []mountmgr.Bind) error {
	dirs := append([]string(nil), w.binds...)
	if !w.readOnly {
		dirs = append(dirs, w.roots...)
	}
	dirs = append(dirs, w.allow...)
	if control.On(control.NoWriteSet) || len(dirs) == 0 {
		return nil
	}
	written := rootset.NewWriteSet(0)
	defer written.Close()
	for _, d := range dirs {
		_ = written.AddPath(d) // one that cannot be opened holds nothing to follow
	}
	for _, b := range binds {
		if b.Symlink != "" {
			continue // shown as a link: nothing is resolved or mounted
		}
		t := rootset.BuildTable([]rootset.Root{{URI: b.Source}}, rootset.TableOptions{Written: written, ReadOnly: true})
		skipped := t.Skipped()
		t.Close()
		for _, s := range skipped {
			if errors.Is(s.Reason, rootset.ErrWritableSymlink) {
				return fmt.Errorf("%w: bind source %s: %v", ErrUsage, b.Source, s.Reason)
			}
		}
	}
	return nil
}
