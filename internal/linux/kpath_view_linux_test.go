//go:build linux

package linux_test

// TestMain lives here, in the external test package, so that the kernel
// path harness can serve the project's own vfs.View (which imports
// internal/linux) as well as its synthetic top level.

import (
	"os"
	"testing"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/internal/testutil"
	"github.com/rootfs-dev/rootfs/vfs"
)

func TestMain(m *testing.M) {
	linux.KpathView = serveView
	code := linux.KpathMain(m)
	testutil.RemoveControlTestBinary()
	os.Exit(code)
}

// serveView mounts a View with no host watcher and no kernel caching of
// entries (every path walk revalidates the top-level entry), read-write.
func serveView(mnt string) (func() error, func([]string) error, error) {
	v := vfs.NewView(vfs.Options{NoHostWatch: true, CacheTimeout: -1})
	m, err := v.Mount(mnt, vfs.MountOptions{AllowOther: true})
	if err != nil {
		return nil, nil, err
	}
	swap := func(paths []string) error {
		var roots []vfs.Root
		for _, p := range paths {
			roots = append(roots, vfs.Root{URI: p})
		}
		_, err := v.Install(roots)
		return err
	}
	return m.Unmount, swap, nil
}
