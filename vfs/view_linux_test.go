//go:build linux

package vfs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/rootset"
)

// hostTree makes a temporary directory readable by everyone (so callers
// other than root can reach the mount) and returns it.
func hostTree(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	return d
}

func mkdir(t *testing.T, p string) string {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func write(t *testing.T, p, content string) string {
	t.Helper()
	mkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

func TestViewListing(t *testing.T) {
	h := hostTree(t)
	a := mkdir(t, filepath.Join(h, "a"))
	write(t, filepath.Join(a, "x"), "in a")
	b := mkdir(t, filepath.Join(h, "other", "a")) // collides with a: becomes a-2
	f := write(t, filepath.Join(h, "notes.txt"), "single file root")
	s := serve(t, serveConfig{
		Roots:        []string{a, b, filepath.Join(h, "missing"), f, a /* duplicate */},
		Placeholders: []rootset.Placeholder{{Name: "usr"}, {Name: "bin", Symlink: "usr/bin"}},
	})
	got := names(t, s.Mnt)
	want := []string{"a", "a-2", "bin", "notes.txt", "usr"}
	if !slices.Equal(got, want) {
		t.Fatalf("listing = %q, want %q", got, want)
	}
	if got := readFile(t, filepath.Join(s.Mnt, "a", "x")); got != "in a" {
		t.Errorf("a/x = %q", got)
	}
	if got := readFile(t, filepath.Join(s.Mnt, "notes.txt")); got != "single file root" {
		t.Errorf("file root = %q", got)
	}
	if err := os.WriteFile(filepath.Join(s.Mnt, "notes.txt"), []byte("changed"), 0); err != nil {
		t.Errorf("write file root: %v", err)
	} else if got := readFile(t, f); got != "changed" {
		t.Errorf("host file = %q", got)
	}
	if l, err := os.Readlink(filepath.Join(s.Mnt, "bin")); err != nil || l != "usr/bin" {
		t.Errorf("bin -> %q, %v", l, err)
	}
	if got := names(t, filepath.Join(s.Mnt, "usr")); len(got) != 0 {
		t.Errorf("placeholder usr lists %q", got)
	}
	// The top level is read-only, and its mode says so.
	if fi, err := os.Stat(s.Mnt); err != nil {
		t.Errorf("top: %v", err)
	} else if fi.Mode() != os.ModeDir|0o555 {
		t.Errorf("top is %v, want a directory 0555", fi.Mode())
	}
	wantErrno(t, "mkdir at top", os.Mkdir(filepath.Join(s.Mnt, "new"), 0o755), syscall.EPERM)
	wantErrno(t, "rmdir root", os.Remove(filepath.Join(s.Mnt, "a-2")), syscall.EPERM)
	wantErrno(t, "rename root", os.Rename(filepath.Join(s.Mnt, "a"), filepath.Join(s.Mnt, "z")), syscall.EPERM)
	wantErrno(t, "symlink at top", os.Symlink("/", filepath.Join(s.Mnt, "evil")), syscall.EPERM)
	// ".." of an entry is the view's root, never the host parent.
	if got := names(t, filepath.Join(s.Mnt, "a", "..")); !slices.Equal(got, want) {
		t.Errorf("a/.. lists %q", got)
	}
}

func TestViewReadWrite(t *testing.T) {
	h := hostTree(t)
	r := mkdir(t, filepath.Join(h, "r"))
	os.Chmod(r, 0o777)
	s := serve(t, serveConfig{Roots: []string{r}})
	m := filepath.Join(s.Mnt, "r")

	// write, read, rename
	if err := os.WriteFile(filepath.Join(m, "f"), []byte("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(r, "f")); got != "hello" {
		t.Errorf("host sees %q", got)
	}
	if fi, err := os.Stat(filepath.Join(r, "f")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, %v (daemon umask must not apply)", fi.Mode(), err)
	}
	if err := os.Rename(filepath.Join(m, "f"), filepath.Join(m, "g")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(m, "g")); got != "hello" {
		t.Errorf("after rename: %q", got)
	}
	// O_EXCL
	fd, err := os.OpenFile(filepath.Join(m, "excl"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fd.Close()
	_, err = os.OpenFile(filepath.Join(m, "excl"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	wantErrno(t, "second O_EXCL", err, syscall.EEXIST)
	// temp file + rename over an existing file (server-filesystem's write)
	write(t, filepath.Join(r, "doc.txt"), "old")
	readFile(t, filepath.Join(m, "doc.txt"))
	tmp := filepath.Join(m, ".doc.txt.tmp")
	if err := os.WriteFile(tmp, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m, "doc.txt")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(m, "doc.txt")); got != "new" {
		t.Errorf("after temp+rename: %q", got)
	}
	// RENAME_NOREPLACE and RENAME_EXCHANGE
	write(t, filepath.Join(r, "p"), "P")
	write(t, filepath.Join(r, "q"), "Q")
	wantErrno(t, "noreplace", unix.Renameat2(unix.AT_FDCWD, filepath.Join(m, "p"), unix.AT_FDCWD, filepath.Join(m, "q"), unix.RENAME_NOREPLACE), syscall.EEXIST)
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(m, "p"), unix.AT_FDCWD, filepath.Join(m, "q"), unix.RENAME_EXCHANGE); err != nil {
		t.Errorf("exchange: %v", err)
	} else if readFile(t, filepath.Join(m, "p")) != "Q" || readFile(t, filepath.Join(r, "q")) != "P" {
		t.Errorf("exchange did not exchange")
	}
	// mkdir, symlink (target unchanged), link, unlink, rmdir
	if err := os.Mkdir(filepath.Join(m, "d"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(m, "d", "l")); err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(filepath.Join(r, "d", "l")); err != nil || l != "/etc/passwd" {
		t.Errorf("host link = %q, %v", l, err)
	}
	if err := os.Link(filepath.Join(m, "g"), filepath.Join(m, "d", "g2")); err != nil {
		t.Errorf("link: %v", err)
	} else if fi, _ := os.Stat(filepath.Join(m, "g")); fi.Sys().(*syscall.Stat_t).Nlink != 2 {
		t.Errorf("nlink after link = %d", fi.Sys().(*syscall.Stat_t).Nlink)
	}
	for _, p := range []string{"d/l", "d/g2"} {
		if err := os.Remove(filepath.Join(m, p)); err != nil {
			t.Errorf("remove %s: %v", p, err)
		}
	}
	if err := os.Remove(filepath.Join(m, "d")); err != nil {
		t.Errorf("rmdir: %v", err)
	}
	// setattr
	g := filepath.Join(m, "g")
	if err := os.Chmod(g, 0o604); err != nil {
		t.Error(err)
	}
	if err := os.Truncate(g, 2); err != nil {
		t.Error(err)
	}
	if err := unix.UtimesNano(g, []unix.Timespec{{Sec: 1000}, {Sec: 2000}}); err != nil {
		t.Error(err)
	}
	var st unix.Stat_t
	unix.Stat(filepath.Join(r, "g"), &st)
	if st.Mode&0o7777 != 0o604 || st.Size != 2 || st.Mtim.Sec != 2000 {
		t.Errorf("host after setattr: mode %o size %d mtime %d", st.Mode&0o7777, st.Size, st.Mtim.Sec)
	}
	// xattrs: user.* works, others are refused
	if err := unix.Setxattr(g, "user.k", []byte("v"), 0); err != nil {
		t.Errorf("setxattr user: %v", err)
	} else {
		buf := make([]byte, 16)
		if n, err := unix.Getxattr(g, "user.k", buf); err != nil || string(buf[:n]) != "v" {
			t.Errorf("getxattr = %q, %v", buf[:n], err)
		}
	}
	wantErrno(t, "setxattr security", unix.Setxattr(g, "security.rootfs-test", []byte("1"), 0), syscall.EPERM)
	wantErrno(t, "setxattr trusted", unix.Setxattr(g, "trusted.x", []byte("1"), 0), syscall.EPERM)
	// statfs, fsync, fallocate
	var sfs unix.Statfs_t
	if err := unix.Statfs(m, &sfs); err != nil || sfs.Blocks == 0 {
		t.Errorf("statfs: %v blocks %d", err, sfs.Blocks)
	}
	if f, err := os.OpenFile(g, os.O_RDWR, 0); err == nil {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, 8192); err != nil {
			t.Errorf("fallocate: %v", err)
		}
		if err := f.Sync(); err != nil {
			t.Errorf("fsync: %v", err)
		}
		f.Close()
	}
	// copy_file_range between two files of the root
	write(t, filepath.Join(r, "src"), "copy me")
	if in, err := os.Open(filepath.Join(m, "src")); err == nil {
		out, err := os.Create(filepath.Join(m, "dst"))
		if err != nil {
			t.Fatal(err)
		}
		n, err := unix.CopyFileRange(int(in.Fd()), nil, int(out.Fd()), nil, 64, 0)
		if err != nil || n != 7 {
			t.Errorf("copy_file_range = %d, %v", n, err)
		}
		in.Close()
		out.Close()
		if got := readFile(t, filepath.Join(r, "dst")); got != "copy me" {
			t.Errorf("copied %q", got)
		}
	}
	// suid is cleared on write (CAP_HANDLE_KILLPRIV_V2 makes it our job)
	sp := write(t, filepath.Join(r, "suid"), "x")
	os.Chmod(sp, 0o4755)
	if err := os.WriteFile(filepath.Join(m, "suid"), []byte("y"), 0); err != nil {
		t.Error(err)
	}
	if fi, _ := os.Stat(sp); fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("suid bit survived a write: %v", fi.Mode())
	}
}

// TestViewOwnership: files made through the view belong to the caller.
func TestViewOwnership(t *testing.T) {
	h := hostTree(t)
	r := mkdir(t, filepath.Join(h, "r"))
	os.Chmod(r, 0o777)
	s := serve(t, serveConfig{Roots: []string{r}})
	m := filepath.Join(s.Mnt, "r")
	cmd := exec.Command("/bin/sh", "-c", `umask 022; echo hi > "$0/f" && mkdir "$0/d" && ln -s f "$0/l" && mkfifo "$0/p"`, m)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4242, Gid: 4343}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as uid 4242: %v: %s", err, out)
	}
	for _, n := range []string{"f", "d", "l", "p"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(r, n), &st); err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if st.Uid != 4242 || st.Gid != 4343 {
			t.Errorf("%s owned by %d:%d, want 4242:4343", n, st.Uid, st.Gid)
		}
	}
	// default_permissions: another user cannot write into a 0755 root dir.
	os.Chmod(r, 0o755)
	cmd = exec.Command("/bin/sh", "-c", `echo x > "$0/g"`, m)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4242, Gid: 4343}}
	if err := cmd.Run(); err == nil {
		t.Errorf("uid 4242 wrote into a root-owned 0755 directory")
	}
}

