//go:build linux

package rootset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

func roots(paths ...string) []Root {
	var out []Root
	for _, p := range paths {
		out = append(out, Root{URI: "file://" + p})
	}
	return out
}

// hostPaths lists the resolved host paths of the table's entries.
func hostPaths(tab *Table) []string {
	var out []string
	for _, e := range tab.Entries() {
		out = append(out, e.HostPath)
	}
	return out
}

func holds(tab *Table, p string) bool {
	for _, e := range tab.Entries() {
		if e.HostPath == p {
			return true
		}
	}
	return false
}

// refused reports whether the only skipped root is uri, refused as planted.
func refusedPlanted(tab *Table, p string) bool {
	sk := tab.Skipped()
	return len(sk) == 1 && sk[0].Root.URI == "file://"+p && errors.Is(sk[0].Reason, ErrWritableSymlink) &&
		!strings.Contains(sk[0].Reason.Error(), "\n")
}

// TestWrittenSymlinkRefused: roots /ws and /ws/app; the server swaps
// /ws/app for a symlink to a host directory; the next fetch must not admit
// that directory. The negative control builds the same table without the
// session's record (the resolution before the fix): it admits the secret.
func TestWrittenSymlinkRefused(t *testing.T) {
	l := testutil.NewNested(t)
	w := NewWriteSet(0)
	defer w.Close()
	opts := TableOptions{Written: w}
	first := BuildTable(roots(l.WS, l.App), opts)
	if len(first.Entries()) != 2 {
		t.Fatalf("first table: %v, skipped %v", hostPaths(first), first.Skipped())
	}
	first.Close()
	l.Plant(t)

	control := BuildTable(roots(l.WS, l.App), TableOptions{})
	defer control.Close()
	if !holds(control, l.Secret) {
		t.Fatalf("control: without the record the planted link should lead to %s; got %v", l.Secret, hostPaths(control))
	}

	tab := BuildTable(roots(l.WS, l.App), opts)
	defer tab.Close()
	if holds(tab, l.Secret) || len(tab.Entries()) != 1 || !holds(tab, l.WS) || !refusedPlanted(tab, l.App) {
		t.Fatalf("after planting: entries %v, skipped %v; want only %s, %s refused", hostPaths(tab), tab.Skipped(), l.WS, l.App)
	}
	t.Logf("refused: %v", tab.Skipped()[0].Reason)
}

// TestWrittenSymlinkRefusedAfterRootLeft: the symlink was planted while
// /ws was served; /ws is gone from the next list, /ws/app alone is asked
// for. The set remembers /ws. The control is a new session's set.
func TestWrittenSymlinkRefusedAfterRootLeft(t *testing.T) {
	l := testutil.NewNested(t)
	w := NewWriteSet(0)
	defer w.Close()
	BuildTable(roots(l.WS), TableOptions{Written: w}).Close()
	l.Plant(t)

	fresh := NewWriteSet(0)
	defer fresh.Close()
	control := BuildTable(roots(l.App), TableOptions{Written: fresh})
	defer control.Close()
	if !holds(control, l.Secret) {
		t.Fatalf("control: a set that never saw /ws should follow the link; got %v", hostPaths(control))
	}

	tab := BuildTable(roots(l.App), TableOptions{Written: w})
	defer tab.Close()
	if len(tab.Entries()) != 0 || !refusedPlanted(tab, l.App) {
		t.Fatalf("entries %v, skipped %v; want %s refused", hostPaths(tab), tab.Skipped(), l.App)
	}
}

// TestWrittenSymlinkSameTable: a symlink inside another writable root of
// the same table is refused even before that root has been served, so the
// outcome does not depend on the order of fetches. Read-only roots do not
// count: the server cannot write them.
func TestWrittenSymlinkSameTable(t *testing.T) {
	l := testutil.NewNested(t)
	l.Plant(t)
	w := NewWriteSet(0)
	defer w.Close()
	tab := BuildTable(roots(l.WS, l.App), TableOptions{Written: w})
	defer tab.Close()
	if holds(tab, l.Secret) || !refusedPlanted(tab, l.App) {
		t.Fatalf("entries %v, skipped %v; want %s refused", hostPaths(tab), tab.Skipped(), l.App)
	}

	ro := NewWriteSet(0)
	defer ro.Close()
	rot := BuildTable(roots(l.WS, l.App), TableOptions{Written: ro, ReadOnly: true})
	defer rot.Close()
	if !holds(rot, l.Secret) || ro.Len() != 0 {
		t.Fatalf("read-only: entries %v, set %d; want the link followed and nothing recorded", hostPaths(rot), ro.Len())
	}
}

// TestWrittenSymlinkThroughHostLink: the root's path string does not start
// with the written directory (a host symlink leads into it); the planted
// link is still met in a written directory and refused.
func TestWrittenSymlinkThroughHostLink(t *testing.T) {
	l := testutil.NewNested(t)
	w := NewWriteSet(0)
	defer w.Close()
	BuildTable(roots(l.WS), TableOptions{Written: w}).Close()
	l.Plant(t)
	alias := filepath.Join(l.Top, "alias")
	os.Symlink("ws", alias) // relative, host-made, outside every root
	control := BuildTable(roots(alias+"/app"), TableOptions{})
	defer control.Close()
	if !holds(control, l.Secret) {
		t.Fatalf("control: got %v", hostPaths(control))
	}
	tab := BuildTable(roots(alias+"/app"), TableOptions{Written: w})
	defer tab.Close()
	if len(tab.Entries()) != 0 || !refusedPlanted(tab, alias+"/app") {
		t.Fatalf("entries %v, skipped %v", hostPaths(tab), tab.Skipped())
	}
}

