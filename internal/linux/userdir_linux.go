package linux

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// # Directories made for a user
//
// rootfs may run as root for a user's HOME ("sudo rootfs wrap", a
// system-wide install): what it makes in that user's state directory must
// neither follow a symlink the user planted (to /etc, say) nor leave
// root-owned directories behind. OpenMkdirAll and MkdirOwnedAt are that
// sequence, once.

// OpenMkdirAll opens dir, making what is missing of it: the part that
// exists is resolved once (its real path opened with open, after check has
// seen it and what it leads to), and below it every directory is opened
// without following a symlink and made, when missing, by MkdirOwnedAt with
// mode 0700. It returns an O_PATH descriptor of dir and its real path.
func OpenMkdirAll(dir string, open func(real string) (int, error), check func(exist string, st fs.FileInfo) error) (int, string, error) {
	exist := filepath.Clean(dir)
	for {
		if _, err := os.Lstat(exist); err == nil {
			break
		}
		up := filepath.Dir(exist)
		if up == exist {
			break
		}
		exist = up
	}
	real, err := filepath.EvalSymlinks(exist)
	if err != nil {
		return -1, "", err
	}
	st, err := os.Stat(real)
	if err != nil {
		return -1, "", err
	}
	if err := check(exist, st); err != nil {
		return -1, "", err
	}
	rel, err := filepath.Rel(exist, filepath.Clean(dir))
	if err != nil {
		return -1, "", err
	}
	dfd, err := open(real)
	if err != nil {
		return -1, "", err
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "." || c == "" {
			continue
		}
		next, _, err := MkdirOwnedAt(dfd, c, 0o700)
		unix.Close(dfd)
		if err != nil {
			return -1, "", &fs.PathError{Op: "mkdir", Path: filepath.Join(real, c), Err: err}
		}
		dfd, real = next, filepath.Join(real, c)
	}
	return dfd, real, nil
}

// MkdirOwnedAt opens the directory name in dfd without following a
// symlink (O_PATH), making it first if it is missing (mode perm; as root,
// owned as dfd is), and says whether it made it.
func MkdirOwnedAt(dfd int, name string, perm uint32) (int, bool, error) {
	err := unix.Mkdirat(dfd, name, perm)
	made := err == nil
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, false, err
	}
	if made && os.Geteuid() == 0 {
		var pst unix.Stat_t
		if err := unix.Fstat(dfd, &pst); err != nil {
			return -1, false, err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return -1, false, err
		}
		if st.Uid != pst.Uid || st.Gid != pst.Gid {
			if err := unix.Fchownat(dfd, name, int(pst.Uid), int(pst.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return -1, false, err
			}
		}
	}
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return -1, false, fmt.Errorf("%s: not a directory (a symlink?): %w", name, err)
	}
	return fd, made, err
}