func TestViewEXDEV(t *testing.T) {
	h := hostTree(t)
	a := mkdir(t, filepath.Join(h, "a"))
	b := mkdir(t, filepath.Join(h, "b"))
	write(t, filepath.Join(a, "f"), "f")
	write(t, filepath.Join(b, "g"), "g")
	s := serve(t, serveConfig{Roots: []string{a, b}})
	ma, mb := filepath.Join(s.Mnt, "a"), filepath.Join(s.Mnt, "b")
	wantErrno(t, "rename across roots", os.Rename(filepath.Join(ma, "f"), filepath.Join(mb, "f")), syscall.EXDEV)
	wantErrno(t, "link across roots", os.Link(filepath.Join(ma, "f"), filepath.Join(mb, "f")), syscall.EXDEV)
	wantErrno(t, "exchange across roots", unix.Renameat2(unix.AT_FDCWD, filepath.Join(ma, "f"), unix.AT_FDCWD, filepath.Join(mb, "g"), unix.RENAME_EXCHANGE), syscall.EXDEV)
	wantErrno(t, "rename into the top level", os.Rename(filepath.Join(ma, "f"), filepath.Join(s.Mnt, "f")), syscall.EPERM)
	if _, err := os.Stat(filepath.Join(b, "f")); err == nil {
		t.Errorf("f reached root b")
	}
}

