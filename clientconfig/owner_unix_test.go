//go:build unix

package clientconfig

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteKeepsOwner: as root ("sudo rootfs wrap"), the rewritten file and
// its backup keep the user's ownership. Without keepOwner, the rename would
// leave a root-owned file the user's client could not rewrite.
func TestWriteKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own a file as another user")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(p, fixtures[0].read(t), 0o644); err != nil {
		t.Fatal(err)
	}
	const uid, gid = 4321, 4322
	if err := os.Chown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
	r, err := Plan(Location{Path: p, Format: JSONC, Servers: []string{"/servers"}}, Wrap, Options{Rootfs: testRootfs})
	if err != nil {
		t.Fatal(err)
	}
	backup, err := r.Write()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{p, backup} {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		s := st.Sys().(*syscall.Stat_t)
		if s.Uid != uid || s.Gid != gid {
			t.Errorf("%s: owner %d:%d, want %d:%d", name, s.Uid, s.Gid, uid, gid)
		}
	}
}
