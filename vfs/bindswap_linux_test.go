//go:build linux

package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// bindEntry lays what kpath.RootBinds lays over an entry: a bind of the
// host path src, cloned from a descriptor (recursively for a directory),
// ro,nosuid,nodev on the detached tree, over name below the view's mount.
func bindEntry(t *testing.T, mnt, name, src string) {
	t.Helper()
	fd, err := unix.Open(src, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	dir, err := unix.Open(mnt, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	o := linux.BindOptions{Recursive: st.Mode&unix.S_IFMT == unix.S_IFDIR,
		Attr: linux.MountAttr{Set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}}
	err = linux.BindDescriptor(fd, dir, name, o)
	if errors.Is(err, linux.ErrNoMountAPI) {
		testutil.Skip(t, "needs mount_setattr (Linux 5.12); the kernel data path is not offered on this kernel")
	}
	if err != nil {
		t.Fatalf("bind %s over %s: %v", src, name, err)
	}
	target := filepath.Join(mnt, name)
	t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW) })
}

// topMountOptions returns the per-mount options of the top mount at p
// ("ro,nosuid,nodev,relatime"), or "none" when p is not a mount point.
func topMountOptions(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	opts := "none"
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 5 && linux.UnescapeMountinfo(f[4]) == p {
			opts = f[5]
		}
	}
	return opts
}

// TestViewSwapBinds: the kernel behaviours the kernel data path relies on
// (docs/kernel-data-path.md), with the view as the FUSE server and no
// caching of entries, so every path walk revalidates the entry against the
// view's real LOOKUP. A bind over an entry survives an Install that keeps
// the root and the lookups after it; an Install that removes the root
// detaches it at once (a descriptor taken before keeps reading); one that
// replaces the root under the same name detaches it, and the entry shows
// the new host directory through the view (read-write) until the new bind
// (read-only) lands. The kept root's bind is the contrast of the removed
// one's.
func TestViewSwapBinds(t *testing.T) {
	h := hostTree(t)
	ws := mkdir(t, filepath.Join(h, "ws"))
	write(t, filepath.Join(ws, "whoami"), "host\n")
	one := write(t, filepath.Join(h, "one"), "hostfile\n")
	other := mkdir(t, filepath.Join(h, "elsewhere", "ws"))
	write(t, filepath.Join(other, "whoami"), "other\n")
	s := serve(t, serveConfig{Roots: []string{ws, one}, NoHostWatch: true, CacheTimeout: -1})
	wsIn, oneIn := filepath.Join(s.Mnt, "ws"), filepath.Join(s.Mnt, "one")

	want := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %q, want %q", what, got, want)
		}
	}
	read := func(p string) string {
		t.Helper()
		data, err := os.ReadFile(p)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(data)
	}
	bound := func(p string) bool {
		t.Helper()
		return strings.HasPrefix(topMountOptions(t, p), "ro,nosuid,nodev")
	}

	names, _ := os.ReadDir(s.Mnt)
	if len(names) != 2 || names[0].Name() != "one" || names[1].Name() != "ws" {
		t.Fatalf("the view lists %v, want one and ws", names)
	}
	want("ws before its bind", topMountOptions(t, wsIn), "none")
	want("ws through the view", read(filepath.Join(wsIn, "whoami")), "host\n")

	bindEntry(t, s.Mnt, "ws", ws)
	bindEntry(t, s.Mnt, "one", one)
	if !bound(wsIn) || !bound(oneIn) {
		t.Fatalf("after the binds: ws %q, one %q; want both ro,nosuid,nodev", topMountOptions(t, wsIn), topMountOptions(t, oneIn))
	}
	if err := os.WriteFile(filepath.Join(wsIn, "x"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("write below the read-only bind: %v, want EROFS (the bind, not the read-write view)", err)
	}

	// The same roots again: each path walk revalidates the kept entries.
	s.swap(ws, one)
	for range 3 {
		want("kept ws", read(filepath.Join(wsIn, "whoami")), "host\n")
		want("kept one", read(oneIn), "hostfile\n")
	}
	if !bound(wsIn) || !bound(oneIn) {
		t.Fatalf("an install that kept the roots dropped a bind: ws %q, one %q", topMountOptions(t, wsIn), topMountOptions(t, oneIn))
	}

	// ws removed: its bind goes at once; one's stays; a descriptor taken
	// before keeps reading.
	d, err := os.Open(wsIn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s.swap(one)
	if _, err := os.Stat(filepath.Join(wsIn, "whoami")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ws removed: stat below it: %v, want ENOENT", err)
	}
	want("ws removed", topMountOptions(t, wsIn), "none")
	if !bound(oneIn) {
		t.Fatalf("ws removed: one's bind went too (%q)", topMountOptions(t, oneIn))
	}
	fd, err := unix.Openat(int(d.Fd()), "whoami", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("ws removed: read through a descriptor taken before: %v", err)
	}
	f := os.NewFile(uintptr(fd), "whoami")
	buf := make([]byte, 16)
	n, _ := f.Read(buf)
	f.Close()
	want("ws removed, through a descriptor taken before", string(buf[:n]), "host\n")

	// ws back and bound, then re-pointed at another directory of the same
	// name: the bind goes, the view serves the new directory (read-write)
	// until the new bind lands.
	s.swap(ws, one)
	bindEntry(t, s.Mnt, "ws", ws)
	s.swap(other, one)
	want("ws re-pointed", topMountOptions(t, wsIn), "none")
	want("ws re-pointed, through the view", read(filepath.Join(wsIn, "whoami")), "other\n")
	if err := os.WriteFile(filepath.Join(wsIn, "x"), nil, 0o644); err != nil {
		t.Fatalf("ws re-pointed: write through the read-write view: %v", err)
	}
	bindEntry(t, s.Mnt, "ws", other)
	if err := os.WriteFile(filepath.Join(wsIn, "y"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("ws re-pointed and bound again: write: %v, want EROFS", err)
	}
	want("ws re-pointed and bound again", read(filepath.Join(wsIn, "whoami")), "other\n")
}
