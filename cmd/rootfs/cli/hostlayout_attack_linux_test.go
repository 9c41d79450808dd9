package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestRunAttackBindPointThroughPlantedLink (outside review of host
// layout): in host layout a --bind whose mount point lies inside a static
// root is mounted through the root, a host directory the server could
// write in an earlier session. A link it planted there (proj/evil ->
// a host directory outside every root) must not lead rootfs, root on the
// host, to make the missing mount point wherever the link points. Control:
// with a real directory in place of the link the mount point is made and
// the bind shows, so the same code path runs.
func TestRunAttackBindPointThroughPlantedLink(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	bin := worldBinary(t)
	for _, parent := range []string{"/var/tmp", "/tmp"} {
		t.Run(strings.TrimPrefix(parent, "/"), func(t *testing.T) {
			base, err := os.MkdirTemp(parent, "rootfs-attack-bindpoint-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(base) })
			os.Chmod(base, 0o755)
			proj, outside := filepath.Join(base, "proj"), filepath.Join(base, "outside")
			for _, d := range []string{proj, outside} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			src := filepath.Join(base, "src")
			if err := os.MkdirAll(src, 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(src, "bound.txt"), []byte("bound"), 0o644)
			run := func(dest string) (string, int) {
				t.Helper()
				cmd := exec.Command(bin, "run", "--root", proj, "--ro-bind", src+":"+dest, "--",
					"/bin/sh", "-c", "cat "+filepath.Join(dest, "bound.txt")+" >&2")
				cmd.Dir = "/"
				out, err := cmd.CombinedOutput()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				return string(out), code
			}
			// Control: a real directory on the way.
			if err := os.Mkdir(filepath.Join(proj, "real"), 0o755); err != nil {
				t.Fatal(err)
			}
			out, code := run(filepath.Join(proj, "real", "made"))
			if code != 0 || !strings.Contains(out, "bound") {
				t.Fatalf("control: a bind below a real directory of the root: exit %d\n%s", code, out)
			}
			// The attack: the link the server left behind.
			if err := os.Symlink(outside, filepath.Join(proj, "evil")); err != nil {
				t.Fatal(err)
			}
			out, code = run(filepath.Join(proj, "evil", "made"))
			if _, err := os.Lstat(filepath.Join(outside, "made")); err == nil {
				t.Errorf("rootfs made %s on the host through the planted link (exit %d)\n%s", filepath.Join(outside, "made"), code, out)
			}
			if code == 0 && strings.Contains(out, "bound") {
				t.Errorf("the bind was mounted through the planted link\n%s", out)
			}
		})
	}
}
