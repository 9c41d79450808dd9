//go:build unix

package clientconfig

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWriteKeepsOwner: as root ("sudo rootfs wrap" keeping the user's
// HOME), the rewritten file and its backup keep the user's ownership, and
// the directories made for the backup in the user's state directory are
// the user's too. Without keepOwner, the rename would leave a root-owned
// file the user's client could not rewrite.
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
	state := filepath.Join(dir, "home", ".local", "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{p, state} {
		if err := os.Chown(name, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Plan(Location{Path: p, Format: JSONC, Servers: []string{"/servers"}}, Wrap, Options{Rootfs: testRootfs})
	if err != nil {
		t.Fatal(err)
	}
	backup, err := r.Write(filepath.Join(state, "rootfs", "backups"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{p, backup, filepath.Join(state, "rootfs"), filepath.Dir(backup)} {
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

// TestPlanRefusesForeignLinkTarget: as root, a config reached through a
// user's symlink (in the last component or in a directory above it) that
// leads to a file the user does not own is refused; the control is the
// same link leading to a file the user owns, which is planned.
func TestPlanRefusesForeignLinkTarget(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own files as another user")
	}
	const user = 4321
	dir := t.TempDir()
	victim := filepath.Join(dir, "etc")
	if err := os.Mkdir(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "mcp.json"), fixtures[0].read(t), 0o644); err != nil {
		t.Fatal(err) // owned by root
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	fileLink := filepath.Join(home, "mcp.json")
	dirLink := filepath.Join(home, ".cursor")
	for link, to := range map[string]string{fileLink: filepath.Join(victim, "mcp.json"), dirLink: victim} {
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(link, user, user); err != nil {
			t.Fatal(err)
		}
	}
	plan := func(p string) error {
		_, err := Plan(Location{Path: p, Format: JSONC, Servers: []string{"/servers"}}, Wrap, Options{Rootfs: testRootfs})
		return err
	}
	for _, p := range []string{fileLink, filepath.Join(dirLink, "mcp.json")} {
		if err := plan(p); err == nil || !strings.Contains(err.Error(), "reached through the symlink") {
			t.Errorf("%s: Plan = %v, want a refusal", p, err)
		}
	}
	// Control: the user owns the target, so the same links are followed.
	if err := os.Chown(filepath.Join(victim, "mcp.json"), user, user); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fileLink, filepath.Join(dirLink, "mcp.json")} {
		if err := plan(p); err != nil {
			t.Errorf("%s: Plan = %v, want it planned", p, err)
		}
	}
}

// TestBackupRefusesPlantedLink: as root, a symlink a user planted in the
// backup directory's path (to /etc, say) is not followed: no backup is
// written through it and the file is left as it was. The control is the
// same Write without the link.
func TestBackupRefusesPlantedLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own files as another user")
	}
	const user = 4321
	for _, plant := range []bool{false, true} {
		dir := t.TempDir()
		p := filepath.Join(dir, "mcp.json")
		orig := fixtures[0].read(t)
		if err := os.WriteFile(p, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		victim := filepath.Join(dir, "etc")
		state := filepath.Join(dir, "state")
		for _, d := range []string{victim, filepath.Join(state, "rootfs", "backups")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{p, state, filepath.Join(state, "rootfs"), filepath.Join(state, "rootfs", "backups")} {
			if err := os.Chown(name, user, user); err != nil {
				t.Fatal(err)
			}
		}
		top := strings.Split(strings.TrimPrefix(p, "/"), "/")[0] // the first directory of the backup's path
		if plant {
			link := filepath.Join(state, "rootfs", "backups", top)
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(link, user, user); err != nil {
				t.Fatal(err)
			}
		}
		r, err := Plan(Location{Path: p, Format: JSONC, Servers: []string{"/servers"}}, Wrap, Options{Rootfs: testRootfs})
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Write(filepath.Join(state, "rootfs", "backups"))
		if !plant {
			if err != nil {
				t.Fatalf("control: %v", err)
			}
			continue
		}
		if err == nil {
			t.Error("Write followed the planted link")
		}
		if ents, _ := os.ReadDir(victim); len(ents) != 0 {
			t.Errorf("Write made %s in the directory the link names", ents[0].Name())
		}
		if b, _ := os.ReadFile(p); string(b) != string(orig) {
			t.Error("the file was rewritten without a backup")
		}
	}
}
