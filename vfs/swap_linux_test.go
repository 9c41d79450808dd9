//go:build linux

package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestViewSwap: two readers of a surviving root see no error while the set
// changes; a removed root is unreachable as soon as Swap returns; handles
// opened under it fail with EIO (the documented errno of revocation), also
// for data that was in the page cache; a re-pointed name serves the new
// target only.
func TestViewSwap(t *testing.T) {
	h := hostTree(t)
	a := mkdir(t, filepath.Join(h, "a"))
	write(t, filepath.Join(a, "keep"), "keep me")
	b := mkdir(t, filepath.Join(h, "b"))
	write(t, filepath.Join(b, "gone"), "soon gone")
	mkdir(t, filepath.Join(b, "sub"))
	c := mkdir(t, filepath.Join(h, "c"))
	write(t, filepath.Join(c, "new"), "new")
	b2 := mkdir(t, filepath.Join(h, "elsewhere", "b"))
	write(t, filepath.Join(b2, "other"), "other b")

	// A 1h cache: everything below holds only because Swap invalidates.
	s := serve(t, serveConfig{Roots: []string{a, b}, CacheTimeout: time.Hour})
	ma, mb := filepath.Join(s.Mnt, "a"), filepath.Join(s.Mnt, "b")
	if _, err := os.Stat(filepath.Join(s.Mnt, "c")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("c before it is a root: %v", err) // now a cached negative entry
	}

	var stop atomic.Bool
	var reads, readErrs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				data, err := os.ReadFile(filepath.Join(ma, "keep"))
				if err == nil && string(data) != "keep me" {
					err = fmt.Errorf("read %q", data)
				}
				if err == nil {
					_, err = os.ReadDir(ma)
				}
				reads.Add(1)
				if err != nil {
					readErrs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}

	const rounds = 40
	for i := range rounds {
		f, err := os.Open(filepath.Join(mb, "gone"))
		if err != nil {
			t.Fatalf("round %d: open b/gone: %v", i, err)
		}
		buf := make([]byte, 64)
		if _, err := f.ReadAt(buf[:4], 0); err != nil { // now in the page cache
			t.Fatal(err)
		}
		dir, err := os.Open(filepath.Join(mb, "sub"))
		if err != nil {
			t.Fatal(err)
		}

		s.swap(a, c)

		if _, err := os.Stat(mb); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("round %d: stat b right after Swap: %v, want ENOENT", i, err)
		}
		if got := names(t, s.Mnt); !slices.Equal(got, []string{"a", "c"}) {
			t.Fatalf("round %d: listing %q", i, got)
		}
		_, err = f.ReadAt(buf, 0)
		wantErrno(t, "read of a revoked handle (page cached)", err, syscall.EIO)
		var st unix.Stat_t
		wantErrno(t, "fstat of a revoked handle", unix.Fstat(int(f.Fd()), &st), syscall.EIO)
		_, err = f.Write([]byte("x"))
		if err == nil {
			t.Errorf("write to a read-only revoked handle succeeded")
		}
		_, err = dir.ReadDir(-1)
		if err == nil {
			t.Errorf("readdir of a revoked directory handle succeeded")
		}
		if err := f.Close(); err != nil {
			t.Errorf("close of a revoked handle: %v", err)
		}
		dir.Close()
		if got := readFile(t, filepath.Join(s.Mnt, "c", "new")); got != "new" {
			t.Errorf("c/new = %q", got)
		}
		s.swap(a, b)
		if t.Failed() {
			break
		}
	}

	// The same name re-pointed at another directory: old handles are
	// revoked, new lookups reach only the new target.
	f, err := os.Open(filepath.Join(mb, "gone"))
	if err != nil {
		t.Fatal(err)
	}
	s.swap(a, b2)
	if _, err := os.Stat(filepath.Join(mb, "gone")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("old b/gone after re-pointing: %v", err)
	}
	if got := readFile(t, filepath.Join(mb, "other")); got != "other b" {
		t.Errorf("new b/other = %q", got)
	}
	_, err = f.Read(make([]byte, 4))
	wantErrno(t, "read under the old b", err, syscall.EIO)
	f.Close()

	stop.Store(true)
	wg.Wait()
	t.Logf("%d rounds; readers of the surviving root: %d reads, %d errors", rounds, reads.Load(), readErrs.Load())
	if n := readErrs.Load(); n != 0 {
		t.Errorf("readers of a surviving root saw %d errors, first: %v", n, firstErr.Load())
	}
	if reads.Load() == 0 {
		t.Errorf("readers did not run")
	}
}

