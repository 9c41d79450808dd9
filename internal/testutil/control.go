package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rootfs-dev/rootfs/internal/control"
)

var controlTest struct {
	once     sync.Once
	dir, bin string
	err      error
	skip     string
}

// ControlTestBinary returns a control build (see package control) of the
// running test binary, for a negative control that re-executes the test
// binary with control.EnvVar set: the running binary itself when it is one
// (go test -tags rootfs_control), otherwise "go test -c -tags
// rootfs_control" of the package under test (go test runs a test binary in
// its package's directory), built once per process. TestMain removes it
// with RemoveControlTestBinary after m.Run. Without a go toolchain the
// test skips.
func ControlTestBinary(t testing.TB) string {
	t.Helper()
	if control.Built {
		return os.Args[0]
	}
	c := &controlTest
	c.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			c.skip = "go toolchain not available to build a control test binary"
			return
		}
		if c.dir, c.err = os.MkdirTemp("", "rootfs-control-"); c.err != nil {
			return
		}
		bin := filepath.Join(c.dir, filepath.Base(os.Args[0]))
		if out, err := exec.Command(goTool, "test", "-c", "-tags", "rootfs_control", "-o", bin, ".").CombinedOutput(); err != nil {
			c.err = fmt.Errorf("go test -c -tags rootfs_control: %v\n%s", err, out)
			return
		}
		c.bin = bin
	})
	if c.skip != "" {
		t.Skip(c.skip)
	}
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.bin
}

// RemoveControlTestBinary removes what ControlTestBinary built, if it did.
func RemoveControlTestBinary() {
	if controlTest.dir != "" {
		_ = os.RemoveAll(controlTest.dir)
	}
}
