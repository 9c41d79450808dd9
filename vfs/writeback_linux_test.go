//go:build linux

package vfs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestViewWriteback: under the writeback cache (Options.Writeback), a write-only open
// that changes part of a page keeps the rest of the page (the daemon opened
// it read-write for the kernel's page fill), O_APPEND appends, and a
// write-through view behaves the same.
func TestViewWriteback(t *testing.T) {
	for _, wb := range []bool{true, false} {
		name := "write-through"
		if wb {
			name = "writeback"
		}
		t.Run(name, func(t *testing.T) {
			h := hostTree(t)
			a := mkdir(t, filepath.Join(h, "a"))
			write(t, filepath.Join(a, "f"), "0123456789")
			write(t, filepath.Join(a, "log"), "one\n")
			s := serve(t, serveConfig{Roots: []string{a}, Writeback: wb})

			f, err := os.OpenFile(filepath.Join(s.Mnt, "a", "f"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("xy"), 4); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if got := readFile(t, filepath.Join(a, "f")); got != "0123xy6789" {
				t.Errorf("host after a write-only partial write = %q, want 0123xy6789", got)
			}

			l, err := os.OpenFile(filepath.Join(s.Mnt, "a", "log"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"two\n", "three\n"} {
				if _, err := l.WriteString(w); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if got := readFile(t, filepath.Join(a, "log")); got != "one\ntwo\nthree\n" {
				t.Errorf("host after appends = %q", got)
			}
		})
	}
}

// TestViewWritebackRevoke: data a process wrote before its root was
// removed reaches the host (Swap writes the dirty pages back before it
// revokes), and a write after revocation fails with EIO although the kernel
// caches writes. In write-through mode the first half holds trivially; the
// writeback run is the one that fails if Swap skips its write-back pass.
func TestViewWritebackRevoke(t *testing.T) {
	for _, wb := range []bool{true, false} {
		name := "write-through"
		if wb {
			name = "writeback"
		}
		t.Run(name, func(t *testing.T) {
			h := hostTree(t)
			a := mkdir(t, filepath.Join(h, "a"))
			b := mkdir(t, filepath.Join(h, "b"))
			write(t, filepath.Join(b, "f"), "")
			s := serve(t, serveConfig{Roots: []string{a, b}, Writeback: wb})

			f, err := os.OpenFile(filepath.Join(s.Mnt, "b", "f"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("before revocation"); err != nil {
				t.Fatal(err)
			}
			s.swap(a)
			if got := readFile(t, filepath.Join(b, "f")); got != "before revocation" {
				t.Errorf("host after Swap = %q, want the data written before it", got)
			}
			_, err = f.WriteString(" after")
			wantErrno(t, "write after revocation", err, syscall.EIO)
			var st syscall.Stat_t
			wantErrno(t, "fstat after revocation", syscall.Fstat(int(f.Fd()), &st), syscall.EIO)
			if got := readFile(t, filepath.Join(b, "f")); got != "before revocation" {
				t.Errorf("host after a revoked write = %q", got)
			}
		})
	}
}
