package clientconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
)

// openDir opens dir, which Plan resolved (it holds no symlink), one
// component at a time without following a symlink. As root ("sudo rootfs
// wrap") the file is a user's, in directories the user can change: a
// directory swapped for a symlink between Plan and Write would otherwise
// have root create the backup and the new file, owned by the user, in
// whatever directory the link names (/etc/cron.d, /root/.ssh).
func openDir(dir string) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(filepath.Clean(dir), "/") {
		if c == "" {
			continue
		}
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return -1, fmt.Errorf("%s: %w", dir, ErrChanged)
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		fd = next
	}
	return fd, nil
}

// readFile reads name (resolved by Plan) without following a symlink on
// the way.
func readFile(name string) ([]byte, error) {
	dfd, err := openDir(filepath.Dir(name))
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, filepath.Base(name), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > MaxFileSize {
		return nil, ErrChanged
	}
	b := make([]byte, st.Size()+1)
	n, err := f.ReadAt(b, 0)
	if n > int(st.Size()) {
		return nil, ErrChanged
	}
	if err != nil && n != int(st.Size()) {
		return nil, err
	}
	return b[:n], nil
}

// writeAtomic writes data to a new file in name's directory, held open
// (see openDir), with st's permissions and (as root) owner, and renames it
// over name.
func writeAtomic(name string, data []byte, st fs.FileInfo) error {
	dir, base := filepath.Split(name)
	dfd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return writeAtomicAt(dfd, dir, base, data, st)
}

// writeBackup writes data at BackupPath(dir, file) as writeAtomic does,
// making the directories on the way. The part of dir that exists is
// resolved once (a state directory behind /home -> /data/home is fine)
// but, as root, refused when a user's symlink leads somewhere that user
// does not own; below it every directory is opened without following a
// symlink and made, when missing, with mode 0700 and the owner of the
// directory it is made in, so that "sudo rootfs wrap" with a user's HOME
// neither follows a link the user planted to /etc nor leaves root-owned
// directories in the user's state directory.
func writeBackup(dir, file string, data []byte, st fs.FileInfo) error {
	name := BackupPath(dir, file)
	dfd, at, err := linux.OpenMkdirAll(filepath.Dir(name), openDir, checkLinkOwners)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return writeAtomicAt(dfd, at, filepath.Base(name), data, st)
}

// writeAtomicAt is writeAtomic in the directory dfd (named dir in errors).
func writeAtomicAt(dfd int, dir, base string, data []byte, st fs.FileInfo) error {
	var err error
	var fd int
	var tmp string
	for range 100 {
		tmp = "." + base + ".tmp" + strconv.FormatUint(rand.Uint64(), 36)
		fd, err = unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		return &fs.PathError{Op: "create", Path: filepath.Join(dir, tmp), Err: err}
	}
	renamed := false
	defer func() {
		if !renamed {
			unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	if err := fill(f, data, st); err != nil {
		return err
	}
	if err := unix.Renameat(dfd, tmp, dfd, base); err != nil {
		return &fs.PathError{Op: "rename", Path: filepath.Join(dir, base), Err: err}
	}
	renamed = true
	return nil
}