// TestViewRevokedCwd: a process whose cwd is under a removed root can no
// longer list, read or create there.
func TestViewRevokedCwd(t *testing.T) {
	h := hostTree(t)
	b := mkdir(t, filepath.Join(h, "b"))
	write(t, filepath.Join(b, "sub", "f"), "f")
	s := serve(t, serveConfig{Roots: []string{b}})
	sub := filepath.Join(s.Mnt, "b", "sub")
	// The shell waits for its stdin to close, then tries its cwd.
	cmd := execShell(t, sub, `read x; ls . 2>/dev/null; cat ./f 2>/dev/null; echo new > ./created 2>/dev/null; echo done`)
	s.swap()
	out := cmd.finish()
	if out != "done\n" {
		t.Errorf("in a revoked cwd the shell printed %q", out)
	}
	if _, err := os.Stat(filepath.Join(b, "sub", "created")); err == nil {
		t.Errorf("a file was created under a revoked root")
	}
}

// TestViewHostRace is the host-side race: one goroutine swaps a directory of
// a root with a symlink that points out of the root, in a tight loop
// (renameat2 RENAME_EXCHANGE), while others open, stat, list, create, chmod
// and unlink through the mount. The view must never touch the outside
// directory. The negative control runs the same race against go-fuse's stock
// path-based loopback and must escape, which shows the race is real.
//
// The "fuse" variants are the FUSE-only form of the same attack: roots r and
// r/d, and the client itself exchanges r/d with the symlink through the
// mount while others use root d.
func TestViewHostRace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		loopback bool
		viaFUSE  bool
	}{
		{"host/view", false, false}, {"host/stock-loopback-control", true, false},
		{"fuse/view", false, true}, {"fuse/stock-loopback-control", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testutil.Short(t)
			res := hostRace(t, tc.loopback, tc.viaFUSE, 2*time.Second)
			t.Logf("%s: %d ops, %d swaps, escapes: %v", tc.name, res.ops, res.swaps, res.escapes)
			total := 0
			for _, n := range res.escapes {
				total += n
			}
			if tc.loopback && total == 0 {
				t.Errorf("the path-based control did not escape: the race did not happen, so the test proves nothing")
			}
			if !tc.loopback && total != 0 {
				t.Errorf("the view escaped the root: %v", res.escapes)
			}
		})
	}
}

type raceResult struct {
	ops, swaps int64
	escapes    map[string]int
}

