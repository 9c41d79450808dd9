//go:build unix

package linux

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ForeignLink returns, as root, the first symlink on the way from path
// (absolute) up to / that is owned by someone other than root and the
// owner of target (the file path leads to), with both owners; "" when
// there is none, or when not root. A /home -> /data/home link root owns
// is root's own doing and does not count.
func ForeignLink(path string, target fs.FileInfo) (link string, linkUID, targetUID uint32) {
	if os.Geteuid() != 0 {
		return "", 0, 0
	}
	ts, ok := target.Sys().(*syscall.Stat_t)
	if !ok {
		return "", 0, 0
	}
	for p := path; ; p = filepath.Dir(p) {
		if st, err := os.Lstat(p); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			if ls, ok := st.Sys().(*syscall.Stat_t); ok && ls.Uid != 0 && ls.Uid != ts.Uid {
				return p, ls.Uid, ts.Uid
			}
		}
		if d := filepath.Dir(p); d == p {
			return "", 0, 0
		}
	}
}
