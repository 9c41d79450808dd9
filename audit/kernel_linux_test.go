//go:build linux

package audit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestKernelWatch: what a process of another PID namespace does below a
// root reaches the log with the path the sandbox sees; what it does
// outside the roots, and what a process of this namespace does below the
// root (the negative control of the PID filter), does not.
func TestKernelWatch(t *testing.T) {
	testutil.RequireRoot(t)
	base, _ := filepath.EvalSymlinks(t.TempDir())
	root := filepath.Join(base, "proj")
	other := filepath.Join(base, "other")
	for _, d := range []string{root, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "old.txt"), []byte("x"), 0o644)
	var buf bytes.Buffer
	l := New(&buf, Options{FlushEvery: time.Hour})
	script := `read go
cd "$1"
echo hi > new.txt
cat old.txt >/dev/null; cat old.txt >/dev/null
chmod 600 old.txt
mv new.txt moved.txt
rm moved.txt
echo no > "$2/outside.txt"`
	cmd := exec.Command("/bin/sh", "-c", script, "sh", root, other)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w, err := NewKernelWatch(l, cmd.Process.Pid, zaptest.NewLogger(t))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	w.SetRoots([]RootPath{{Host: root, View: "/view/proj"}})
	// This process, in the host's PID namespace, below the root.
	os.WriteFile(filepath.Join(root, "host-made.txt"), nil, 0o644)
	stdin.Write([]byte("go\n"))
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// The events are read asynchronously: wait until the last is in.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && l.Stats().Ops[OpDelete] == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	w.Close()
	l.Close()
	out := buf.String()
	for _, want := range []string{
		`"op":"create","path":"/view/proj/new.txt","host":"` + root + `/new.txt"`,
		`"op":"write","path":"/view/proj/new.txt"`,
		`"op":"attr","path":"/view/proj/old.txt"`,
		`"op":"rename","path":"/view/proj/new.txt","host":"` + root + `/new.txt","dest":"/view/proj/moved.txt"`,
		`"op":"delete","path":"/view/proj/moved.txt"`,
		`"op":"read","path":"/view/proj/old.txt","host":"` + root + `/old.txt","result":"ok"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in the log:\n%s", want, out)
		}
	}
	for _, not := range []string{"outside.txt", "host-made.txt"} {
		if strings.Contains(out, not) {
			t.Errorf("%s recorded:\n%s", not, out)
		}
	}
}
