package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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

// Control makes the rest of t a negative control with knobs on, for a test
// whose control runs in the test process. Where the knobs are all on (a
// control build started with them) it returns false, and t goes on.
// Anywhere else it runs t alone in a control build of the test binary
// (ControlTestBinary) with the knobs on, fails t if that run did not pass
// it, and returns true: t must then return.
func Control(t testing.TB, knobs ...control.Knob) (ranElsewhere bool) {
	t.Helper()
	on := true
	for _, k := range knobs {
		on = on && control.On(k)
	}
	if on {
		return false
	}
	var run []string
	for _, part := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	args := []string{"-test.run=" + strings.Join(run, "/"), "-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	setting := control.EnvVar + "=" + control.Names(knobs...)
	cmd := exec.Command(ControlTestBinary(t), args...)
	cmd.Env = append(os.Environ(), setting)
	out, err := cmd.CombinedOutput()
	// A pattern that matched nothing would pass too: the run must name t.
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()+" (") {
		t.Errorf("%s in a control build with %s: %v\n%s", t.Name(), setting, err, out)
	} else if testing.Verbose() {
		t.Logf("ran in a control build with %s:\n%s", setting, out)
	}
	return true
}
