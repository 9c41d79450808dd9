//go:build linux

package linux

// The kernel behaviour the kernel data path (issue 13) relies on, each
// shown with the contrast that makes the test able to fail. See
// docs/kernel-data-path.md for what they establish and why it matters.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const hour = time.Hour

// TestKernelPathBindReachesNamespaces: a bind made by the FUSE server
// from a descriptor, over an entry of its own mount, serves the host tree
// in its namespace, in a namespace created after it, in a namespace created
// before it if that namespace's copy of the mount is a slave of the
// server's (shared) mount, and, through setns from a thread, in one that is
// not. The private namespace, which propagation does not reach, is the
// control.
func TestKernelPathBindReachesNamespaces(t *testing.T) {
	host, hostFile := hostTree(t)
	s := startServer(t, hour, map[string]string{"ws": "dir", "one": "file", "other": "dir"}, nil, "")
	ws, one := filepath.Join(s.mnt, "ws"), filepath.Join(s.mnt, "one")

	s.want("ok", "share")
	s.wantHas("ok", "spawn same same")
	s.wantHas("ok", "spawn slave newns")
	s.want("ok", "p slave slave %s", s.mnt)
	s.wantHas("ok", "spawn priv newns")
	s.want("ok", "p priv private %s", s.mnt)

	// Before any bind every entry is served by FUSE.
	for _, p := range []string{"same", "slave", "priv"} {
		s.want("ok fuse", "p %s read %s/whoami", p, ws)
	}

	// A process already inside the FUSE-served entry stays there.
	s.want("ok", "p same chdir %s", ws)

	s.want("ok", "bind ws %s", host)
	s.want("ok", "bind one %s", hostFile)

	s.want("ok fuse", "p same read whoami")
	s.want("ok host", "p same read %s/whoami", ws)
	s.want("ok hostfile", "p same read %s", one)
	s.wantHas("nosuid,nodev", "p same mountinfo %s", ws)
	s.want("ok host", "p slave read %s/whoami", ws)
	s.want("ok hostfile", "p slave read %s", one)
	// Control: a private copy made before the bind does not get it.
	s.want("ok fuse", "p priv read %s/whoami", ws)
	s.want("ok none", "p priv mountinfo %s", ws)

	// A namespace made after the bind copies it.
	s.wantHas("ok", "spawn after newns")
	s.want("ok host", "p after read %s/whoami", ws)

	// setns from a locked thread of the server reaches the private one.
	s.want("ok", "bindns priv %s/ws %s", s.mnt, host)
	s.want("ok host", "p priv read %s/whoami", ws)
	// ... and only it: the server's own namespace did not get a second bind
	// on "other".
	s.want("ok", "bindns priv %s/other %s", s.mnt, host)
	s.want("ok host", "p priv read %s/other/whoami", s.mnt)
	s.want("ok fuse", "p same read %s/other/whoami", s.mnt)
}

// TestKernelPathNotifyDeleteDetaches: FUSE_NOTIFY_DELETE of an entry
// detaches every bind on it, in every namespace, in the same step; a new
// lookup is ENOENT at once; a descriptor and a working directory taken
// before keep reading the host tree (the detach is lazy). Single-file
// entries behave the same. The control is a bind on an entry that is not
// removed.
func TestKernelPathNotifyDeleteDetaches(t *testing.T) {
	host, hostFile := hostTree(t)
	s := startServer(t, hour, map[string]string{"ws": "dir", "one": "file", "keep": "dir"}, nil, "")
	ws, one, keep := filepath.Join(s.mnt, "ws"), filepath.Join(s.mnt, "one"), filepath.Join(s.mnt, "keep")
	s.want("ok", "share")
	s.wantHas("ok", "spawn same same")
	s.wantHas("ok", "spawn slave newns")
	s.want("ok", "p slave slave %s", s.mnt)
	s.wantHas("ok", "spawn priv newns")
	s.want("ok", "p priv private %s", s.mnt)

	s.want("ok", "bind ws %s", host)
	s.want("ok", "bind one %s", hostFile)
	s.want("ok", "bind keep %s", host)
	s.want("ok", "bindns priv %s/ws %s", s.mnt, host)
	s.want("ok", "bindns priv %s/keep %s", s.mnt, host)
	for _, p := range []string{"same", "slave", "priv"} {
		s.want("ok host", "p %s read %s/whoami", p, ws)
	}
	s.want("ok", "p same open d %s", ws)
	s.want("ok", "p same open f %s", one)
	s.want("ok", "p slave chdir %s", ws)

	s.want("ok", "remove ws")
	s.want("ok", "remove one")
	for _, p := range []string{"same", "slave", "priv"} {
		s.want("err ENOENT", "p %s read %s/whoami", p, ws)
		s.want("err ENOENT", "p %s read %s", p, one)
		s.want("ok none", "p %s mountinfo %s", p, ws)
		s.want("ok none", "p %s mountinfo %s", p, one)
		s.want("ok keep", "p %s ls %s", p, s.mnt)
		// Control: the bind on the entry that stayed is untouched.
		s.want("ok host", "p %s read %s/whoami", p, keep)
	}
	// Taken before: still the host's, through the detached mount.
	s.want("ok host", "p same readat d whoami")
	s.want("ok hostfile", "p same readat f")
	s.want("ok host", "p slave read whoami")
	s.want("ok whoami", "p slave ls .")
	// The detached mount's root is its own parent: ".." does not climb
	// back into the view.
	s.want("ok whoami", "p slave ls ..")
}

