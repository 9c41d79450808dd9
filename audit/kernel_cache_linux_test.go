//go:build linux

package audit

import (
	"bytes"
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
	cmd *exec.Cmd
	in  io.WriteCloser
	buf *lockedBuffer
	l   *Log
	w   *KernelWatch
}

func startSandboxShell(t *testing.T, root string) *sandboxShell {
	t.Helper()
	testutil.RequireRoot(t)
	cmd := exec.Command("/bin/sh", "-c", `cd "$1" && while read -r line; do eval "$line"; done`, "sh", root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	in, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &sandboxShell{cmd: cmd, in: in, buf: &lockedBuffer{}}
	s.l = New(s.buf, Options{FlushEvery: 10 * time.Millisecond})
	w, err := NewKernelWatch(s.l, cmd.Process.Pid, zaptest.NewLogger(t))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	s.w = w
	w.SetRoots([]RootPath{{Host: root, View: "/view/proj"}})
	t.Cleanup(s.stop)
	return s
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
	s.cmd.Process.Kill()
	s.cmd.Wait()
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
