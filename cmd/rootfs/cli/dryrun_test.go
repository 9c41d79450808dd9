package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunDryRun: --dry-run prints the whole sandbox, each auto-bind with
// its reason and its size in files, and starts nothing (the command would
// leave a mark).
func TestRunDryRun(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(base, "home")
	proj := filepath.Join(base, "proj")
	prefix := filepath.Join(base, "opt", "py")
	mark := filepath.Join(base, "ran")
	for p, body := range map[string]string{
		filepath.Join(proj, "a.txt"):                        "a",
		filepath.Join(proj, "sub", "b.txt"):                 "b",
		filepath.Join(prefix, "lib", "python3.11", "os.py"): "",
		filepath.Join(prefix, "notes.txt"):                  "private",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	py := filepath.Join(prefix, "bin", "python3")
	srv := filepath.Join(base, "srv")
	for p, body := range map[string]string{py: "#!/bin/sh\ntouch " + mark + "\n", srv: "#!" + py + "\n"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	var stdout, stderr bytes.Buffer
	code := Main([]string{"run", "--dry-run", "--root", proj, "--ro-bind", filepath.Join(proj, "sub"), "--setenv", "TOKEN=hunter2", "--", srv}, &stdout, &stderr)
	out := stdout.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("--dry-run ran the command")
	}
	line := func(parts ...string) {
		t.Helper()
		for _, l := range strings.Split(out, "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(l, p)
			}
			if ok {
				return
			}
		}
		t.Errorf("no line with %q in:\n%s", parts, out)
	}
	line(proj, "2 files")
	line("/usr", "files")
	line(filepath.Join(prefix, "bin"), "1 file", "interpreter lib")
	line(filepath.Join(prefix, "lib"), "1 file", "interpreter lib")
	line(srv, "1 file", "command")
	line(filepath.Join(proj, "sub"), "1 file", "read-only")
	line("TOKEN=(from --setenv)")
	line("working directory: " + proj)
	if strings.Contains(out, "hunter2") {
		t.Errorf("a --setenv value was printed:\n%s", out)
	}
	if strings.Contains(out, prefix+" ") || strings.Contains(out, "notes.txt") {
		t.Errorf("the prefix itself is listed:\n%s", out)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
}
