//go:build unix

package clientconfig

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/rootfs-dev/rootfs/internal/linux"
)

// keepOwner gives f the owner and group of the file st describes, when this
// process may (as root): "sudo rootfs wrap" must not leave a user's config
// owned by root, which the client could then no longer rewrite.
func keepOwner(f *os.File, st fs.FileInfo) error {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	return f.Chown(int(s.Uid), int(s.Gid))
}

// checkLinkOwners refuses, as root, a configuration reached through a
// symlink whose owner does not own the file it leads to: "sudo rootfs wrap"
// follows a user's ~/.cursor -> /etc/x, and must not rewrite (and back up
// beside) a file that user could not write. Every symlink met on the way
// from path (absolute) to its target counts, in the last component or in a
// directory above it, except links root owns (a /home -> /data/home layout
// is root's own doing).
func checkLinkOwners(path string, target fs.FileInfo) error {
	if link, luid, tuid := linux.ForeignLink(path, target); link != "" {
		return fmt.Errorf("%s: reached through the symlink %s (owner uid %d) but owned by uid %d; as root, rootfs wrap rewrites only files the link's owner owns (run it as that user, or give the real path)", path, link, luid, tuid)
	}
	return nil
}