// TestKernelPathNotifyEntryDetaches: FUSE_NOTIFY_INVAL_ENTRY of a name
// that still exists also detaches the bind (d_invalidate), and the entry
// is then served by FUSE again. The view must therefore never send it for
// an entry it keeps. The control is the read before the notification.
func TestKernelPathNotifyEntryDetaches(t *testing.T) {
	host, _ := hostTree(t)
	s := startServer(t, hour, map[string]string{"ws": "dir"}, nil, "")
	ws := filepath.Join(s.mnt, "ws")
	s.wantHas("ok", "spawn same same")
	s.want("ok", "bind ws %s", host)
	s.want("ok host", "p same read %s/whoami", ws)
	s.want("ok", "inval ws")
	s.want("ok none", "p same mountinfo %s", ws)
	s.want("ok fuse", "p same read %s/whoami", ws)
}

// TestKernelPathRevalidation: with no entry cache at all (every path walk
// revalidates the entry with a LOOKUP), a bind survives as long as the
// server answers with the same node, and survives FUSE_NOTIFY_INVAL_INODE
// of the entry; when the answer is another node (a swap that replaced the
// entry without telling the kernel) or an error, the kernel drops the
// dentry and the bind with it, and the entry is FUSE-served.
func TestKernelPathRevalidation(t *testing.T) {
	host, hostFile := hostTree(t)
	s := startServer(t, 0, map[string]string{"ws": "dir", "one": "file"}, nil, "")
	ws, one := filepath.Join(s.mnt, "ws"), filepath.Join(s.mnt, "one")
	s.wantHas("ok", "spawn same same")
	s.want("ok", "bind ws %s", host)
	s.want("ok", "bind one %s", hostFile)
	before := s.do("lookups ws")
	for i := 0; i < 3; i++ {
		s.want("ok host", "p same read %s/whoami", ws)
		s.want("ok hostfile", "p same read %s", one)
	}
	if after := s.do("lookups ws"); after == before {
		t.Fatalf("the reads sent no LOOKUP (%s), so nothing was revalidated", after)
	}
	// Dropping the entry's attributes and pages is not a dentry
	// invalidation: the bind stays.
	s.want("ok", "invalinode ws")
	s.want("ok host", "p same read %s/whoami", ws)
	s.wantHas("nosuid", "p same mountinfo %s", ws)
	s.want("ok", "renew ws")
	s.want("ok", "renew one")
	s.want("ok fuse", "p same read %s/whoami", ws)
	s.want("ok fuse", "p same read %s", one)
	s.want("ok none", "p same mountinfo %s", ws)
	s.want("ok none", "p same mountinfo %s", one)

	// A revalidating LOOKUP that fails (here EIO, once) drops the bind too.
	s.want("ok", "bind ws %s", host)
	s.want("ok host", "p same read %s/whoami", ws)
	s.want("ok", "fail ws EIO")
	s.want("err EIO", "p same read %s/whoami", ws)
	s.want("ok", "fail ws -")
	s.want("ok fuse", "p same read %s/whoami", ws)
	s.want("ok none", "p same mountinfo %s", ws)
}

