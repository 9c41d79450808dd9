//go:build linux

package vfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/testutil"
	"github.com/rootfs-dev/rootfs/rootset"
)

func table(t *testing.T, paths ...string) *rootset.Table {
	t.Helper()
	var rs []rootset.Root
	for _, p := range paths {
		rs = append(rs, rootset.Root{URI: p})
	}
	tb := rootset.BuildTable(rs, rootset.TableOptions{})
	t.Cleanup(func() { tb.Close() })
	if len(tb.Skipped()) > 0 {
		t.Fatalf("skipped: %v", tb.Skipped()[0].Reason)
	}
	return tb
}

func TestCheckMountpoint(t *testing.T) {
	top := t.TempDir()
	root := filepath.Join(top, "root")
	deep := filepath.Join(root, "a", "b")
	os.MkdirAll(deep, 0o755)
	file := filepath.Join(top, "file")
	os.WriteFile(file, nil, 0o644)
	free := filepath.Join(top, "free")
	os.Mkdir(free, 0o755)
	tb := table(t, root)
	tests := []struct {
		name, dir string
		wantErr   error
		wantText  string
	}{
		{"fine", free, nil, ""},
		{"contains a root", top, nil, ""},
		{"missing", filepath.Join(top, "nope"), ErrBadMountpoint, "does not exist"},
		{"a file", file, ErrBadMountpoint, "not a directory"},
		{"the root itself", root, ErrBadMountpoint, "is root"},
		{"inside a root", deep, ErrBadMountpoint, "is inside root"},
		{"empty", "", ErrBadMountpoint, "no mount point"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckMountpoint(tt.dir, tb, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("CheckMountpoint(%q) = %v, want %v", tt.dir, err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tt.wantText) || strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q: want one line containing %q", err, tt.wantText)
				}
			}
		})
	}
}

func mountedAt(p string) bool {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == p {
			return true
		}
	}
	return false
}

// mountTest mounts a view of one root; the test process serves, so the
// mount is only touched by subprocesses (ls, sh).
func mountTest(t *testing.T) (m *Mount, root string) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	top := t.TempDir()
	root = filepath.Join(top, "r")
	os.Mkdir(root, 0o755)
	os.WriteFile(filepath.Join(root, "hello"), []byte("hi"), 0o644)
	mnt := filepath.Join(top, "mnt")
	os.Mkdir(mnt, 0o755)
	v := NewView(Options{Logger: zaptest.NewLogger(t)})
	if err := v.swap(rootset.BuildTable([]rootset.Root{{URI: root}}, rootset.TableOptions{})); err != nil {
		t.Fatal(err)
	}
	m, err := v.Mount(mnt, MountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Unmount()
		if mountedAt(mnt) {
			unix.Unmount(mnt, unix.MNT_DETACH)
			t.Errorf("left %s mounted", mnt)
		}
		v.Close()
	})
	return m, root
}

func TestMountViewLifecycle(t *testing.T) {
	m, _ := mountTest(t)
	if !mountedAt(m.Dir()) {
		t.Fatalf("not mounted after Mount returned")
	}
	out, err := exec.Command("ls", m.Dir()).Output()
	if err != nil || string(out) != "r\n" {
		t.Fatalf("ls = %q, %v", out, err)
	}
	out, err = exec.Command("cat", filepath.Join(m.Dir(), "r", "hello")).Output()
	if err != nil || string(out) != "hi" {
		t.Fatalf("cat = %q, %v", out, err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatalf("second Unmount: %v", err)
	}
	if mountedAt(m.Dir()) {
		t.Fatalf("still mounted")
	}
	waitOrFail(t, m)
}

func waitOrFail(t *testing.T, m *Mount) {
	t.Helper()
	done := make(chan struct{})
	go func() { m.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("server still serving after unmount")
	}
}

func TestUnmountAlreadyUnmounted(t *testing.T) {
	m, _ := mountTest(t)
	if err := unix.Unmount(m.Dir(), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatalf("Unmount after an external unmount: %v", err)
	}
	waitOrFail(t, m)
}

func TestUnmountBusyDetaches(t *testing.T) {
	m, _ := mountTest(t)
	sh := exec.Command("/bin/sh", "-c", "read x")
	sh.Dir = filepath.Join(m.Dir(), "r") // the child's cwd keeps the mount busy
	in, _ := sh.StdinPipe()
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatalf("Unmount of a busy mount: %v", err)
	}
	if mountedAt(m.Dir()) {
		t.Errorf("busy mount not detached")
	}
	in.Close()
	sh.Wait()
	waitOrFail(t, m)
}

func TestMountInsideRootRefused(t *testing.T) {
	testutil.RequireRoot(t)
	top := t.TempDir()
	inner := filepath.Join(top, "inner")
	os.Mkdir(inner, 0o755)
	v := NewView(Options{})
	defer v.Close()
	v.swap(rootset.BuildTable([]rootset.Root{{URI: top}}, rootset.TableOptions{}))
	_, err := v.Mount(inner, MountOptions{})
	if !errors.Is(err, ErrBadMountpoint) {
		t.Fatalf("Mount inside a root: %v, want ErrBadMountpoint", err)
	}
}