func TestViewReadOnly(t *testing.T) {
	h := hostTree(t)
	r := mkdir(t, filepath.Join(h, "r"))
	write(t, filepath.Join(r, "f"), "data")
	mkdir(t, filepath.Join(r, "d"))
	s := serve(t, serveConfig{Roots: []string{r}, ReadOnly: true})
	m := filepath.Join(s.Mnt, "r")
	if got := readFile(t, filepath.Join(m, "f")); got != "data" {
		t.Errorf("read %q", got)
	}
	_, err := os.OpenFile(filepath.Join(m, "f"), os.O_WRONLY, 0)
	wantErrno(t, "open for write", err, syscall.EROFS)
	_, err = os.OpenFile(filepath.Join(m, "f"), os.O_RDONLY|os.O_TRUNC, 0)
	wantErrno(t, "open O_TRUNC", err, syscall.EROFS)
	_, err = os.Create(filepath.Join(m, "new"))
	wantErrno(t, "create", err, syscall.EROFS)
	wantErrno(t, "mkdir", os.Mkdir(filepath.Join(m, "nd"), 0o755), syscall.EROFS)
	wantErrno(t, "unlink", os.Remove(filepath.Join(m, "f")), syscall.EROFS)
	wantErrno(t, "rmdir", os.Remove(filepath.Join(m, "d")), syscall.EROFS)
	wantErrno(t, "rename", os.Rename(filepath.Join(m, "f"), filepath.Join(m, "g")), syscall.EROFS)
	wantErrno(t, "symlink", os.Symlink("x", filepath.Join(m, "l")), syscall.EROFS)
	wantErrno(t, "link", os.Link(filepath.Join(m, "f"), filepath.Join(m, "h")), syscall.EROFS)
	wantErrno(t, "chmod", os.Chmod(filepath.Join(m, "f"), 0o600), syscall.EROFS)
	wantErrno(t, "chown", os.Chown(filepath.Join(m, "f"), 1, 1), syscall.EROFS)
	wantErrno(t, "truncate", os.Truncate(filepath.Join(m, "f"), 0), syscall.EROFS)
	wantErrno(t, "utimes", unix.UtimesNano(filepath.Join(m, "f"), []unix.Timespec{{Sec: 1}, {Sec: 1}}), syscall.EROFS)
	wantErrno(t, "setxattr", unix.Setxattr(filepath.Join(m, "f"), "user.x", []byte("1"), 0), syscall.EROFS)
	if got := readFile(t, filepath.Join(r, "f")); got != "data" {
		t.Errorf("host changed: %q", got)
	}
}

