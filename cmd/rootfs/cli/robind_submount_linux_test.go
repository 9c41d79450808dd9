package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestRunROBindCoversSubmounts: a read-only bind of a host directory that
// holds another mount (a read-write tmpfs here; /usr/local on its own
// partition, a data disk under an auto-bound prefix in life) is read-only
// all the way down. The server runs as uid 0 when rootfs does and owns
// what root owns, so a writable submount is a write to the host as root.
// Control: a control build with control.NoSubmountRemount (the submounts
// keep their own flags) lets the same write through.
func TestRunROBindCoversSubmounts(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	run := func(t *testing.T, bin string) string {
		src, err := os.MkdirTemp("/var/tmp", "rootfs-robind-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(src) })
		os.Chmod(src, 0o755)
		sub := filepath.Join(src, "sub")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
			t.Skipf("cannot mount a tmpfs: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(sub, unix.MNT_DETACH) })
		f := filepath.Join(sub, "f")
		if err := os.WriteFile(f, []byte("host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "run", "--no-auto-bind", "--ro-bind", src, "--", "/bin/sh", "-c", "echo sandbox > "+f+"; echo sandbox > "+filepath.Join(src, "top"))
		cmd.Dir = t.TempDir()
		cmd.Stderr = testWriter{t}
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatal("rootfs run did not exit")
		}
		if _, err := os.Stat(filepath.Join(src, "top")); err == nil {
			t.Fatalf("the bind itself was writable: the test shows nothing")
		}
		b, _ := os.ReadFile(f)
		return string(b)
	}
	t.Run("fixed", func(t *testing.T) {
		if got := run(t, knobBinary(t)); got != "host\n" {
			t.Errorf("the server wrote %q into a mount below --ro-bind", got)
		}
	})
	t.Run("control-ro-top-only", func(t *testing.T) {
		if got := run(t, knobBinary(t, control.NoSubmountRemount)); got != "sandbox\n" {
			t.Errorf("control: with the submounts left alone the write did not get through (%q): the test shows nothing", got)
		}
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}
