package mountmgr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMountBaseAvoidsRoots: the view's private mount directory is never
// made inside a root, so rootfs started in /tmp with no --root (the
// working directory, /tmp, is then a root) still mounts its view.
func TestMountBaseAvoidsRoots(t *testing.T) {
	tmp, _ := filepath.EvalSymlinks(os.TempDir())
	if got := mountBase(nil); got != os.TempDir() {
		t.Errorf("no roots: %s, want %s", got, os.TempDir())
	}
	for _, avoid := range [][]string{{tmp}, {filepath.Dir(tmp)}, {tmp, "/dev/shm"}} {
		got := mountBase(avoid)
		real, _ := filepath.EvalSymlinks(got)
		for _, a := range avoid {
			if a == "/" && len(avoid) == 1 {
				continue
			}
			if real == a || strings.HasPrefix(real, a+"/") {
				t.Errorf("avoiding %q: %s lies in %s", avoid, got, a)
			}
		}
	}
}