// TestKernelPathLockedAttrs: a bind made nosuid,nodev,ro recursively
// (mount_setattr AT_RECURSIVE on the detached tree) is read-only down to
// the host mounts below the root; a process without capabilities cannot
// unmount or remount it, and one that is root of its own user namespace
// cannot either, because the kernel locked the flags and the mount when it
// copied them into the less privileged namespace. The control: a process
// with CAP_SYS_ADMIN over the namespace can.
func TestKernelPathLockedAttrs(t *testing.T) {
	host, _ := hostTree(t)
	sub := filepath.Join(host, "sub")
	os.Mkdir(sub, 0o777)
	s := startServer(t, hour, map[string]string{"ws": "dir", "rw": "dir"}, nil, "")
	ws := filepath.Join(s.mnt, "ws")
	s.want("ok", "tmpfs %s", sub)
	s.want("ok", "bind ws %s ro rec", host)
	s.wantHas("ok", "spawn same same")
	s.wantHas("ok", "spawn user userns")
	s.wantHas("ok", "spawn ctl newns")

	s.wantHas("ro,nosuid,nodev", "p same mountinfo %s", ws)
	s.wantHas("ro,nosuid,nodev", "p same mountinfo %s/sub", ws)
	s.wantHas("fstype=tmpfs", "p same mountinfo %s/sub", ws)
	s.want("err EROFS", "p same write %s/x", ws)
	s.want("err EROFS", "p same write %s/sub/x", ws)

	for _, c := range []string{"umount", "umount-detach", "remount-rw", "remount-suid", "setattr-rw", "setattr-suid"} {
		s.want("err EPERM", "p same try nocap %s %s", c, ws)
	}
	s.want("err EROFS", "p user write %s/x", ws)
	s.want("err EPERM", "p user try caps remount-rw %s", ws)
	s.want("err EPERM", "p user try caps remount-suid %s", ws)
	s.want("err EPERM", "p user try caps setattr-rw %s", ws)
	s.want("err EPERM", "p user try caps setattr-suid %s", ws)
	s.want("err EINVAL", "p user try caps umount %s", ws)
	s.want("err EINVAL", "p user try caps umount-detach %s", ws)
	s.want("ok host", "p user read %s/whoami", ws)

	// Control: with CAP_SYS_ADMIN over its namespace a process can
	// remount it read-write.
	s.want("ok", "p ctl try caps remount-rw %s", ws)
	s.want("ok", "p ctl write %s/x", ws)
	s.want("ok", "p ctl try caps umount-detach %s", ws)
	s.want("ok fuse", "p ctl read %s/whoami", ws)
	s.want("ok host", "p same read %s/whoami", ws)
}

