package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingRootFailsClosed: a --root or --roots-file entry that names
// nothing is an error with exit status 125 and one line naming it and the
// fix, in run and in mount, before anything starts. (It was a warning and
// a server or mount with no roots.)
func TestMissingRootFailsClosed(t *testing.T) {
	base := t.TempDir()
	missing := filepath.Join(base, "nope")
	rf := filepath.Join(base, "roots.json")
	if err := os.WriteFile(rf, []byte(`{"roots":[{"uri":"file://`+missing+`"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(base, "ran")
	for _, args := range [][]string{
		{"run", "--root", missing, "--", "/bin/sh", "-c", "touch " + mark},
		{"run", "--roots-file", rf, "--", "/bin/sh", "-c", "touch " + mark},
		{"run", "--dry-run", "--root", missing, "--", "/bin/true"},
		{"mount", "--root", missing, filepath.Join(base, "view")},
		{"mount", "--roots-file", rf, filepath.Join(base, "view")},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(args, &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != 125 || len(lines) != 1 || !strings.Contains(lines[0], missing+": no such file or directory; create it or correct the path") {
			t.Errorf("%q: exit %d, stderr %q; want 125 and one line naming %s", args, code, stderr.String(), missing)
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the server ran with a missing root")
	}
	// Control: the same commands with an existing root get past the check.
	var stderr bytes.Buffer
	if code := Main([]string{"run", "--dry-run", "--root", base, "--", "/bin/true"}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Errorf("control: exit %d: %s", code, stderr.String())
	}
}
