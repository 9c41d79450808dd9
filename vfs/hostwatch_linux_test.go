//go:build linux

package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostChange is one change made on the host (make) and how the view shows
// it once it is seen (seen).
type hostChange struct {
	name string
	// prime runs through the view before the change, so the kernel caches
	// what the change makes stale.
	prime func(t *testing.T, m string)
	make  func(t *testing.T, h string)
	seen  func(m string) (bool, string)
}

func hostChanges() []hostChange {
	stat := func(p string) (os.FileInfo, error) { return os.Lstat(p) }
	return []hostChange{
		{
			name:  "content",
			prime: func(t *testing.T, m string) { readFile(t, filepath.Join(m, "r", "f")) },
			make: func(t *testing.T, h string) {
				write(t, filepath.Join(h, "r", "f"), "second version, longer")
			},
			seen: func(m string) (bool, string) {
				b, err := os.ReadFile(filepath.Join(m, "r", "f"))
				return err == nil && string(b) == "second version, longer", fmt.Sprintf("%q %v", b, err)
			},
		},
		{
			name:  "same-size-rewrite",
			prime: func(t *testing.T, m string) { readFile(t, filepath.Join(m, "r", "g")) },
			make: func(t *testing.T, h string) {
				// Same size, in place: only the modify event can tell.
				f, err := os.OpenFile(filepath.Join(h, "r", "g"), os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteAt([]byte("GGGG"), 0)
				f.Close()
			},
			seen: func(m string) (bool, string) {
				b, err := os.ReadFile(filepath.Join(m, "r", "g"))
				return err == nil && string(b) == "GGGG", fmt.Sprintf("%q %v", b, err)
			},
		},
		{
			name: "create-after-negative",
			prime: func(t *testing.T, m string) {
				if _, err := stat(filepath.Join(m, "r", "new")); !errors.Is(err, syscall.ENOENT) {
					t.Fatalf("new before creation: %v", err)
				}
			},
			make: func(t *testing.T, h string) { write(t, filepath.Join(h, "r", "new"), "n") },
			seen: func(m string) (bool, string) {
				_, err := stat(filepath.Join(m, "r", "new"))
				return err == nil, fmt.Sprint(err)
			},
		},
		{
			name:  "delete",
			prime: func(t *testing.T, m string) { readFile(t, filepath.Join(m, "r", "gone")) },
			make: func(t *testing.T, h string) {
				if err := os.Remove(filepath.Join(h, "r", "gone")); err != nil {
					t.Fatal(err)
				}
			},
			seen: func(m string) (bool, string) {
				_, err := stat(filepath.Join(m, "r", "gone"))
				return errors.Is(err, syscall.ENOENT), fmt.Sprint(err)
			},
		},
		{
			name: "rename",
			prime: func(t *testing.T, m string) {
				readFile(t, filepath.Join(m, "r", "old"))
				stat(filepath.Join(m, "r", "d", "moved"))
			},
			make: func(t *testing.T, h string) {
				if err := os.Rename(filepath.Join(h, "r", "old"), filepath.Join(h, "r", "d", "moved")); err != nil {
					t.Fatal(err)
				}
			},
			seen: func(m string) (bool, string) {
				_, err1 := stat(filepath.Join(m, "r", "old"))
				b, err2 := os.ReadFile(filepath.Join(m, "r", "d", "moved"))
				return errors.Is(err1, syscall.ENOENT) && string(b) == "old", fmt.Sprint(err1, " ", err2)
			},
		},
		{
			name:  "chmod",
			prime: func(t *testing.T, m string) { stat(filepath.Join(m, "r", "mode")) },
			make: func(t *testing.T, h string) {
				if err := os.Chmod(filepath.Join(h, "r", "mode"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			seen: func(m string) (bool, string) {
				fi, err := stat(filepath.Join(m, "r", "mode"))
				return err == nil && fi.Mode().Perm() == 0o600, fmt.Sprint(fi.Mode(), err)
			},
		},
		{
			name:  "listing",
			prime: func(t *testing.T, m string) { names(t, filepath.Join(m, "r", "d")) },
			make:  func(t *testing.T, h string) { write(t, filepath.Join(h, "r", "d", "listed"), "l") },
			seen: func(m string) (bool, string) {
				es, err := os.ReadDir(filepath.Join(m, "r", "d"))
				var ns []string
				for _, e := range es {
					ns = append(ns, e.Name())
				}
				return slices.Contains(ns, "listed"), fmt.Sprint(ns, err)
			},
		},
		{
			name:  "hard-link-alias",
			prime: func(t *testing.T, m string) { readFile(t, filepath.Join(m, "r", "d", "link")) },
			make: func(t *testing.T, h string) {
				// Changed through its other name: the event names r/hl.
				write(t, filepath.Join(h, "r", "hl"), "changed via the other link")
			},
			seen: func(m string) (bool, string) {
				b, err := os.ReadFile(filepath.Join(m, "r", "d", "link"))
				return string(b) == "changed via the other link", fmt.Sprintf("%q %v", b, err)
			},
		},
	}
}

func hostChangeTree(t *testing.T) (h, r string) {
	h = hostTree(t)
	r = mkdir(t, filepath.Join(h, "r"))
	write(t, filepath.Join(r, "f"), "first")
	write(t, filepath.Join(r, "g"), "gggg")
	write(t, filepath.Join(r, "gone"), "x")
	write(t, filepath.Join(r, "old"), "old")
	write(t, filepath.Join(r, "mode"), "m")
	write(t, filepath.Join(r, "d", "x"), "x")
	write(t, filepath.Join(r, "hl"), "one")
	if err := os.Link(filepath.Join(r, "hl"), filepath.Join(r, "d", "link")); err != nil {
		t.Fatal(err)
	}
	return h, r
}

// TestViewHostChanges: with the host watcher, the kernel caches for an hour
// and a change made on the host by another process still shows through
// the view at once. The control keeps the hour-long cache but drops the
// watcher's events: every change stays hidden, so the cases can fail.
//
// The writeback run also covers renewal: under the writeback cache the
// kernel ignores the daemon's size of a cached file, so a file grown on the
// host is seen only through a renewed node (node.renewable).
func TestViewHostChanges(t *testing.T) {
	for _, mode := range []string{"watched", "watched-writeback", "control"} {
		control := mode == "control"
		t.Run(mode, func(t *testing.T) {
			h, r := hostChangeTree(t)
			s := serve(t, serveConfig{Roots: []string{r}, NoHostEvents: control, Writeback: mode == "watched-writeback"})
			for _, c := range hostChanges() {
				c.prime(t, s.Mnt)
				c.prime(t, s.Mnt)
				if ok, got := c.seen(s.Mnt); ok {
					t.Fatalf("%s: seen before the change: %s", c.name, got)
				}
				c.make(t, h)
				ok, got, after := poll(c.seen, s.Mnt, control)
				switch {
				case control && ok:
					t.Errorf("%s: seen after %v without the watcher's events: the control shows nothing (%s)", c.name, after, got)
				case !control && !ok:
					t.Errorf("%s: not seen through the view %v after the host change: %s", c.name, after, got)
				case !control:
					t.Logf("%s: seen after %v", c.name, after)
				}
			}
		})
	}
}

// poll waits for seen: up to 10 s when it should come (a liveness bound,
// not a speed target), 1.5 s (longer than the default short timeout) when
// it should not.
func poll(seen func(string) (bool, string), m string, control bool) (bool, string, time.Duration) {
	limit := 10 * time.Second
	if control {
		limit = 1500 * time.Millisecond
	}
	start := time.Now()
	for {
		ok, got := seen(m)
		if ok || time.Since(start) > limit {
			return ok, got, time.Since(start).Round(time.Microsecond)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestViewNestedRootsAlias: roots r and r/sub show one host directory
// twice. A change made through one entry is a change the daemon made
// itself, which the kernel knows for that entry only; the watcher updates
// the other. The control drops the watcher's events.
func TestViewNestedRootsAlias(t *testing.T) {
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "watched", true: "control"}[control], func(t *testing.T) {
			h := hostTree(t)
			r := mkdir(t, filepath.Join(h, "r"))
			sub := mkdir(t, filepath.Join(r, "sub"))
			write(t, filepath.Join(sub, "f"), "one")
			s := serve(t, serveConfig{Roots: []string{r, sub}, NoHostEvents: control})
			viaR := filepath.Join(s.Mnt, "r", "sub", "f")
			viaSub := filepath.Join(s.Mnt, "sub", "f")
			readFile(t, viaR)
			readFile(t, viaSub)
			os.Lstat(filepath.Join(s.Mnt, "r", "sub", "new"))
			if err := os.WriteFile(viaSub, []byte("two, through the other entry"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(s.Mnt, "sub", "new"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			seen := func(string) (bool, string) {
				b, err := os.ReadFile(viaR)
				_, err2 := os.Lstat(filepath.Join(s.Mnt, "r", "sub", "new"))
				return string(b) == "two, through the other entry" && err2 == nil, fmt.Sprintf("%q %v %v", b, err, err2)
			}
			ok, got, after := poll(seen, s.Mnt, control)
			if control && ok {
				t.Errorf("seen after %v without the watcher's events: the control shows nothing", after)
			}
			if !control && !ok {
				t.Errorf("change through sub not seen through r after %v: %s", after, got)
			}
		})
	}
}

// TestViewNoHostWatch: without the watcher the kernel caches for
// CacheTimeout only, so a host change shows within it.
//
// Under the writeback cache this is renewal alone: the kernel ignores the
// daemon's new size, so only a new node shows the grown file.
func TestViewNoHostWatch(t *testing.T) {
	for _, wb := range []bool{false, true} {
		t.Run(map[bool]string{false: "write-through", true: "writeback"}[wb], func(t *testing.T) {
			h, r := hostChangeTree(t)
			s := serve(t, serveConfig{Roots: []string{r}, NoHostWatch: true, CacheTimeout: 200 * time.Millisecond, Writeback: wb})
			c := hostChanges()[0]
			c.prime(t, s.Mnt)
			c.make(t, h)
			if ok, got, after := poll(c.seen, s.Mnt, false); !ok {
				t.Errorf("not seen %v after the change with a 200ms cache: %s", after, got)
			}
		})
	}
}

// TestViewFilesHoldNoDescriptors: the daemon keeps a descriptor per cached
// directory, not per cached file, so a stat walk of more files than its
// RLIMIT_NOFILE needs no relief at all.
func TestViewFilesHoldNoDescriptors(t *testing.T) {
	h := hostTree(t)
	a := mkdir(t, filepath.Join(h, "a"))
	for f := range 600 {
		write(t, filepath.Join(a, fmt.Sprint("f", f)), "x")
	}
	s := serve(t, serveConfig{Roots: []string{a}, NoFile: 128, NoFDRelief: true})
	files := 0
	err := filepath.WalkDir(filepath.Join(s.Mnt, "a"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if _, err := os.ReadFile(p); err != nil && !d.IsDir() {
			return err
		}
		if !d.IsDir() {
			files++
		}
		return nil
	})
	if err != nil || files != 600 {
		t.Fatalf("walk: %d files, %v; want 600 under RLIMIT_NOFILE 128 without relief", files, err)
	}
	if n := s.fds(); n > 40 {
		t.Errorf("daemon holds %d descriptors after reading 600 cached files", n)
	}
}

// TestViewRenamedOnHostIsStale: a cached file renamed away on the host and
// replaced by another file under its name is never served as the old inode:
// the view checks identity on every use (ESTALE, then the kernel looks it
// up again and finds the new file).
func TestViewRenamedOnHostIsStale(t *testing.T) {
	h := hostTree(t)
	r := mkdir(t, filepath.Join(h, "r"))
	write(t, filepath.Join(r, "f"), "old")
	s := serve(t, serveConfig{Roots: []string{r}, NoHostWatch: true, CacheTimeout: time.Hour})
	p := filepath.Join(s.Mnt, "r", "f")
	// Look the name up without opening the file: an open handle (whose
	// RELEASE reaches the daemon after close returns) rightly keeps
	// operations on the inode it has open, which made this test flaky.
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(r, "f"), filepath.Join(r, "f.bak")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(r, "f"), "new file")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatalf("chmod through a stale cached name: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(r, "f.bak"), &st); err != nil || st.Mode&0o777 != 0o644 {
		t.Errorf("the renamed-away inode was changed: mode %o, %v", st.Mode&0o777, err)
	}
	if err := syscall.Lstat(filepath.Join(r, "f"), &st); err != nil || st.Mode&0o777 != 0o600 {
		t.Errorf("the file now under the name: mode %o, %v; want 600", st.Mode&0o777, err)
	}
}

// TestViewUnsupportedXattrs: POSIX ACLs and SELinux labels are reported as
// unsupported (the view enforces neither), even where the host file has
// them, and are left out of listxattr; other attributes pass.
func TestViewUnsupportedXattrs(t *testing.T) {
	h := hostTree(t)
	r := mkdir(t, filepath.Join(h, "r"))
	f := write(t, filepath.Join(r, "f"), "x")
	if err := unix.Setxattr(f, "user.k", []byte("v"), 0); err != nil {
		t.Skipf("host file system without user xattrs: %v", err)
	}
	// A minimal access ACL (u::rw-,g::r--,o::r--) as setfacl writes it.
	acl := []byte{2, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, 0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff}
	hasACL := unix.Setxattr(f, "system.posix_acl_access", acl, 0) == nil
	s := serve(t, serveConfig{Roots: []string{r}})
	p := filepath.Join(s.Mnt, "r", "f")
	buf := make([]byte, 256)
	for _, name := range []string{"system.posix_acl_access", "system.posix_acl_default", "security.selinux"} {
		if _, err := unix.Lgetxattr(p, name, buf); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("getxattr %s: %v, want EOPNOTSUPP", name, err)
		}
	}
	if n, err := unix.Lgetxattr(p, "user.k", buf); err != nil || string(buf[:n]) != "v" {
		t.Errorf("getxattr user.k = %q, %v", buf[:n], err)
	}
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		t.Fatal(err)
	}
	list := string(buf[:n])
	if !strings.Contains(list, "user.k\x00") || strings.Contains(list, "posix_acl") {
		t.Errorf("listxattr = %q (host has an ACL: %v)", list, hasACL)
	}
	if size, err := unix.Llistxattr(p, nil); err != nil || size != n {
		t.Errorf("listxattr size = %d, %v; want %d", size, err, n)
	}
}

// TestViewUnlinkedOpenFile: a file unlinked while open keeps working
// through its descriptor (fstat, fchmod, ftruncate, write, read), although
// the node no longer has a name to pin it by.
func TestViewUnlinkedOpenFile(t *testing.T) {
	h := hostTree(t)
	r := mkdir(t, filepath.Join(h, "r"))
	write(t, filepath.Join(r, "f"), "data")
	s := serve(t, serveConfig{Roots: []string{r}})
	p := filepath.Join(s.Mnt, "r", "f")
	readFile(t, p) // looked up: a node without a descriptor of its own
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(0o600); err != nil {
		t.Errorf("fchmod of an unlinked open file: %v", err)
	}
	if fi, err := f.Stat(); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("fstat: %v, %v", fi, err)
	}
	if err := f.Truncate(2); err != nil {
		t.Errorf("ftruncate: %v", err)
	}
	if _, err := f.WriteAt([]byte("XY"), 2); err != nil {
		t.Errorf("write: %v", err)
	}
	b := make([]byte, 8)
	if n, err := f.ReadAt(b, 0); string(b[:n]) != "daXY" {
		t.Errorf("read = %q, %v", b[:n], err)
	}
}

// TestViewRevokeRenewedOpenFile: under the writeback cache a file changed
// on the host gets a new kernel inode at the next lookup, and the old one,
// still open, is no longer in go-fuse's tree. Revoking the root must still
// drop its pages, or reads through the old descriptor would go on from the
// page cache. The control skips the open-file pass and reads the data.
func TestViewRevokeRenewedOpenFile(t *testing.T) {
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "revoked", true: "control"}[control], func(t *testing.T) {
			h := hostTree(t)
			r := mkdir(t, filepath.Join(h, "r"))
			other := mkdir(t, filepath.Join(h, "other"))
			write(t, filepath.Join(r, "f"), "secret-v1")
			s := serve(t, serveConfig{Roots: []string{r, other}, Writeback: true, NoOpenDrop: control})
			p := filepath.Join(s.Mnt, "r", "f")
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 9)
			if _, err := f.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			hf, err := os.OpenFile(filepath.Join(r, "f"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			hf.WriteString("-v2")
			hf.Close()
			// A lookup of the changed file renews its node (eventually:
			// the watcher's invalidation is asynchronous).
			renewed := false
			for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(5 * time.Millisecond) {
				if fi, err := os.Stat(p); err == nil && fi.Size() == 12 {
					renewed = true
					break
				}
			}
			if !renewed {
				t.Fatal("the host change never showed through the view")
			}
			if _, err := f.ReadAt(b, 0); err != nil { // the old inode's pages again
				t.Fatal(err)
			}
			s.swap(other)
			n, err := f.ReadAt(b, 0)
			switch {
			case control && err == nil:
				t.Logf("control: read %q after revocation (the open-file pass is what stops it)", b[:n])
			case control:
				t.Errorf("control: read after revocation failed anyway (%v): the test shows nothing", err)
			case err == nil:
				t.Errorf("read %q through a renewed file's old descriptor after its root was revoked", b[:n])
			default:
				wantErrno(t, "read after revocation", err, syscall.EIO)
			}
		})
	}
}

// TestViewHostMount: fanotify reports no mount, so the watcher follows the
// mount table: a tmpfs mounted on the host over a directory the view has
// cached, and unmounted again, shows through the view at once. The control
// drops the watcher's events and keeps showing the covered directory.
func TestViewHostMount(t *testing.T) {
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "watched", true: "control"}[control], func(t *testing.T) {
			h := hostTree(t)
			r := mkdir(t, filepath.Join(h, "r"))
			d := mkdir(t, filepath.Join(r, "d"))
			write(t, filepath.Join(d, "under"), "u")
			s := serve(t, serveConfig{Roots: []string{r}, NoHostEvents: control})
			md := filepath.Join(s.Mnt, "r", "d")
			listing := func(want string) func(string) (bool, string) {
				return func(string) (bool, string) {
					ns := names(t, md)
					return slices.Equal(ns, []string{want}), fmt.Sprint(ns)
				}
			}
			names(t, md)
			names(t, md)
			if err := unix.Mount("tmpfs", d, "tmpfs", 0, "size=1m"); err != nil {
				t.Skipf("cannot mount a tmpfs here: %v", err)
			}
			mounted := true
			defer func() {
				if mounted {
					unix.Unmount(d, unix.MNT_DETACH)
				}
			}()
			write(t, filepath.Join(d, "over"), "o")
			ok, got, after := poll(listing("over"), s.Mnt, control)
			switch {
			case control && ok:
				t.Errorf("mount seen after %v without the watcher: the control shows nothing", after)
			case !control && !ok:
				t.Errorf("mount over a cached directory not seen after %v: %s", after, got)
			}
			// Lazily: the view holds a descriptor of the directory it
			// cached, which keeps a plain unmount busy (EBUSY).
			if err := unix.Unmount(d, unix.MNT_DETACH); err != nil {
				t.Fatal(err)
			}
			mounted = false
			if control {
				return
			}
			if ok, got, after := poll(listing("under"), s.Mnt, false); !ok {
				t.Errorf("unmount not seen after %v: %s", after, got)
			}
		})
	}
}

