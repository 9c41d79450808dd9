//go:build linux

package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestMountHelperProcess is not a test: it is "rootfs mount" when the test
// binary is re-executed by startMount (ROOTFS_MOUNT_HELPER=1), so the mount
// is served by a process of its own and accessed by the test.
func TestMountHelperProcess(t *testing.T) {
	if os.Getenv("ROOTFS_MOUNT_HELPER") != "1" {
		t.Skip("helper process for the mount tests")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	err := runMount(context.Background(), args, os.Stderr, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rootfs mount: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type mountProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	more  chan struct{}
	done  chan struct{}
}

// rootfsBinary builds cmd/rootfs into a temporary directory of t, or
// returns "" when that is not possible (then the test binary itself serves
// as "rootfs mount", see TestMountHelperProcess).
func rootfsBinary(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		return ""
	}
	p := filepath.Join(t.TempDir(), "rootfs")
	out, err := exec.Command(goTool, "build", "-o", p, "github.com/rootfs-dev/rootfs/cmd/rootfs").CombinedOutput()
	if err != nil {
		t.Logf("go build ./cmd/rootfs failed, testing runMount in the test binary: %v\n%s", err, out)
		return ""
	}
	return p
}

func startMount(t *testing.T, bin string, args ...string) *mountProc {
	t.Helper()
	return startMountAs(t, nil, bin, args...)
}

// startMountAs is startMount as another user (nil: as the test).
func startMountAs(t *testing.T, cred *syscall.Credential, bin string, args ...string) *mountProc {
	t.Helper()
	var cmd *exec.Cmd
	if bin != "" {
		cmd = exec.Command(bin, append([]string{"mount"}, args...)...)
	} else {
		cmd = exec.Command(os.Args[0], append([]string{"-test.run=^TestMountHelperProcess$", "--"}, args...)...)
		cmd.Env = append(os.Environ(), "ROOTFS_MOUNT_HELPER=1")
	}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &mountProc{cmd: cmd, more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
			}
		}
	})
	return p
}

func (p *mountProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitFor waits until the process has printed a line containing s (or has
// exited), and reports whether it did.
func (p *mountProc) waitFor(s string) bool {
	deadline := time.After(20 * time.Second)
	for {
		if strings.Contains(p.output(), s) {
			return true
		}
		select {
		case <-p.more:
		case <-p.done:
			return strings.Contains(p.output(), s)
		case <-deadline:
			return false
		}
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

func writeRoots(t *testing.T, file string, body string) {
	t.Helper()
	if err := os.WriteFile(file+".tmp", []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		t.Fatal(err)
	}
}

func listing(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	var ns []string
	for _, e := range es {
		ns = append(ns, e.Name())
	}
	return ns
}

func TestMountCommand(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	top := t.TempDir()
	for _, d := range []string{"a", "b", "c", "mnt"} {
		os.Mkdir(filepath.Join(top, d), 0o755)
	}
	os.WriteFile(filepath.Join(top, "a", "f"), []byte("A"), 0o644)
	mnt := filepath.Join(top, "mnt")
	rootsFile := filepath.Join(top, "roots.json")
	writeRoots(t, rootsFile, fmt.Sprintf(`{"roots":[{"uri":"file://%s/a","name":"A"}]}`, top))

	p := startMount(t, rootfsBinary(t), "--roots-file", rootsFile, "--root", filepath.Join(top, "b"), mnt)
	if !p.waitFor("rootfs: mounted") {
		t.Fatalf("not mounted:\n%s", p.output())
	}
	for _, want := range []string{"a -> " + filepath.Join(top, "a"), "b -> " + filepath.Join(top, "b")} {
		if !p.waitFor(want) {
			t.Errorf("report lacks %q:\n%s", want, p.output())
		}
	}
	if got := listing(t, mnt); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("listing %q", got)
	}
	if data, err := os.ReadFile(filepath.Join(mnt, "a", "f")); err != nil || string(data) != "A" {
		t.Errorf("a/f = %q, %v", data, err)
	}

	// SIGHUP re-reads the file and swaps.
	writeRoots(t, rootsFile, fmt.Sprintf(`{"roots":[{"uri":"file://%s/c"}]}`, top))
	p.cmd.Process.Signal(syscall.SIGHUP)
	if !p.waitFor("roots re-read") {
		t.Fatalf("no swap after SIGHUP:\n%s", p.output())
	}
	if got := listing(t, mnt); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("after SIGHUP: listing %q, want [b c]", got)
	}

	// A root that disappeared keeps the old view (fail closed) and says so.
	writeRoots(t, rootsFile, fmt.Sprintf(`{"roots":[{"uri":"file://%s/missing"}]}`, top))
	p.cmd.Process.Signal(syscall.SIGHUP)
	if !p.waitFor("missing: no such file or directory") {
		t.Fatalf("missing root not reported:\n%s", p.output())
	}
	if got := listing(t, mnt); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("after a missing root: listing %q, want [b c]", got)
	}

	// A bad file keeps the old view and says why.
	writeRoots(t, rootsFile, `{"roots": [`)
	p.cmd.Process.Signal(syscall.SIGHUP)
	if !p.waitFor("not valid roots JSON") {
		t.Fatalf("bad file not reported:\n%s", p.output())
	}
	if !strings.Contains(p.output(), "keeping the current view") {
		t.Errorf("the log does not say what was wrong:\n%s", p.output())
	}
	if got := listing(t, mnt); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("after a bad file: listing %q, want [b c]", got)
	}

	// SIGTERM unmounts and exits 0.
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("still running after SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM:\n%s", code, p.output())
	}
	if mountedAt(mnt) {
		t.Errorf("%s still mounted after exit", mnt)
	}
}

