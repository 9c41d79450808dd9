package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/rootset"
)

// TestAutoBindAllowIsWritable: client roots arrive after the server has
// started, but only beneath --allow; a venv there is the server's to
// rewrite (in this session or an earlier one), so its python symlink must
// not choose what rootfs binds. Control: without --allow the same layout
// is followed (documented: client roots are not known at start).
func TestAutoBindAllowIsWritable(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	proj := filepath.Join(base, "src", "proj")
	other := filepath.Join(base, "other")
	for _, d := range []string{filepath.Join(other, "bin"), filepath.Join(proj, ".venv", "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "bin", "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// What a server served proj as a client root left there.
	if err := os.Symlink(filepath.Join(other, "bin", "tool"), filepath.Join(proj, ".venv", "bin", "python")); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(proj, ".venv", "bin", "server")
	if err := os.WriteFile(exe, []byte("#!"+filepath.Join(proj, ".venv", "bin", "python")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", "/nonexistent")
	bound := func(allow ...string) bool {
		// rootfs run's defaults: host layout, a 256m /tmp, launcher caches kept.
		o := &Options{Command: []string{exe}, Roots: RootOptions{Allow: allow, Layout: rootset.LayoutHost}, Sandbox: SandboxOptions{TmpSize: "256m"}}
		p, err := Resolve(o, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range p.Spec.Binds {
			if strings.HasPrefix(b.Source, other) {
				return true
			}
		}
		return false
	}
	if bound(filepath.Join(base, "src")) {
		t.Errorf("with --allow %s: bound %s, named by a symlink a client root could have rewritten", filepath.Join(base, "src"), other)
	}
	if !bound() {
		t.Errorf("control: without --allow, %s is not bound", other)
	}
}