// TestViewHostSymlinks: symlinks in a root are shown as symlinks with their
// target unchanged, and the daemon never follows them.
func TestViewHostSymlinks(t *testing.T) {
	h := hostTree(t)
	r := mkdir(t, filepath.Join(h, "r"))
	write(t, filepath.Join(h, "outside", "secret"), "SECRET")
	os.Symlink("../outside/secret", filepath.Join(r, "rel"))
	os.Symlink("../outside", filepath.Join(r, "reldir"))
	s := serve(t, serveConfig{Roots: []string{r}})
	m := filepath.Join(s.Mnt, "r")
	if l, err := os.Readlink(filepath.Join(m, "rel")); err != nil || l != "../outside/secret" {
		t.Errorf("readlink = %q, %v", l, err)
	}
	// The kernel resolves ../outside inside the view, where there is no
	// "outside" entry.
	if _, err := os.ReadFile(filepath.Join(m, "rel")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("reading through rel: %v, want ENOENT", err)
	}
	if _, err := os.ReadDir(filepath.Join(m, "reldir")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("listing reldir: %v, want ENOENT", err)
	}
	var buf bytes.Buffer
	cmd := exec.Command("/bin/sh", "-c", `cat "$0/reldir/secret" 2>&1; true`, m)
	cmd.Stdout = &buf
	cmd.Run()
	if strings.Contains(buf.String(), "SECRET") {
		t.Errorf("secret served through a host symlink")
	}
}

// TestViewHostFIFO: a FIFO the host puts where the kernel expected nothing
// (a stale negative entry) is not opened by the daemon, which would block.
func TestViewHostFIFO(t *testing.T) {
	h := hostTree(t)
	r := mkdir(t, filepath.Join(h, "r"))
	// No host watcher: it would drop the negative entry, and the kernel
	// would open the FIFO itself (blocking this test, as natively).
	s := serve(t, serveConfig{Roots: []string{r}, CacheTimeout: time.Hour, NoHostWatch: true})
	p := filepath.Join(s.Mnt, "r", "p")
	if _, err := os.Stat(p); !errors.Is(err, syscall.ENOENT) {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(r, "p"), 0o666); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("create over a host FIFO: %v", err)
		if err == nil {
			t.Errorf("create over a host FIFO succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon blocked opening a host FIFO")
	}
}
