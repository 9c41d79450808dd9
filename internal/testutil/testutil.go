// Package testutil holds the prerequisite checks that the project's tests share.
//
// A test that needs /dev/fuse, root or another kernel feature calls one of the
// Require functions. When the prerequisite is truly absent the test skips with
// the reason; when ROOTFS_REQUIRE_FUSE=1 (CI sets it) the skip becomes a
// failure, so a machine that silently lacks FUSE cannot turn the suite green.
package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// Strict reports whether skips of FUSE, root and sandbox tests must fail.
func Strict() bool { return os.Getenv("ROOTFS_REQUIRE_FUSE") == "1" }

// Skip skips t with reason, or fails it under ROOTFS_REQUIRE_FUSE=1.
func Skip(t testing.TB, reason string) {
	t.Helper()
	if Strict() {
		t.Fatalf("prerequisite missing and ROOTFS_REQUIRE_FUSE=1: %s", reason)
	}
	t.Skip(reason)
}

// RequireRoot skips (or fails, see Strict) unless the test runs as uid 0.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root (run the suite as root, e.g. sudo scripts/test.sh)")
	}
}

// RequireFUSE skips (or fails, see Strict) unless /dev/fuse can be opened
// and fusermount3 is installed.
func RequireFUSE(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		Skip(t, "needs /dev/fuse: "+err.Error())
		return
	}
	f.Close()
	if _, err := exec.LookPath("fusermount3"); err != nil {
		Skip(t, "needs fusermount3 (apt-get install fuse3)")
	}
}

// Short skips t under -short, for suites that take more than a few seconds.
func Short(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow test skipped under -short")
	}
}
