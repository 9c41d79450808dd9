package cli

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/mountmgr"
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

// TestRunDryRunLauncherCache: --dry-run says where the server's writes to
// a launcher's cache go (its own layer and how to reset it, or, with
// --cache-writes discard, that they vanish) and makes nothing.
func TestRunDryRunLauncherCache(t *testing.T) {
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("no npx on PATH")
	}
	base, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(base, "home")
	proj := filepath.Join(base, "proj")
	for _, d := range []string{filepath.Join(home, ".npm", "_npx"), proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	for _, k := range []string{"XDG_STATE_HOME", "npm_config_cache", "NPM_CONFIG_CACHE"} {
		t.Setenv(k, "")
	}
	cache := filepath.Join(home, ".npm")
	layers := mountmgr.LayerBase(home, "")
	for _, tt := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{"kept", nil, []string{"npm cache, never written", "writes kept in " + layers + "/npx-server-memory-", "/upper for its next start", "(rm -r " + layers + "/npx-server-memory-"}},
		{"discarded", []string{"--cache-writes", "discard"}, []string{"npm cache, never written", "writes go to its /tmp and vanish"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append(append([]string{"run", "--dry-run", "--root", proj}, tt.flags...), "--", "npx", "-y", "@modelcontextprotocol/server-memory")
			if code := Main(args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			found := false
			for _, l := range strings.Split(stdout.String(), "\n") {
				ok := strings.HasPrefix(strings.TrimSpace(l), cache+" ")
				for _, w := range tt.want {
					ok = ok && strings.Contains(l, w)
				}
				found = found || ok
			}
			if !found {
				t.Errorf("no line for %s with %q in:\n%s", cache, tt.want, stdout.String())
			}
			if _, err := os.Stat(filepath.Join(home, ".local")); err == nil {
				t.Errorf("--dry-run made the state directory")
			}
		})
	}
	var stderr bytes.Buffer
	if code := Main([]string{"run", "--cache-writes", "sometimes", "--", "npx", "x"}, io.Discard, &stderr); code != 125 || !strings.Contains(stderr.String(), "--cache-writes") {
		t.Errorf("--cache-writes sometimes: exit %d, %q; want 125 naming the flag", code, stderr.String())
	}
}
