//go:build linux

package vfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestViewPrefill: the first read-only open of a small file pushes its data
// to the kernel, so reading it sends no READ; a large file is read as
// before; what is read is the host's data, also after a host change and
// after a write through the view. The control (no prefill) sends a READ
// for the small file.
func TestViewPrefill(t *testing.T) {
	for _, control := range []bool{false, true} {
		name := "prefill"
		if control {
			name = "no-prefill-control"
		}
		t.Run(name, func(t *testing.T) {
			h := hostTree(t)
			r := mkdir(t, filepath.Join(h, "r"))
			small := bytes.Repeat([]byte("0123456789abcdef"), 256) // 4 KiB
			large := bytes.Repeat([]byte("large file data."), 8192)
			if err := os.WriteFile(filepath.Join(r, "small"), small, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(r, "large"), large, 0o644); err != nil {
				t.Fatal(err)
			}
			s := serve(t, serveConfig{Roots: []string{r}, NoPrefill: control})
			in := filepath.Join(s.Mnt, "r")
			read := func(name string) []byte {
				t.Helper()
				b, err := os.ReadFile(filepath.Join(in, name))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			n0 := s.reads()
			if got := read("small"); !bytes.Equal(got, small) {
				t.Fatalf("small file read through the view: %d bytes, not the host's", len(got))
			}
			n := s.reads() - n0
			switch {
			case !control && n != 0:
				t.Errorf("reading a small file right after its first open sent %d READ, want 0", n)
			case control && n == 0:
				t.Errorf("control: reading the small file sent no READ: the test shows nothing")
			}
			n0 = s.reads()
			if got := read("large"); !bytes.Equal(got, large) {
				t.Fatalf("large file read through the view: %d bytes, not the host's", len(got))
			}
			if s.reads() == n0 {
				t.Errorf("a file larger than prefillMax was read without READ")
			}

			// A host change shows (the host watcher drops the pages).
			changed := bytes.ToUpper(small)
			if err := os.WriteFile(filepath.Join(r, "small"), changed, 0o644); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second) // a liveness bound
			for !bytes.Equal(read("small"), changed) {
				if time.Now().After(deadline) {
					t.Fatalf("a host change of a prefilled file never showed through the view")
				}
				time.Sleep(10 * time.Millisecond)
			}
			// A write through the view shows to a new reader.
			f, err := os.OpenFile(filepath.Join(in, "small"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("written"), 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			want := append([]byte("written"), changed[7:]...)
			if got := read("small"); !bytes.Equal(got, want) {
				t.Errorf("after a write through the view: %q..., want %q...", got[:16], want[:16])
			}
			if host, _ := os.ReadFile(filepath.Join(r, "small")); !bytes.Equal(host, want) {
				t.Errorf("host file after a write through the view: %q...", host[:16])
			}
		})
	}
}
