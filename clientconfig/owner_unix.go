//go:build unix

package clientconfig

import (
	"io/fs"
	"os"
	"syscall"
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
