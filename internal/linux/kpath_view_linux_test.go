//go:build linux

package linux_test

// TestMain lives here, in the external test package, so that the kernel
// path harness can serve the project's own vfs.View (which imports
// internal/linux) as well as its synthetic top level.

import (
	"os"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/vfs"
)

func TestMain(m *testing.M) {
	linux.KpathView = serveView
	os.Exit(linux.KpathMain(m))
}

// serveView is a View with no host watcher and no kernel caching of
// entries (every path walk revalidates the top-level entry), read-write.
func serveView() (fs.InodeEmbedder, *fs.Options, func([]string) error) {
	v := vfs.NewView(vfs.Options{NoHostWatch: true, CacheTimeout: -1})
	swap := func(paths []string) error {
		var roots []vfs.Root
		for _, p := range paths {
			roots = append(roots, vfs.Root{URI: p})
		}
		return v.Swap(vfs.BuildTable(roots, vfs.TableOptions{Reserved: v.Reserved()}))
	}
	return v.FUSERoot(), v.MountOptions(), swap
}
