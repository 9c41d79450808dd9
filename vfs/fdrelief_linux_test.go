//go:build linux

package vfs

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
)

// TestViewFDRelief: a walk over more directories than the daemon's RLIMIT_NOFILE
// completes, because the view has the kernel forget unused inodes when it
// runs out of descriptors; without the relief (control) it fails with
// EMFILE.
func TestViewFDRelief(t *testing.T) {
	h := hostTree(t)
	a := mkdir(t, filepath.Join(h, "a"))
	for d := range 4 {
		dir := mkdir(t, filepath.Join(a, fmt.Sprint("d", d)))
		for f := range 100 {
			// A directory each: the view holds a descriptor per cached
			// directory (files hold none).
			write(t, filepath.Join(dir, fmt.Sprint("s", f), "f"), "x")
		}
	}
	walk := func(s *server) (files int, err error) {
		err = filepath.WalkDir(filepath.Join(s.Mnt, "a"), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			var st syscall.Stat_t
			if err := syscall.Lstat(p, &st); err != nil {
				return fmt.Errorf("lstat %s: %w", p, err)
			}
			if !d.IsDir() {
				files++
			}
			return nil
		})
		return files, err
	}
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "relief", true: "control"}[control], func(t *testing.T) {
			s := serve(t, serveConfig{Roots: []string{a}, NoFile: 128, NoFDRelief: control})
			files, err := walk(s)
			if control {
				if err == nil {
					t.Fatalf("walk of %d files under RLIMIT_NOFILE 128 succeeded without the relief: the control shows nothing", files)
				}
				wantErrno(t, "walk without relief", err, syscall.EMFILE)
				return
			}
			if err != nil || files != 400 {
				t.Fatalf("walk: %d files, %v; want 400, nil", files, err)
			}
			if files, err := walk(s); err != nil || files != 400 {
				t.Fatalf("second walk: %d files, %v", files, err)
			}
		})
	}
}