func hostRace(t *testing.T, loopback, viaFUSE bool, d time.Duration) raceResult {
	h := hostTree(t)
	r := mkdir(t, filepath.Join(h, "r"))
	out := mkdir(t, filepath.Join(h, "outside"))
	write(t, filepath.Join(out, "secret"), "SECRET")
	const victims = 2000
	for i := range victims {
		write(t, filepath.Join(out, fmt.Sprintf("victim-%d", i)), "v")
	}
	write(t, filepath.Join(r, "d", "inside"), "inside")
	if err := os.Symlink("../outside", filepath.Join(r, "s")); err != nil {
		t.Fatal(err)
	}
	roots := []string{r}
	if viaFUSE {
		roots = append(roots, filepath.Join(r, "d")) // nested root "d"
	}
	cfg := serveConfig{Roots: roots}
	if loopback {
		cfg = serveConfig{Loopback: roots}
	}
	s := serve(t, cfg)
	md := filepath.Join(s.Mnt, "r", "d")
	attackDir := r
	if viaFUSE {
		md = filepath.Join(s.Mnt, "d")
		attackDir = filepath.Join(s.Mnt, "r")
	}

	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the attacker: on the host, or through the mount
		defer wg.Done()
		rfd, err := unix.Open(attackDir, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(rfd)
		for !stop.Load() {
			if err := unix.Renameat2(rfd, "d", rfd, "s", unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
			swaps.Add(1)
		}
	}()
	var mu sync.Mutex
	escapes := map[string]int{}
	escaped := func(kind string) {
		mu.Lock()
		escapes[kind]++
		mu.Unlock()
	}
	var ops atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 16)
			for i := 0; !stop.Load(); i++ {
				ops.Add(6)
				if fd, err := unix.Open(filepath.Join(md, "secret"), unix.O_RDONLY, 0); err == nil {
					if n, _ := unix.Read(fd, buf); string(buf[:n]) == "SECRET" {
						escaped("read")
					}
					unix.Close(fd)
				}
				var st unix.Stat_t
				if unix.Lstat(filepath.Join(md, "secret"), &st) == nil {
					escaped("stat")
				}
				if f, err := os.Open(md); err == nil {
					ns, _ := f.Readdirnames(-1)
					f.Close()
					if slices.Contains(ns, "secret") {
						escaped("list")
					}
				}
				if fd, err := unix.Open(filepath.Join(md, fmt.Sprintf("new-%d-%d", g, i)), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644); err == nil {
					unix.Close(fd)
				}
				if unix.Chmod(filepath.Join(md, "secret"), 0o600) == nil {
					escaped("chmod")
				}
				if unix.Unlink(filepath.Join(md, fmt.Sprintf("victim-%d", (i*4+g)%victims))) == nil {
					escaped("unlink")
				}
			}
		}()
	}
	time.Sleep(d)
	if loopback {
		// The control must show the race; on a loaded machine give it
		// longer rather than report a useless pass.
		for deadline := time.Now().Add(3 * d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			mu.Lock()
			n := len(escapes)
			mu.Unlock()
			if n > 0 {
				break
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	// What happened outside, whatever the clients saw:
	es, _ := os.ReadDir(out)
	left := 0
	for _, e := range es {
		switch n := e.Name(); {
		case len(n) > 4 && n[:4] == "new-":
			escapes["create (host)"]++
		case len(n) > 7 && n[:7] == "victim-":
			left++
		}
	}
	if left != victims {
		escapes["unlink (host)"] = victims - left
	}
	if fi, err := os.Stat(filepath.Join(out, "secret")); err != nil || fi.Mode().Perm() != 0o644 {
		escapes["chmod (host)"]++
	}
	for k, v := range escapes {
		if v == 0 {
			delete(escapes, k)
		}
	}
	return raceResult{ops: ops.Load(), swaps: swaps.Load(), escapes: escapes}
}

// TestViewNestedRoots: with roots x and x/sub, a client replaces x/sub by a
// symlink out of x through the mount. A path-based view then serves the
// outside through root "sub"; the view keeps serving the pinned directory.
func TestViewNestedRoots(t *testing.T) {
	for _, tc := range []struct {
		name     string
		loopback bool
	}{{"view", false}, {"stock-loopback-control", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := hostTree(t)
			x := mkdir(t, filepath.Join(h, "x"))
			sub := mkdir(t, filepath.Join(x, "sub"))
			write(t, filepath.Join(sub, "f"), "f")
			write(t, filepath.Join(h, "outside", "secret"), "SECRET")
			cfg := serveConfig{Roots: []string{x, sub}}
			if tc.loopback {
				cfg = serveConfig{Loopback: []string{x, sub}}
			}
			s := serve(t, cfg)
			if got := names(t, filepath.Join(s.Mnt, "sub")); !slices.Equal(got, []string{"f"}) {
				t.Fatalf("sub lists %q", got)
			}
			if err := os.Rename(filepath.Join(s.Mnt, "x", "sub"), filepath.Join(s.Mnt, "x", "sub.old")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../outside", filepath.Join(s.Mnt, "x", "sub")); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadDir(filepath.Join(s.Mnt, "sub"))
			var ns []string
			for _, e := range got {
				ns = append(ns, e.Name())
			}
			escaped := slices.Contains(ns, "secret")
			if _, err := os.Stat(filepath.Join(s.Mnt, "sub", "secret")); err == nil {
				escaped = true
			}
			t.Logf("%s: sub lists %q (%v), escaped=%v", tc.name, ns, err, escaped)
			if tc.loopback != escaped {
				if tc.loopback {
					t.Errorf("the path-based control did not escape")
				} else {
					t.Errorf("root sub served the outside")
				}
			}
			if !tc.loopback && !slices.Equal(ns, []string{"f"}) {
				t.Errorf("root sub should keep serving the pinned directory, lists %q", ns)
			}
		})
	}
}

type shellProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bytes.Buffer
}

// execShell starts sh in dir; it runs script once finish closes its stdin.
func execShell(t *testing.T, dir, script string) *shellProc {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &shellProc{t: t, cmd: cmd, stdin: in, out: &out}
}

func (p *shellProc) finish() string {
	p.stdin.Close()
	p.cmd.Wait()
	return p.out.String()
}

// TestViewPassthrough: with Options.Passthrough the kernel does file I/O
// itself; the documented cost is that a handle opened before its root was
// removed keeps reading until it is closed, while its metadata operations
// still fail with EIO and new lookups fail.
func TestViewPassthrough(t *testing.T) {
	h := hostTree(t)
	a := mkdir(t, filepath.Join(h, "a"))
	write(t, filepath.Join(a, "f"), "passthrough data")
	s := serve(t, serveConfig{Roots: []string{a}, Passthrough: true})
	if !s.Passthrough {
		t.Skip("the kernel did not grant FUSE passthrough (needs Linux 6.9+ and CAP_SYS_ADMIN in the initial user namespace)")
	}
	f, err := os.Open(filepath.Join(s.Mnt, "a", "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s.swap()
	if _, err := os.Stat(filepath.Join(s.Mnt, "a")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat of a removed root: %v, want ENOENT", err)
	}
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if string(buf[:n]) != "passthrough data" {
		t.Errorf("passthrough read after revocation = %q, %v (documented to keep working)", buf[:n], err)
	}
	var st unix.Stat_t
	wantErrno(t, "fstat of a revoked passthrough handle", unix.Fstat(int(f.Fd()), &st), syscall.EIO)
}

// TestViewDescriptorsReturn: the daemon's descriptors return to their
// baseline once the kernel forgets the nodes of a removed root: one O_PATH
// descriptor per node is not a leak.
func TestViewDescriptorsReturn(t *testing.T) {
	testutil.Short(t)
	h := hostTree(t)
	a := mkdir(t, filepath.Join(h, "a"))
	b := mkdir(t, filepath.Join(h, "b"))
	const files = 500
	for i := range files {
		write(t, filepath.Join(b, "d", fmt.Sprintf("f%d", i)), "x")
	}
	s := serve(t, serveConfig{Roots: []string{a}})
	base := s.fds()
	const slack = 16 // go-fuse and runtime descriptors; a leak is ~one per file
	for round := range 3 {
		s.swap(a, b)
		for i := range files {
			if _, err := os.ReadFile(filepath.Join(s.Mnt, "b", "d", fmt.Sprintf("f%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("round %d: %d descriptors while %d files are cached (base %d)", round, s.fds(), files, base)
		s.swap(a)
		// Make the kernel forget the removed root's inodes (FORGET).
		os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0)
	}
	var after int
	for range 20 {
		os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0)
		if after = s.fds(); after <= base+slack {
			break
		}
	}
	t.Logf("descriptors: base %d, after 3 rounds of %d files and removal %d", base, files, after)
	if after > base+slack {
		t.Errorf("the daemon holds %d descriptors, %d more than before: nodes leak", after, after-base)
	}
}

// TestViewSwapControl is the negative control of TestViewSwap: with Swap's
// kernel notifications turned off and a 1h cache, a removed root stays
// reachable through the kernel's cached entry, which shows that the
// explicit invalidation is what makes removal immediate.
func TestViewSwapControl(t *testing.T) {
	h := hostTree(t)
	a := mkdir(t, filepath.Join(h, "a"))
	b := mkdir(t, filepath.Join(h, "b"))
	s := serve(t, serveConfig{Roots: []string{a, b}, CacheTimeout: time.Hour, NoInvalidate: true})
	if _, err := os.Stat(filepath.Join(s.Mnt, "b")); err != nil {
		t.Fatal(err)
	}
	s.swap(a)
	if _, err := os.Stat(filepath.Join(s.Mnt, "b")); err != nil {
		t.Fatalf("without invalidation the removed root vanished anyway (%v): TestViewSwap would prove nothing", err)
	}
}