// TestKernelPathUnprivileged: the same data path where the FUSE server is
// root of a user namespace owned by an unprivileged user (rootfs run
// without root): it mounts the view, binds a host directory over an entry
// in its namespace and, through setns, in a child namespace, and removal
// detaches both. A root with a host mount below it (locked in the user
// namespace) needs the recursive clone: the plain one is EINVAL (the
// contrast). The host directory stays under the user's own permissions. /dev/fuse is opened to other users for the test, as
// cmd/rootfs/cli's TestRunUnprivilegedWithFUSE does.
func TestKernelPathUnprivileged(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as the unprivileged user")
	}
	requireMountAPI(t)
	st, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Skip("needs /dev/fuse")
	}
	if st.Mode().Perm()&0o006 != 0o006 {
		if err := os.Chmod("/dev/fuse", 0o666); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod("/dev/fuse", st.Mode().Perm()) })
	}
	host, _ := hostTree(t)
	os.Chown(host, 65534, 65534)
	os.Chown(filepath.Join(host, "whoami"), 65534, 65534)
	// A host mount below the root, made before the user namespace: the
	// kernel locks it in the server's copy of the mount table.
	sub := filepath.Join(host, "sub")
	os.Mkdir(sub, 0o755)
	if err := Mount("tmpfs", sub, "tmpfs", 0, "size=1m,mode=0777"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unmount(sub, unix.MNT_DETACH) })
	exeDir := worldTempDir(t)
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(exeDir, "linux.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	s := startServer(t, hour, map[string]string{"ws": "dir"}, nobody, exe)
	ws := filepath.Join(s.mnt, "ws")
	s.want("ok", "share")
	s.wantHas("ok", "spawn same same")
	s.wantHas("ok", "spawn slave newns")
	s.want("ok", "p slave slave %s", s.mnt)
	s.wantHas("ok", "spawn priv newns")
	s.want("ok", "p priv private %s", s.mnt)
	s.want("ok fuse", "p same read %s/whoami", ws)
	// A non-recursive clone would uncover what the locked mount hides:
	// refused. The recursive one takes it along.
	s.want("err EINVAL", "bind ws %s ro", host)
	s.want("ok", "bind ws %s ro rec", host)
	s.want("ok host", "p slave read %s/whoami", ws)
	s.want("ok", "bindns priv %s/ws %s ro rec", s.mnt, host)
	s.wantHas("fstype=tmpfs", "p priv mountinfo %s/sub", ws)
	s.want("err EROFS", "p priv write %s/sub/x", ws)
	s.want("ok host", "p same read %s/whoami", ws)
	s.want("ok host", "p priv read %s/whoami", ws)
	s.wantHas("ro,nosuid,nodev", "p priv mountinfo %s", ws)
	s.want("err EROFS", "p priv write %s/x", ws)
	s.want("err EPERM", "p priv try nocap umount %s", ws)
	s.want("ok", "remove ws")
	s.want("err ENOENT", "p same read %s/whoami", ws)
	s.want("err ENOENT", "p priv read %s/whoami", ws)
	s.want("err ENOENT", "p slave read %s/whoami", ws)
	s.want("ok none", "p priv mountinfo %s", ws)
	s.want("ok none", "p slave mountinfo %s", ws)
	if got := strings.Fields(s.do("p same read /proc/self/uid_map")); strings.Join(got, " ") != "ok 0 65534 1" {
		t.Errorf("the server was not root of a user namespace mapped to 65534")
	}
}

// TestKernelPathPivotedSandbox: the sandbox as mountmgr builds it (/
// made a recursive slave, the view rbound on itself, pivot_root into it,
// the old root detached) still receives a bind laid later on the
// server's shared view mount, and loses it with the entry. A sandbox
// whose / was made private instead (the control) does not receive it;
// setns from the server reaches it, and removal detaches that bind too,
// also where the sandbox is root of its own user namespace (its mounts
// locked).
func TestKernelPathPivotedSandbox(t *testing.T) {
	host, _ := hostTree(t)
	s := startServer(t, hour, map[string]string{"ws": "dir"}, nil, "")
	s.want("ok", "share")
	s.wantHas("ok", "spawn sb newns")
	s.want("ok", "p sb rslave /")
	s.want("ok", "p sb pivot %s", s.mnt)
	s.wantHas("ok", "spawn priv newns")
	s.want("ok", "p priv rprivate /")
	s.want("ok", "p priv pivot %s", s.mnt)
	s.want("ok ws", "p sb ls /")
	s.want("ok fuse", "p sb read /ws/whoami")

	s.want("ok", "bind ws %s ro", host)
	s.want("ok host", "p sb read /ws/whoami")
	s.wantHas("ro,nosuid,nodev", "p sb mountinfo /ws")
	s.want("ok fuse", "p priv read /ws/whoami")
	s.want("ok", "bindns priv /ws %s ro", host)
	s.want("ok host", "p priv read /ws/whoami")

	// A probe in a user namespace of its own (its copies of the mounts are
	// locked) loses its copy too.
	s.wantHas("ok", "spawn user userns")
	s.want("ok host", "p user read %s/ws/whoami", s.mnt)

	s.want("ok", "p sb open d /ws")
	s.want("ok", "remove ws")
	for _, p := range []string{"sb", "priv"} {
		s.want("err ENOENT", "p %s read /ws/whoami", p)
		s.want("ok none", "p %s mountinfo /ws", p)
		s.want("ok ", "p %s ls /", p)
	}
	s.want("err ENOENT", "p user read %s/ws/whoami", s.mnt)
	s.want("ok none", "p user mountinfo %s/ws", s.mnt)
	s.want("ok host", "p sb readat d whoami")
}