// TestWrittenBindTaints: a read-write bind lets the server plant as well.
func TestWrittenBindTaints(t *testing.T) {
	l := testutil.NewNested(t)
	l.Plant(t)
	w := NewWriteSet(0)
	defer w.Close()
	if err := w.AddPath(l.WS); err != nil {
		t.Fatal(err)
	}
	tab := BuildTable(roots(l.App), TableOptions{Written: w, ReadOnly: true})
	defer tab.Close()
	if len(tab.Entries()) != 0 || !refusedPlanted(tab, l.App) {
		t.Fatalf("entries %v, skipped %v", hostPaths(tab), tab.Skipped())
	}
}

// TestWrittenHostLayoutsStillWork: host symlinks outside every written
// directory are followed (a /home -> /data/home layout, relative links with
// "..", chains), including into a written directory; a real directory
// re-created at a root's path (a fresh clone) is admitted.
func TestWrittenHostLayoutsStillWork(t *testing.T) {
	l := testutil.NewNested(t)
	data := filepath.Join(l.Top, "data", "home")
	os.MkdirAll(filepath.Join(data, "me"), 0o755)
	os.MkdirAll(filepath.Join(l.WS, "sub"), 0o755)
	home := filepath.Join(l.Top, "home")
	os.Symlink("data/home", home)                        // relative
	os.Symlink("../../ws/sub", filepath.Join(data, "w")) // relative with "..", into ws
	chain := filepath.Join(l.Top, "chain")
	os.Symlink(home, chain) // absolute, to another link

	w := NewWriteSet(0)
	defer w.Close()
	opts := TableOptions{Written: w}
	BuildTable(roots(l.WS, l.App), opts).Close()

	// The host re-clones app: a new real directory at the same path.
	os.RemoveAll(l.App)
	os.MkdirAll(l.App, 0o755)
	tab := BuildTable(roots(l.WS, l.App, chain+"/me", home+"/w"), opts)
	defer tab.Close()
	want := []string{l.WS, l.App, filepath.Join(data, "me"), filepath.Join(l.WS, "sub")}
	got := hostPaths(tab)
	if len(tab.Skipped()) != 0 || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("entries %v, skipped %v; want %v", got, tab.Skipped(), want)
	}
}

// TestWriteSetBound: past the limit a writable root that would add a
// directory is refused (the set does not grow); roots already recorded,
// read-only tables and files still work.
func TestWriteSetBound(t *testing.T) {
	top := t.TempDir()
	var dirs []string
	for _, n := range []string{"a", "b", "c"} {
		d := filepath.Join(top, n)
		os.Mkdir(d, 0o755)
		dirs = append(dirs, d)
	}
	f := filepath.Join(top, "f")
	os.WriteFile(f, nil, 0o644)
	w := NewWriteSet(2)
	defer w.Close()
	opts := TableOptions{Written: w}
	BuildTable(roots(dirs[0], dirs[1]), opts).Close()
	tab := BuildTable(roots(dirs[0], dirs[2], f), opts)
	defer tab.Close()
	sk := tab.Skipped()
	if w.Len() != 2 || len(tab.Entries()) != 2 || len(sk) != 1 || !errors.Is(sk[0].Reason, ErrTooManyWritable) {
		t.Fatalf("set %d, entries %v, skipped %v", w.Len(), hostPaths(tab), sk)
	}
	t.Logf("refused: %v", sk[0].Reason)
	ro := BuildTable(roots(dirs[2]), TableOptions{Written: w, ReadOnly: true})
	defer ro.Close()
	if len(ro.Entries()) != 1 {
		t.Fatalf("read-only past the bound: %v", ro.Skipped())
	}
}

// TestWrittenAllowDirNotRedirected: --allow directories are resolved for
// every table too; one the server re-pointed (here below a read-write bind)
// is dropped while the restriction stays on, so it cannot admit the link's
// target. The control resolves --allow as before and admits it.
func TestWrittenAllowDirNotRedirected(t *testing.T) {
	l := testutil.NewNested(t)
	l.Plant(t)
	control := BuildTable(roots(l.Secret), TableOptions{Allow: []string{l.App}})
	defer control.Close()
	if !holds(control, l.Secret) {
		t.Fatalf("control: the re-pointed --allow should admit %s; skipped %v", l.Secret, control.Skipped())
	}
	w := NewWriteSet(0)
	defer w.Close()
	if err := w.AddPath(l.WS); err != nil {
		t.Fatal(err)
	}
	tab := BuildTable(roots(l.Secret), TableOptions{Allow: []string{l.App}, Written: w})
	defer tab.Close()
	sk := tab.Skipped()
	if len(tab.Entries()) != 0 || len(sk) != 1 || !errors.Is(sk[0].Reason, ErrNotAllowed) ||
		!strings.Contains(sk[0].Reason.Error(), "could have planted") {
		t.Fatalf("entries %v, skipped %v", hostPaths(tab), sk)
	}
	t.Logf("refused: %v", sk[0].Reason)
}
