package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// Nested is the host tree of the nested-root attack, shared by the table's
// tests and the view's: Top/ws (served writable), Top/ws/app (a real
// directory, a nested root), and Top/secret (holding "token"), which no
// root holds.
type Nested struct {
	Top, WS, App, Secret string
}

// NewNested makes the tree in a temporary directory, symlinks resolved.
func NewNested(t testing.TB) Nested {
	t.Helper()
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := Nested{Top: top, WS: filepath.Join(top, "ws"), App: filepath.Join(top, "ws", "app"), Secret: filepath.Join(top, "secret")}
	for _, d := range []string{l.App, l.Secret} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(l.Secret, "token"), []byte("secret\n"), 0o600)
	return l
}

// Plant does what a server inside the sandbox would do through the /ws
// entry: mv /ws/app /ws/app.orig; ln -s <secret> /ws/app.
func (l Nested) Plant(t testing.TB) {
	t.Helper()
	if err := os.Rename(l.App, l.App+".orig"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(l.Secret, l.App); err != nil {
		t.Fatal(err)
	}
}
