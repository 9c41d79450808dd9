package clientconfig

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteRefusesSwappedDirectory: the directory holding the file is
// replaced by a symlink after Plan (a user racing "sudo rootfs wrap");
// Write must not create the backup or the new file where the link points.
// Control: without the swap the same Write succeeds.
func TestWriteRefusesSwappedDirectory(t *testing.T) {
	base := t.TempDir()
	for _, swap := range []bool{false, true} {
		user := filepath.Join(base, "user", ".cursor")
		victim := filepath.Join(base, "victim")
		os.RemoveAll(filepath.Join(base, "user"))
		os.RemoveAll(victim)
		if err := os.MkdirAll(user, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(user, "mcp.json")
		content := fixtures[0].read(t)
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Plan(Location{Path: p, Format: JSONC, Servers: []string{"/servers"}}, Wrap, Options{Rootfs: testRootfs})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Changed() {
			t.Fatal("fixture: nothing to wrap")
		}
		if swap {
			// The victim directory holds the same bytes (in a real race
			// the swap comes after Write's comparison).
			if err := os.MkdirAll(victim, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(victim, "mcp.json"), content, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(user, user+".moved"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, user); err != nil {
				t.Fatal(err)
			}
		}
		_, err = r.Write(filepath.Join(base, "state"))
		if !swap {
			if err != nil {
				t.Fatalf("control: %v", err)
			}
			continue
		}
		if !errors.Is(err, ErrChanged) {
			t.Errorf("Write after the swap: %v, want ErrChanged", err)
		}
		ents, _ := os.ReadDir(victim)
		for _, e := range ents {
			if e.Name() != "mcp.json" {
				t.Errorf("Write created %s in the directory the symlink names", e.Name())
			}
		}
		if b, _ := os.ReadFile(filepath.Join(victim, "mcp.json")); string(b) != string(content) {
			t.Errorf("Write rewrote the file in the directory the symlink names")
		}
	}
}