func TestMountCommandErrors(t *testing.T) {
	testutil.RequireRoot(t)
	top := t.TempDir()
	os.MkdirAll(filepath.Join(top, "r", "inner"), 0o755)
	os.WriteFile(filepath.Join(top, "file"), nil, 0o644)
	bin := rootfsBinary(t)
	tests := []struct {
		name string
		args []string
		want string
		code int
	}{
		{"inside a root", []string{"--root", filepath.Join(top, "r"), filepath.Join(top, "r", "inner")}, "is inside root", 1},
		{"missing mount point", []string{"--root", filepath.Join(top, "r"), filepath.Join(top, "nope")}, "does not exist", 1},
		{"not a directory", []string{"--root", filepath.Join(top, "r"), filepath.Join(top, "file")}, "not a directory", 1},
		{"no roots", []string{filepath.Join(top, "r")}, "no roots", 2},
		{"two mount points", []string{"--root", "/x", "a", "b"}, "exactly one MOUNTPOINT", 2},
		{"unreadable roots file", []string{"--roots-file", filepath.Join(top, "none.json"), filepath.Join(top, "r")}, "--roots-file", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startMount(t, bin, tt.args...)
			<-p.done
			out := p.output()
			code := p.cmd.ProcessState.ExitCode()
			if code == 0 {
				t.Fatalf("exit 0, want failure:\n%s", out)
			}
			if bin != "" && code != tt.code {
				t.Errorf("exit status %d, want %d", code, tt.code)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			var errLines []string
			for _, l := range lines {
				if strings.HasPrefix(l, "rootfs mount:") {
					errLines = append(errLines, l)
				}
			}
			if len(errLines) != 1 || !strings.Contains(errLines[0], tt.want) {
				t.Errorf("want one error line containing %q, got:\n%s", tt.want, out)
			}
		})
	}
}

