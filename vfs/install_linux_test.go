//go:build linux

package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/rootfs-dev/rootfs/internal/testutil"
	"github.com/rootfs-dev/rootfs/rootset"
)

// mountInProcess mounts a view of one root at top/mnt, served by this
// process (moved from mountmgr's mountTest): only Install resolves roots
// through it, and the serving goroutines answer.
func mountInProcess(t *testing.T) (v *View, root, mnt string) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	top := t.TempDir()
	root = filepath.Join(top, "r")
	os.Mkdir(root, 0o755)
	mnt = filepath.Join(top, "mnt")
	os.Mkdir(mnt, 0o755)
	v = NewView(Options{Logger: zaptest.NewLogger(t), NoHostWatch: true})
	if _, err := v.Install([]rootset.Root{{URI: root}}); err != nil {
		t.Fatal(err)
	}
	m, err := v.Mount(mnt, MountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Unmount()
		v.Close()
	})
	return v, root, mnt
}

// TestInstallAfterMount (was mountmgr's TestCheckTableAfterMount): once
// mounted, the view refuses a table with a root at or above its mount
// point, and keeps serving what it served.
func TestInstallAfterMount(t *testing.T) {
	v, root, mnt := mountInProcess(t)
	if _, err := v.Install([]rootset.Root{{URI: root}}); err != nil {
		t.Errorf("unrelated root refused: %v", err)
	}
	if _, err := v.Install([]rootset.Root{{URI: filepath.Dir(mnt)}}); !errors.Is(err, ErrBadMountpoint) {
		t.Errorf("root above the mount point: %v, want ErrBadMountpoint", err)
	}
	if e := v.Table().Entries(); len(e) != 1 || e[0].HostPath != root {
		t.Errorf("after a refused install the view serves %v, want only %s", e, root)
	}
}

// TestInstallRefusesTheViewItself (was mountmgr's
// TestCheckTableRefusesTheViewItself): a client root that names the mount
// point, or an entry inside it, would make the view serve itself.
// (Resolving such a root from this process is a stat through the mount,
// answered by the serving goroutines.)
func TestInstallRefusesTheViewItself(t *testing.T) {
	v, _, mnt := mountInProcess(t)
	for _, p := range []string{mnt, filepath.Join(mnt, "r")} {
		tab, err := v.Install([]rootset.Root{{URI: p}})
		if len(tab.Entries()) != 1 {
			t.Fatalf("%s: table %v (skipped %v)", p, tab.Entries(), tab.Skipped())
		}
		if !errors.Is(err, ErrBadMountpoint) {
			t.Errorf("root %s inside the view: %v, want ErrBadMountpoint", p, err)
		}
		// Negative control: without the view's device number, the
		// identities recorded before mounting do not catch it.
		self := v.self.Load()
		blind := &mountSelf{dir: self.dir, chain: self.chain}
		if err := blind.check(tab); err != nil {
			t.Errorf("control: the pre-mount identities alone refused %s: %v", p, err)
		}
	}
}
