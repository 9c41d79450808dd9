package cli

import (
	"bytes"
	"context"
	"os"
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