// TestMountCommandStaleMount: a mount left by a killed daemon ("transport
// endpoint is not connected") is detached by the next "rootfs mount".
func TestMountCommandStaleMount(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	top := t.TempDir()
	os.Mkdir(filepath.Join(top, "a"), 0o755)
	mnt := filepath.Join(top, "mnt")
	os.Mkdir(mnt, 0o755)
	bin := rootfsBinary(t)
	p := startMount(t, bin, "--root", filepath.Join(top, "a"), mnt)
	if !p.waitFor("rootfs: mounted") {
		t.Fatalf("not mounted:\n%s", p.output())
	}
	p.cmd.Process.Kill()
	<-p.done
	var sfs unix.Statfs_t
	if err := unix.Statfs(mnt, &sfs); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after kill -9: statfs %v, want ENOTCONN (a dead mount)", err)
	}
	q := startMount(t, bin, "--root", filepath.Join(top, "a"), mnt)
	if !q.waitFor("rootfs: mounted") {
		t.Fatalf("second mount failed:\n%s", q.output())
	}
	if got := listing(t, mnt); !slices.Equal(got, []string{"a"}) {
		t.Errorf("listing %q", got)
	}
	// A live view is not mounted over.
	r := startMount(t, bin, "--root", filepath.Join(top, "a"), mnt)
	<-r.done
	if r.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(r.output(), "already mounted") {
		t.Errorf("mount over a live view: exit %d:\n%s", r.cmd.ProcessState.ExitCode(), r.output())
	}
	q.cmd.Process.Signal(syscall.SIGTERM)
	<-q.done
	if mountedAt(mnt) {
		unix.Unmount(mnt, unix.MNT_DETACH)
		t.Errorf("mount left behind")
	}
}

// TestMountNestedPlanted: whoever uses the mount can swap a nested root for
// a symlink through an outer writable root; the SIGHUP that re-reads the
// roots leaves that root out and says why. The negative control is a new
// session that never served the outer root: it follows the same link.
func TestMountNestedPlanted(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	top, _ := filepath.EvalSymlinks(t.TempDir())
	ws, secret := filepath.Join(top, "ws"), filepath.Join(top, "secret")
	for _, d := range []string{filepath.Join(ws, "app"), secret, filepath.Join(top, "mnt"), filepath.Join(top, "mnt2")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(secret, "token"), []byte("T"), 0o644)
	mnt := filepath.Join(top, "mnt")
	rootsFile := filepath.Join(top, "roots.json")
	both := fmt.Sprintf(`{"roots":[{"uri":"file://%s"},{"uri":"file://%s/app"}]}`, ws, ws)
	writeRoots(t, rootsFile, both)
	bin := rootfsBinary(t)
	p := startMount(t, bin, "--roots-file", rootsFile, mnt)
	if !p.waitFor("rootfs: mounted") {
		t.Fatalf("not mounted:\n%s", p.output())
	}
	// Plant through the mount, as its user would.
	if err := os.Rename(filepath.Join(mnt, "ws", "app"), filepath.Join(mnt, "ws", "app.orig")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(mnt, "ws", "app")); err != nil {
		t.Fatal(err)
	}
	writeRoots(t, rootsFile, both)
	p.cmd.Process.Signal(syscall.SIGHUP)
	if !p.waitFor("roots re-read") {
		t.Fatalf("no swap after SIGHUP:\n%s", p.output())
	}
	if got := listing(t, mnt); !slices.Equal(got, []string{"ws"}) || !p.waitFor("could have planted") {
		t.Fatalf("after planting: listing %q, want [ws]; output:\n%s", got, p.output())
	}

	// Control: a session that never served ws follows the link.
	mnt2 := filepath.Join(top, "mnt2")
	c := startMount(t, bin, "--root", filepath.Join(ws, "app"), mnt2)
	if !c.waitFor("rootfs: mounted") {
		t.Fatalf("control not mounted:\n%s", c.output())
	}
	if data, err := os.ReadFile(filepath.Join(mnt2, "secret", "token")); err != nil || string(data) != "T" {
		t.Fatalf("control: %v %q; want the link followed to %s:\n%s", err, data, secret, c.output())
	}
}
