//go:build linux

package mountmgr

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// relayCheck runs in P1 (p1Main, actions "relay" and "relay-nowatch"): it
// drops the bind over /data as the kernel does when something invalidates
// the entry, and reports whether RootBinds lays it again.
func relayCheck(mnt, data string) int {
	entry := filepath.Join(mnt, "data")
	var host, st unix.Stat_t
	if err := unix.Stat(data, &host); err != nil {
		fmt.Println("error", err)
		return 1
	}
	bound := func() bool { return unix.Stat(entry, &st) == nil && st.Dev == host.Dev && st.Ino == host.Ino }
	if !bound() {
		fmt.Println("not bound at start")
		return 0
	}
	if err := unix.Unmount(entry, unix.MNT_DETACH); err != nil {
		fmt.Println("error", err)
		return 1
	}
	if bound() {
		fmt.Println("still bound after the detach")
		return 0
	}
	// Generous: the watcher reacts to the mount table's poll event at once,
	// or within its once-a-second look.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if bound() {
			fmt.Println("relaid")
			return 0
		}
	}
	fmt.Println("served by the daemon")
	return 0
}

// TestRootBindsRelay: a root's bind that goes away while the root stays is
// laid again from the pinned descriptor; the control (no watcher) shows
// that the entry otherwise stays on the daemon path.
func TestRootBindsRelay(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	requireKernelPath(t)
	for _, tc := range []struct{ action, want string }{{"relay", "relaid"}, {"relay-nowatch", "served by the daemon"}} {
		t.Run(tc.action, func(t *testing.T) {
			f := newFixture(t)
			out, code := runSandbox(t, sandboxRun{cfg: p1Config{Data: f.data, Spec: f.spec("mountinfo"), FUSE: true, Kernel: true, Action: tc.action}})
			if code != 0 || strings.TrimSpace(out) != tc.want {
				t.Fatalf("exit %d, output %q; want %q", code, out, tc.want)
			}
		})
	}
}
