//go:build linux

package audit

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestKernelWatchPIDReuse: a process of the host touches a file below the
// root; after it ends, a process of the sandbox gets its pid (pid_max is
// small, and a server can cycle through the pids in seconds). What the
// sandbox's process does must be recorded: an answer cached for the
// pid's former owner must not hide it.
func TestKernelWatchPIDReuse(t *testing.T) {
	testutil.RequireRoot(t)
	const lastPID = "/proc/sys/kernel/ns_last_pid"
	if _, err := os.Stat(lastPID); err != nil {
		t.Skipf("needs %s: %v", lastPID, err)
	}
	base, _ := filepath.EvalSymlinks(t.TempDir())
	root := filepath.Join(base, "proj")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startSandboxShell(t, root)
	for try := 0; try < 5; try++ {
		// A host process's event below the root: its pid is not the
		// sandbox's.
		host := exec.Command("/bin/sh", "-c", `echo h > "$1"`, "sh", filepath.Join(root, fmt.Sprintf("host%d.txt", try)))
		if err := host.Run(); err != nil {
			t.Fatal(err)
		}
		pid := host.Process.Pid
		// A barrier from the sandbox: the host's event has been seen.
		barrier := fmt.Sprintf("barrier%d.txt", try)
		s.run(t, "echo b > "+barrier)
		if !s.waitFor(`"path":"/view/proj/`+barrier+`"`, 10*time.Second) {
			t.Fatalf("no record of %s:\n%s", barrier, s.buf.String())
		}
		// The sandbox's next process gets that pid (unless another
		// process of the machine forks first: then try again).
		reused := fmt.Sprintf("reused%d.txt", try)
		if err := os.WriteFile(lastPID, []byte(strconv.Itoa(pid-1)), 0o644); err != nil {
			t.Skipf("cannot choose the next pid: %v", err)
		}
		s.run(t, "( echo r > "+reused+"; sleep 3 ) &")
		got := false
		deadline := time.Now().Add(2 * time.Second)
		for !got && time.Now().Before(deadline) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", s.cmd.Process.Pid, s.cmd.Process.Pid))
			for _, f := range strings.Fields(string(b)) {
				got = got || f == strconv.Itoa(pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !got {
			t.Logf("try %d: pid %d went to another process", try, pid)
			continue
		}
		if !s.waitFor(`"path":"/view/proj/`+reused+`"`, 2*time.Second) {
			t.Fatalf("the sandbox's process %d, whose pid a host process had, is not recorded:\n%s", pid, s.buf.String())
		}
		return
	}
	t.Skip("could not give the sandbox a host process's pid")
}
