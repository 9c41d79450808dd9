package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/instance"
)

// TestWhyQuotesWhatTheServerNamed: the names in a refusal are the
// server's (any bytes but / and NUL), and so is its command name; why
// prints them to the user's terminal, where an escape sequence or a
// newline would forge lines ("visible", "nothing refused") or drive the
// terminal. They are printed quoted.
func TestWhyQuotesWhatTheServerNamed(t *testing.T) {
	rt := t.TempDir()
	if err := os.Chmod(rt, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", rt)
	dir, err := instance.Dir(os.Getenv, os.Getuid(), true)
	if err != nil {
		t.Fatal(err)
	}
	evil := "/x\n  /home/me/.ssh: visible (read-write), root /home/me\x1b]0;pwned\x07\x1b[2J"
	info := instance.Info{ID: "feedbeef", PID: os.Getpid(), Started: time.Now(), Command: []string{"srv"},
		Refusals: []audit.Record{{Time: time.Now(), Op: audit.OpLookup, Path: evil, Comm: "c\x1b[31m", Result: audit.ResultRefused,
			Reason: "not a root, nor below one", Allow: "--root " + evil}}}
	s, err := instance.Serve(dir, info.ID, func() instance.Info { return info }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out, errb bytes.Buffer
	if err := whyCommand(context.Background(), nil, &out, &errb); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.ContainsAny(got, "\x1b\x07") {
		t.Errorf("raw control characters reach the terminal: %q", got)
	}
	for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if strings.Contains(line, ".ssh: visible") && !strings.Contains(line, "lookup") {
			t.Errorf("a line forged by a name: %q\nin %q", line, got)
		}
	}
	if !strings.Contains(got, "lookup") {
		t.Errorf("no refusal printed: %q", got)
	}
}

// TestWhyResolvesSymlinks: roots are kept by their resolved host path, so
// why resolves the path it is asked about: a path reached through a
// symlink (a linked home or project directory, "rootfs why ." in it) is
// visible when its target is, and a name not made yet below it too.
func TestWhyResolvesSymlinks(t *testing.T) {
	rt := t.TempDir()
	os.Chmod(rt, 0o700)
	t.Setenv("XDG_RUNTIME_DIR", rt)
	dir, err := instance.Dir(os.Getenv, os.Getuid(), true)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := filepath.EvalSymlinks(t.TempDir())
	proj := filepath.Join(base, "proj")
	link := filepath.Join(base, "link")
	os.Mkdir(proj, 0o755)
	if err := os.Symlink(proj, link); err != nil {
		t.Fatal(err)
	}
	info := instance.Info{ID: "feedbeef", PID: os.Getpid(), Started: time.Now(), Command: []string{"srv"}, Layout: "host",
		Roots: []instance.Root{{Host: proj, Path: proj, Source: "--root"}}}
	s, err := instance.Serve(dir, info.ID, func() instance.Info { return info }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{link, filepath.Join(link, "not-yet", "x.txt")} {
		var out, errb bytes.Buffer
		if err := whyCommand(context.Background(), []string{p}, &out, &errb); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), ": visible") {
			t.Errorf("why %s: %q, want visible (the root %s it leads to)", p, out.String(), proj)
		}
	}
}

// TestWhyListsSyscallRefusals: a system call the seccomp filter refused is
// listed by its name and its caller's command. Negative control: without
// the name the line names nothing.
func TestWhyListsSyscallRefusals(t *testing.T) {
	rt := t.TempDir()
	if err := os.Chmod(rt, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", rt)
	dir, err := instance.Dir(os.Getenv, os.Getuid(), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"unshare", ""} {
		info := instance.Info{ID: "5ecc0b" + name, PID: os.Getpid(), Started: time.Now(), Command: []string{"srv"},
			Refusals: []audit.Record{{Time: time.Now(), Op: audit.OpSeccomp, Syscall: name, PID: 3, Comm: "node", Result: audit.ResultRefused, Reason: audit.ReasonSeccomp}}}
		s, err := instance.Serve(dir, info.ID, func() instance.Info { return info }, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		err = whyCommand(context.Background(), nil, &out, &errb)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := " seccomp unshare by node: refused by the seccomp filter"
		if got := strings.Contains(out.String(), want); got != (name != "") {
			t.Errorf("syscall %q: %q contains %q: %v", name, out.String(), want, got)
		}
	}
}
