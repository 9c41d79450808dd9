package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestRunHostLayout: what rootfs run's default layout puts where. Roots are
// at their own paths, below read-only directories that list only what
// leads to them; a root below /tmp is inside the server's private /tmp; the
// server starts in its first root and gets HOME when the home directory is
// a root; a root in a runtime directory keeps its flat name, with a
// warning; --layout flat gives the old names.
func TestRunHostLayout(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	bin := worldBinary(t)
	base, err := os.MkdirTemp("/tmp", "rootfs-hostlayout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	home := filepath.Join(base, "home", "me")
	proj := filepath.Join(base, "src", "proj")
	for _, d := range []string{home, proj, filepath.Join(base, "src", "other")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(proj, "f"), []byte("in proj"), 0o644)
	os.WriteFile(filepath.Join(base, "src", "beside"), []byte("beside"), 0o644)
	os.WriteFile(filepath.Join(home, ".profile"), []byte("home"), 0o644)

	run := func(env []string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = "/"
		cmd.Env = append(os.Environ(), env...)
		pr, pw, _ := os.Pipe()
		defer pw.Close()
		cmd.Stdin = pr
		out, err := cmd.CombinedOutput()
		pr.Close()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	script := `exec 1>&2
echo "pwd=$(pwd)"
echo "home=$HOME"
echo "tmp=$(ls /tmp | tr '\n' ,)"
echo "base=$(ls ` + base + ` | tr '\n' ,)"
echo "src=$(ls ` + filepath.Join(base, "src") + ` | tr '\n' ,)"
echo "mode=$(stat -c %a:%u ` + filepath.Join(base, "src") + `)"
echo "read=$(cat ` + filepath.Join(proj, "f") + `)"
echo "profile=$(cat ` + filepath.Join(home, ".profile") + `)"
cat ` + filepath.Join(base, "src", "beside") + ` 2>/dev/null && echo "LEAK beside"
mkdir ` + filepath.Join(base, "src", "new") + ` 2>/dev/null && echo "LEAK mkdir"
true`
	out, code := run([]string{"HOME=" + home}, "run", "--root", proj, "--root", home, "--", "/bin/sh", "-c", script)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"pwd=" + proj,  // the first root
		"home=" + home, // the home directory is a root
		"tmp=" + filepath.Base(base) + ",",
		"base=home,src,",
		"src=proj,", // not other, not beside
		"mode=555:0",
		"read=in proj",
		"profile=home",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("want %q in the server's output:\n%s", want, out)
		}
	}
	if strings.Contains(out, "LEAK") {
		t.Errorf("the synthetic directories leak or can be changed:\n%s", out)
	}

	// Not a root: HOME stays private and the server starts where its
	// first root is.
	out, code = run([]string{"HOME=" + home}, "run", "--root", proj, "--", "/bin/sh", "-c", script)
	if code != 0 || !strings.Contains(out, "home=/tmp\n") || !strings.Contains(out, "pwd="+proj+"\n") || !strings.Contains(out, "base=src,\n") {
		t.Errorf("exit %d; want home=/tmp, pwd=%s, base=src:\n%s", code, proj, out)
	}

	// A root in a runtime directory keeps its flat name, and says so.
	usrRoot := "/usr/share"
	out, code = run(nil, "run", "--root", proj, "--root", usrRoot, "--", "/bin/sh", "-c", "test -d /share && test -d /usr/share && echo both >&2")
	if code != 0 || !strings.Contains(out, "both") || !strings.Contains(out, "root not at its own path") || !strings.Contains(out, `lies in the sandbox's own /usr`) {
		t.Errorf("root below /usr: exit %d, want it at /share with a warning:\n%s", code, out)
	}

	// The sandbox's other directories: a root in /etc keeps its flat name
	// (the sandbox's /etc holds a short list of host files), one in /var
	// is at its path (the view owns /var: nothing else is there), /proc
	// is never a root.
	varRoot, err := os.MkdirTemp("/var/tmp", "rootfs-hostlayout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(varRoot) })
	os.WriteFile(filepath.Join(varRoot, "v"), []byte("in var"), 0o644)
	out, code = run(nil, "run", "--root", varRoot, "--root", "/etc/ssl", "--root", "/proc/self", "--", "/bin/sh", "-c",
		"cat "+varRoot+"/v >&2; test -d /ssl && echo ' ssl-flat' >&2; ls /var >&2")
	if code != 0 || !strings.Contains(out, "in var ssl-flat\ntmp\n") || !strings.Contains(out, `lies in the sandbox's own /etc`) || !strings.Contains(out, "kernel file system") {
		t.Errorf("roots in /var, /etc, /proc: exit %d\n%s", code, out)
	}

	// --layout flat: the old names.
	out, code = run(nil, "run", "--layout", "flat", "--root", proj, "--", "/bin/sh", "-c", `cat /proj/f >&2; echo " pwd=$(pwd)" >&2`)
	if code != 0 || !strings.Contains(out, "in proj pwd=/\n") {
		t.Errorf("--layout flat: exit %d, want /proj and pwd /:\n%s", code, out)
	}
	out, code = run(nil, "run", "--layout", "tree", "--", "/bin/true")
	if code != 125 || !strings.Contains(out, "--layout") {
		t.Errorf("--layout tree: exit %d, want 125 naming --layout:\n%s", code, out)
	}
}
