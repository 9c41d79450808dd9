//go:build linux

package audit

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKernelWatch: what the processes of the sandbox (a PID namespace
// whose init forwards the events) do below a root reaches the log with the
// path the sandbox sees, also what short-lived commands do (each `rm`,
// `mv`, `chmod` ends before its event is read); what they do outside the
// roots, and what a process of the host does below the root (the negative
// control of the PID filter), does not.
func TestKernelWatch(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	root := filepath.Join(base, "proj")
	other := filepath.Join(base, "other")
	for _, d := range []string{root, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "old.txt"), []byte("x"), 0o644)
	s := startSandbox(t, root, `read go
cd "$1"
echo hi > new.txt
cat old.txt >/dev/null; cat old.txt >/dev/null
chmod 600 old.txt
mv new.txt moved.txt
rm moved.txt
echo no > ../other/outside.txt
echo ok`)
	// A process of the host, below the root, while the sandbox runs.
	os.WriteFile(filepath.Join(root, "host-made.txt"), nil, 0o644)
	s.in.Write([]byte("go\n"))
	if line, err := bufio.NewReader(s.stdout).ReadString('\n'); line != "ok\n" {
		t.Fatalf("the sandbox: %q %v", line, err)
	}
	s.stop() // the forwarder drains the queue before it exits
	out := s.buf.String()
	for _, want := range []string{
		`"op":"create","path":"/view/proj/new.txt","host":"` + root + `/new.txt"`,
		`"op":"write","path":"/view/proj/new.txt"`,
		`"op":"attr","path":"/view/proj/old.txt"`,
		`"op":"rename","path":"/view/proj/new.txt","host":"` + root + `/new.txt","dest":"/view/proj/moved.txt"`,
		`"op":"delete","path":"/view/proj/moved.txt"`,
		`"comm":"sh"`, // read by the sandbox's init from its own /proc
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
