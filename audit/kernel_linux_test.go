//go:build linux

package audit

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// groupMarks returns the marks of the watch's group as the kernel lists
// them in fdinfo: "mnt" lines (mount marks) and "sb" lines (filesystem
// marks), each with its event mask.
func groupMarks(t *testing.T, w *KernelWatch) (mnt, sb []uint64) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(int(w.group.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != "fanotify" {
			continue
		}
		var mask uint64
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "mask:"); ok {
				mask, _ = strconv.ParseUint(v, 16, 64)
			}
		}
		switch {
		case strings.HasPrefix(f[1], "mnt_id:"):
			mnt = append(mnt, mask)
		case strings.HasPrefix(f[1], "sdev:"):
			sb = append(sb, mask)
		}
	}
	return mnt, sb
}

// TestKernelWatchMountMarks: once the sandbox's mounts are marked, closes
// come from a mount mark on the sandbox's own bind of the root, and the
// filesystem mark no longer asks for them, so the host's reads and writes
// of that file system make no event; what the sandbox does is recorded
// as before. Negative control: a sandbox that reaches the root without a
// mount of its own keeps the closes on the filesystem mark (the host pays
// for them, and nothing is lost).
func TestKernelWatchMountMarks(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	root := filepath.Join(base, "proj")
	view := filepath.Join(base, "view")
	for _, d := range []string{root, view} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "old.txt"), []byte("x"), 0o644)
	s := startSandboxAt(t, root, view, `read go
cd "$1"
cat old.txt >/dev/null
echo hi > new.txt
mkdir sub
echo ok`)
	mnt, sb := groupMarks(t, s.w)
	if len(mnt) != 1 || mnt[0]&closeMask != closeMask {
		t.Errorf("mount marks %x, want one with the closes %x", mnt, closeMask)
	}
	if len(sb) != 1 || sb[0]&closeMask != 0 || sb[0]&unix.FAN_CREATE == 0 {
		t.Errorf("filesystem marks %x, want one with creates and without closes", sb)
	}
	s.in.Write([]byte("go\n"))
	if line, err := s.lines.ReadString('\n'); line != "ok\n" {
		t.Fatalf("the sandbox: %q %v", line, err)
	}
	s.stop()
	out := s.buf.String()
	for _, want := range []string{
		`"op":"read","path":"` + view + `/old.txt","host":"` + root + `/old.txt"`,
		`"op":"create","path":"` + view + `/new.txt"`,
		`"op":"write","path":"` + view + `/new.txt"`,
		`"op":"create","path":"` + view + `/sub"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in the log:\n%s", want, out)
		}
	}

	// The negative control: no mount of the sandbox's own at the root.
	s2 := startSandbox(t, root, "read go")
	s2.w.MarkSandbox(s2.cmd.Process.Pid)
	mnt, sb = groupMarks(t, s2.w)
	if len(mnt) != 0 || len(sb) != 1 || sb[0]&closeMask != closeMask {
		t.Errorf("without a mount at the root: mount marks %x, filesystem marks %x; want none, and one with the closes", mnt, sb)
	}
}
