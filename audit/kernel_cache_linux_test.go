//go:build linux

package audit

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// lockedBuffer is a bytes.Buffer the test may read while the log writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// sandboxShell is a shell in a PID namespace of its own, below root, that
// runs each line it is sent; a kernel watch watches its namespace.
type sandboxShell struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	stdout io.ReadCloser
	lines  *bufio.Reader // stdout, once startSandboxAt has read from it
	buf    *lockedBuffer
	l      *Log
	w      *KernelWatch
}

// TestMain runs the forwarder when the test binary is re-executed as one
// (see startSandboxShell).
func TestMain(m *testing.M) {
	if script := os.Getenv("ROOTFS_AUDIT_TEST_FORWARDER"); script != "" {
		os.Exit(forwarderMain(script))
	}
	os.Exit(m.Run())
}

// forwarderMain is the sandbox's init, as the test stands it in: PID 1 of
// a PID namespace of its own, it runs script in sh as its child (stdio
// its own) and passes the group's events (fd 3) on to fd 4 (Forward).
func forwarderMain(script string) int {
	// The sandbox's init reads names from the sandbox's own /proc.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fmt.Fprintln(os.Stderr, "forwarder:", err)
		return 2
	}
	if err := unix.Mount("proc", "/proc", "proc", 0, ""); err != nil {
		fmt.Fprintln(os.Stderr, "forwarder:", err)
		return 2
	}
	// As rootfs's sandbox does, reach the root through a mount of this
	// namespace's own (a bind at the view path), said ready once made.
	if view := os.Getenv("ROOTFS_AUDIT_TEST_BIND"); view != "" {
		if err := unix.Mount(os.Getenv("ROOTFS_AUDIT_TEST_ROOT"), view, "", unix.MS_BIND, ""); err != nil {
			fmt.Fprintln(os.Stderr, "forwarder:", err)
			return 2
		}
		os.Setenv("ROOTFS_AUDIT_TEST_ROOT", view)
		fmt.Println("ready")
	}
	stop := Forward(os.NewFile(3, "group"), os.NewFile(4, "out"))
	cmd := exec.Command("/bin/sh", "-c", script, "sh", os.Getenv("ROOTFS_AUDIT_TEST_ROOT"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	stop()
	if err != nil {
		return 1
	}
	return 0
}

// startSandbox starts script in a PID namespace of its own, below root,
// under a forwarder that plays the sandbox's init, with a kernel watch of
// root at /view/proj.
func startSandbox(t *testing.T, root, script string) *sandboxShell {
	return startSandboxAt(t, root, "", script)
}

// startSandboxAt is startSandbox; with view set, the forwarder binds root
// at view in its own mount namespace, the script runs there, the watch
// has root at view, and the sandbox's mounts are marked (MarkSandbox) as
// rootfs run does once its server has started.
func startSandboxAt(t *testing.T, root, view, script string) *sandboxShell {
	t.Helper()
	testutil.RequireRoot(t)
	s := &sandboxShell{buf: &lockedBuffer{}}
	s.l = New(s.buf, Options{FlushEvery: 10 * time.Millisecond})
	w, err := NewKernelWatch(s.l, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s.w = w
	if view == "" {
		w.SetRoots([]RootPath{{Host: root, View: "/view/proj"}})
	} else {
		w.SetRoots([]RootPath{{Host: root, View: view}})
	}
	r, out, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ROOTFS_AUDIT_TEST_FORWARDER="+script, "ROOTFS_AUDIT_TEST_ROOT="+root, "ROOTFS_AUDIT_TEST_BIND="+view)
	cmd.ExtraFiles = []*os.File{w.Group(), out}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	cmd.Stderr = os.Stderr
	s.in, _ = cmd.StdinPipe()
	s.stdout, _ = cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	w.Consume(r)
	s.cmd = cmd
	t.Cleanup(s.stop)
	if view != "" {
		s.lines = bufio.NewReader(s.stdout)
		if line, err := s.lines.ReadString('\n'); line != "ready\n" {
			t.Fatalf("the forwarder did not bind the root: %q %v", line, err)
		}
		w.MarkSandbox(cmd.Process.Pid)
	}
	return s
}

// startSandboxShell is startSandbox of a shell that runs each line it is
// sent.
func startSandboxShell(t *testing.T, root string) *sandboxShell {
	return startSandbox(t, root, `cd "$1" && while read -r line; do eval "$line"; done`)
}

func (s *sandboxShell) run(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until the log holds want, and says whether it came.
func (s *sandboxShell) waitFor(want string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if strings.Contains(s.buf.String(), want) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func (s *sandboxShell) stop() {
	if s.w == nil {
		return
	}
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		s.cmd.Process.Kill()
		<-done
	}
	s.w.Close()
	s.l.Close()
	s.w = nil
}

// TestKernelWatchHostRenamesDir: a directory renamed by a process outside
// the sandbox (the user, in an editor) moves what the sandbox does in it
// afterwards; the record must name the directory's new path, not the one
// the watch resolved before.
func TestKernelWatchHostRenamesDir(t *testing.T) {
	testutil.RequireRoot(t)
	base, _ := filepath.EvalSymlinks(t.TempDir())
	root := filepath.Join(base, "proj")
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := startSandboxShell(t, root)
	s.run(t, "echo a > d/a.txt")
	if !s.waitFor(`"path":"/view/proj/d/a.txt"`, 10*time.Second) {
		t.Fatalf("no record of d/a.txt:\n%s", s.buf.String())
	}
	// The host, not the sandbox, renames the directory.
	if err := os.Rename(filepath.Join(root, "d"), filepath.Join(root, "e")); err != nil {
		t.Fatal(err)
	}
	s.run(t, "echo b > e/b.txt")
	s.run(t, "echo c > barrier.txt")
	if !s.waitFor(`"path":"/view/proj/barrier.txt"`, 10*time.Second) {
		t.Fatalf("no record of barrier.txt:\n%s", s.buf.String())
	}
	out := s.buf.String()
	if !strings.Contains(out, `"op":"create","path":"/view/proj/e/b.txt","host":"`+root+`/e/b.txt"`) {
		t.Errorf("the create in the renamed directory is not recorded at its path /view/proj/e/b.txt:\n%s", out)
	}
	if strings.Contains(out, "/d/b.txt") {
		t.Errorf("a record names the directory's old path:\n%s", out)
	}
}