// TestViewPassthroughOwnWrites: under passthrough the kernel writes to the
// backing file in the writer's context, so fanotify reports the writer and
// not the daemon. Writes made through the view must not make the host
// watcher drop the file's caches (one notification at most for the whole
// open, against one per write in the control, which acts on every
// event). A host process writing the same file meanwhile is still seen
// through the view, and the content is right after close.
func TestViewPassthroughOwnWrites(t *testing.T) {
	const writes = 20
	for _, control := range []bool{false, true} {
		name := "passthrough"
		if control {
			name = "control"
		}
		t.Run(name, func(t *testing.T) {
			h := hostTree(t)
			r := mkdir(t, filepath.Join(h, "r"))
			host := write(t, filepath.Join(r, "f"), "")
			gate := write(t, filepath.Join(r, "g"), "")
			s := serve(t, serveConfig{Roots: []string{r}, Passthrough: true, PassthroughEvents: control})
			if !s.Passthrough {
				testSkipPassthrough(t)
			}
			in, inGate := filepath.Join(s.Mnt, "r", "f"), filepath.Join(s.Mnt, "r", "g")
			os.Stat(in)
			// barrier waits until the watcher has handled every event so far:
			// it changes g's mode on the host and waits for the view to show it.
			mode := os.FileMode(0o600)
			barrier := func() {
				t.Helper()
				os.Stat(inGate)
				mode ^= 0o040
				if err := os.Chmod(gate, mode); err != nil {
					t.Fatal(err)
				}
				ok, _, _ := poll(func(string) (bool, string) {
					fi, err := os.Stat(inGate)
					return err == nil && fi.Mode().Perm() == mode, ""
				}, s.Mnt, false)
				if !ok {
					t.Fatal("the host watcher did not show a host chmod")
				}
			}
			barrier()
			n0 := s.notified()
			barrier()
			gateCost := s.notified() - n0

			n0 = s.notified()
			f, err := os.OpenFile(in, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range writes {
				if _, err := f.WriteAt([]byte("x"), int64(i)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond) // mostly one event each, not merged in the queue
			}
			barrier()
			cost := s.notified() - n0 - gateCost
			t.Logf("%d writes through the view: %d notifications", writes, cost)
			switch {
			case !control && cost > 1:
				t.Errorf("%d writes through the view made the host watcher send %d notifications, want at most 1", writes, cost)
			case control && cost < 3:
				t.Errorf("control: %d writes made only %d notifications: the test shows nothing", writes, cost)
			}

			// A host write meanwhile is seen through the view (after the
			// kernel has cached the attributes the writes left).
			if fi, err := os.Stat(in); err != nil || fi.Size() != writes {
				t.Fatalf("size through the view after the writes: %v, %v", fi, err)
			}
			hf, err := os.OpenFile(host, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			hf.WriteString("host")
			hf.Close()
			ok, got, after := poll(func(string) (bool, string) {
				fi, err := os.Stat(in)
				if err != nil {
					return false, err.Error()
				}
				return fi.Size() == writes+4, fmt.Sprint(fi.Size())
			}, s.Mnt, false)
			if !ok {
				t.Errorf("a host append while the view has the file open for writing: size %s through the view after %v, want %d", got, after, writes+4)
			}
			f.Close()
			data, err := os.ReadFile(in)
			if want := strings.Repeat("x", writes) + "host"; err != nil || string(data) != want {
				t.Errorf("after close: %q, %v; want %q", data, err, want)
			}
		})
	}
}
