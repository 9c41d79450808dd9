//go:build linux

package vfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func closeFD(fd int) error { return unix.Close(fd) }

// resolve opens p (following symlinks), pins it as O_PATH and records what it
// is. Only directories and regular files can be roots.
func resolve(p string) (*Entry, error) {
	// Symlinks are followed, magic links (/proc/self/root, /dev/fd/N) are
	// not: they name whatever the daemon's own process happens to hold.
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%w: %s goes through a /proc magic link or too many symlinks", ErrBadRoot, p)
	}
	if err != nil {
		return nil, describe("open", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, describe("stat", p, err)
	}
	kind := st.Mode & unix.S_IFMT
	if kind != unix.S_IFDIR && kind != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s is neither a directory nor a regular file", ErrBadRoot, p)
	}
	// Kernel interfaces (/proc, /sys, ...) are not data: their magic links
	// would lead anywhere (security battery D10, D13).
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil || deniedFS[int64(sfs.Type)] {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s is on a kernel file system (proc, sys, ...), not a folder of files", ErrBadRoot, p)
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		unix.Close(fd)
		return nil, describe("resolve", p, err)
	}
	return &Entry{
		HostPath: real,
		IsDir:    kind == unix.S_IFDIR,
		fd:       fd,
		dev:      st.Dev,
		ino:      st.Ino,
		mode:     st.Mode,
	}, nil
}

type allowDir struct {
	path     string
	dev, ino uint64
	fd       int
}

func openAllowed(paths []string) ([]allowDir, error) {
	var out []allowDir
	for _, p := range paths {
		clean, err := ParseRoot(p)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("--allow: %w", err)
		}
		fd, err := unix.Open(clean, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("--allow %s: %w", p, describe("open", clean, err))
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			closeAll(out)
			return nil, fmt.Errorf("--allow %s: %w", p, describe("stat", clean, err))
		}
		out = append(out, allowDir{path: clean, dev: st.Dev, ino: st.Ino, fd: fd})
	}
	return out, nil
}

func closeAll(ds []allowDir) {
	for _, d := range ds {
		unix.Close(d.fd)
	}
}

// beneathAny reports whether e is one of the allowed directories or lies
// beneath one. It walks up from the pinned inode through "..", comparing
// device and inode numbers, so no path string decides containment and a
// symlink or rename cannot fool it.
func beneathAny(e *Entry, allow []allowDir) (bool, error) {
	match := func(dev, ino uint64) bool {
		for _, a := range allow {
			if a.dev == dev && a.ino == ino {
				return true
			}
		}
		return false
	}
	if match(e.dev, e.ino) {
		return true, nil
	}
	var cur int
	var err error
	if e.IsDir {
		cur, err = unix.Openat(e.fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	} else {
		cur, err = fileParent(e)
	}
	if err != nil {
		return false, err
	}
	defer func() { unix.Close(cur) }()
	for depth := 0; depth < 4096; depth++ {
		var st unix.Stat_t
		if err := unix.Fstat(cur, &st); err != nil {
			return false, err
		}
		if match(st.Dev, st.Ino) {
			return true, nil
		}
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, err
		}
		var ust unix.Stat_t
		if err := unix.Fstat(up, &ust); err != nil {
			unix.Close(up)
			return false, err
		}
		if ust.Dev == st.Dev && ust.Ino == st.Ino { // reached "/"
			unix.Close(up)
			return false, nil
		}
		unix.Close(cur)
		cur = up
	}
	return false, fmt.Errorf("directory tree deeper than 4096 levels")
}

// fileParent opens the directory that holds the single-file root e and
// checks, by inode, that it really holds the pinned file: the host could
// have moved the file since it was pinned.
func fileParent(e *Entry) (int, error) {
	dir, base := parentOf(e.HostPath), e.HostPath[len(parentOf(e.HostPath)):]
	base = strings.TrimPrefix(base, "/")
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Dev != e.dev || st.Ino != e.ino {
		unix.Close(fd)
		return -1, fmt.Errorf("%s moved while it was being checked; try again", e.HostPath)
	}
	return fd, nil
}

func parentOf(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}
