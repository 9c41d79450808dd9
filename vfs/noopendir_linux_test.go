//go:build linux

package vfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rootfs-dev/rootfs/rootset"
)

// TestViewWarmWalkNoDirRequests: with FUSE_NO_OPENDIR_SUPPORT a warm walk
// of a root sends no directory request at all (the kernel keeps the
// listings), and every walk lists what the host has, including a directory
// too large for one READDIR (read in several requests, each through its
// own handle). The control serves OPENDIR as before: two requests per
// directory on every walk (at least the OPENDIR is counted).
func TestViewWarmWalkNoDirRequests(t *testing.T) {
	for _, control := range []bool{false, true} {
		name := "no-opendir"
		if control {
			name = "opendir-control"
		}
		t.Run(name, func(t *testing.T) {
			h := hostTree(t)
			r := mkdir(t, filepath.Join(h, "r"))
			for i := range 20 {
				d := mkdir(t, filepath.Join(r, fmt.Sprintf("d%02d", i)))
				for j := range 5 {
					write(t, filepath.Join(d, fmt.Sprintf("f%d", j)), "x")
				}
			}
			big := mkdir(t, filepath.Join(r, "big"))
			for j := range 600 {
				write(t, filepath.Join(big, fmt.Sprintf("a-rather-long-file-name-%04d", j)), "")
			}
			s := serve(t, serveConfig{Roots: []string{r}})
			if control {
				s.stop()
				s = serve(t, serveConfig{Roots: []string{r}, KeepOpendir: true})
			}
			walk := func(root string) []string {
				t.Helper()
				var got []string
				err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
					if err != nil {
						return err
					}
					rel, _ := filepath.Rel(root, p)
					got = append(got, rel)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			want := walk(r)
			in := filepath.Join(s.Mnt, "r")
			for pass := range 3 {
				n0 := s.dirRequests()
				got := walk(in)
				n := s.dirRequests() - n0
				if !slices.Equal(got, want) {
					t.Fatalf("walk %d lists %d names, the host %d", pass, len(got), len(want))
				}
				t.Logf("walk %d: %d directory requests for %d directories", pass, n, 22)
				switch {
				case pass > 0 && !control && n != 0:
					t.Errorf("warm walk %d sent %d directory requests, want 0", pass, n)
				case pass > 0 && control && n < 22: // OPENDIR each (RELEASEDIR may still be in flight)
					t.Errorf("control: warm walk %d sent only %d directory requests: the test shows nothing", pass, n)
				}
			}
			// A change through the view shows in the next listing.
			os.Remove(filepath.Join(in, "big", "a-rather-long-file-name-0000"))
			if es, err := os.ReadDir(filepath.Join(in, "big")); err != nil || len(es) != 599 {
				t.Errorf("after a removal through the view: %d entries, %v; want 599", len(es), err)
			}
		})
	}
}

// TestViewSyntheticListingsCached: the synthetic directories (the top
// level, and in host layout those leading to the roots) change only at an
// install, so the kernel keeps their listings: listing them again sends no
// request, and an install that changes them shows in the very next
// listing. The control serves OPENDIR (the kernel then asks every time).
func TestViewSyntheticListingsCached(t *testing.T) {
	for _, control := range []bool{false, true} {
		for _, layout := range []rootset.Layout{rootset.LayoutFlat, rootset.LayoutHost} {
			name := layout.String()
			if control {
				name += "/opendir-control"
			}
			t.Run(name, func(t *testing.T) {
				h := hostTree(t)
				a := mkdir(t, filepath.Join(h, "ws", "a"))
				b := mkdir(t, filepath.Join(h, "ws", "b"))
				s := serve(t, serveConfig{Roots: []string{a}, Layout: layout, KeepOpendir: control, Placeholders: []rootset.Placeholder{{Name: "usr"}}})
				dir := s.Mnt
				if layout == rootset.LayoutHost {
					dir = filepath.Join(s.Mnt, filepath.Dir(a))
				}
				list := func() []string { return names(t, dir) }
				first := list()
				n0 := s.dirRequests()
				for range 3 {
					if got := list(); !slices.Equal(got, first) {
						t.Fatalf("listing changed without an install: %q, then %q", first, got)
					}
				}
				n := s.dirRequests() - n0
				t.Logf("3 listings of %s: %d directory requests", dir, n)
				switch {
				case !control && n != 0:
					t.Errorf("warm listings of a synthetic directory sent %d requests, want 0", n)
				case control && n < 3:
					t.Errorf("control: only %d requests for 3 listings: the test shows nothing", n)
				}
				s.swap(a, b)
				if got := list(); !slices.Contains(got, "b") {
					t.Errorf("after an install adding b, the listing is %q", got)
				}
			})
		}
	}
}
