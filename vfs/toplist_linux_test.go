//go:build linux

package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestViewTopListingOneTable: a listing of the top level read in several
// getdents calls, with an install between them, lists one table: no name
// twice, no name of the new table, and no error. The control continues the
// listing by position in the current table (as before), which repeats
// names or fails with EINVAL.
func TestViewTopListingOneTable(t *testing.T) {
	for _, control := range []bool{false, true} {
		name := "view"
		if control {
			name = "control"
		}
		t.Run(name, func(t *testing.T) {
			h := hostTree(t)
			var old, next []string
			for i := range 40 {
				old = append(old, mkdir(t, filepath.Join(h, fmt.Sprintf("old%02d", i))))
			}
			for i := range 5 {
				next = append(next, mkdir(t, filepath.Join(h, fmt.Sprintf("new%02d", i))))
			}
			s := serve(t, serveConfig{Roots: old, TopPlainOffsets: control})
			f, err := os.Open(s.Mnt)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			seen := map[string]int{}
			var errs []error
			buf := make([]byte, 160) // a few entries per call
			for calls := 0; ; calls++ {
				n, err := unix.Getdents(int(f.Fd()), buf)
				if err != nil {
					errs = append(errs, err)
					break
				}
				if n == 0 {
					break
				}
				_, _, names := unix.ParseDirent(buf[:n], -1, nil)
				for _, nm := range names {
					seen[nm]++
				}
				if calls == 1 {
					s.swap(next...) // between the second and third call
				}
			}
			var twice, fromNew []string
			for nm, c := range seen {
				if c > 1 {
					twice = append(twice, nm)
				}
				if len(nm) > 3 && nm[:3] == "new" {
					fromNew = append(fromNew, nm)
				}
			}
			mixed := len(twice) > 0 || len(fromNew) > 0 || len(errs) > 0
			if control {
				if !mixed {
					t.Errorf("control: the listing stayed in one table (%d names): the test shows nothing", len(seen))
				}
				return
			}
			if mixed {
				t.Errorf("listing across an install: twice %v, from the new table %v, errors %v", twice, fromNew, errs)
			}
			if len(seen) < 10 {
				t.Errorf("listing has %d names; want the old table's (or a prefix of it)", len(seen))
			}
		})
	}
}
