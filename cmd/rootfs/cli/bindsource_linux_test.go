package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestRunRefusesBindThroughPlantedSymlink: a server that could write its
// root replaced proj/cache by a symlink to a directory of secrets; at the
// next start "--ro-bind proj/cache" must not follow it (as a root through
// the same link is refused). Controls: with proj not served, the same bind
// follows the link and the server reads the secret (the layout works), and
// a bind of a real directory inside the root still starts.
func TestRunRefusesBindThroughPlantedSymlink(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	bin := knobBinary(t)
	base, err := os.MkdirTemp("/var/tmp", "rootfs-bindsrc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	proj, secret, out := filepath.Join(base, "proj"), filepath.Join(base, "secret"), filepath.Join(base, "out")
	for _, d := range []string{proj, secret, out, filepath.Join(proj, "real")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(secret, "id"), []byte("KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(proj, "cache")); err != nil {
		t.Fatal(err)
	}
	stolen := filepath.Join(out, "stolen")
	run := func(root, bind string) (string, error) {
		os.Remove(stolen)
		cmd := exec.Command(bin, "run", "--no-auto-bind", "--root", root, "--root", out, "--ro-bind", bind,
			"--", "/bin/sh", "-c", "cat "+filepath.Join(bind, "id")+" > "+stolen)
		cmd.Dir = base
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	t.Run("refused", func(t *testing.T) {
		msg, err := run(proj, filepath.Join(proj, "cache"))
		if b, _ := os.ReadFile(stolen); strings.Contains(string(b), "KEY") {
			t.Fatalf("the server read the secret through a bind of a symlink in its root")
		}
		if err == nil || !strings.Contains(msg, "bind source") {
			t.Errorf("want a refusal naming the bind source; err=%v\n%s", err, msg)
		}
	})
	t.Run("refused-working-directory", func(t *testing.T) {
		// No --root: the working directory stands in for the roots.
		os.Remove(stolen)
		bind := filepath.Join(proj, "cache")
		cmd := exec.Command(bin, "run", "--no-auto-bind", "--bind", out+":/out", "--ro-bind", bind,
			"--", "/bin/sh", "-c", "cat "+filepath.Join(bind, "id")+" > /out/stolen")
		cmd.Dir = proj
		b, err := cmd.CombinedOutput()
		if b, _ := os.ReadFile(stolen); strings.Contains(string(b), "KEY") {
			t.Fatalf("the server read the secret through a bind of a symlink in the working directory")
		}
		if err == nil || !strings.Contains(string(b), "bind source") {
			t.Errorf("want a refusal naming the bind source; err=%v\n%s", err, b)
		}
	})
	t.Run("control-not-served", func(t *testing.T) {
		msg, err := run(filepath.Join(proj, "real"), filepath.Join(proj, "cache"))
		if b, _ := os.ReadFile(stolen); !strings.Contains(string(b), "KEY") {
			t.Errorf("control: with proj not served the bind did not follow the link (err=%v): the test shows nothing\n%s", err, msg)
		}
	})
	t.Run("control-real-dir", func(t *testing.T) {
		os.WriteFile(filepath.Join(proj, "real", "id"), []byte("ok\n"), 0o644)
		msg, err := run(proj, filepath.Join(proj, "real"))
		if b, _ := os.ReadFile(stolen); string(b) != "ok\n" {
			t.Errorf("control: a bind of a real directory in the root failed (err=%v)\n%s", err, msg)
		}
	})
}
