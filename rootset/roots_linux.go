//go:build linux

package rootset

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
)

func closeFD(fd int) error { return unix.Close(fd) }

func dupFD(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) }

// pinPath opens p (following symlinks) as O_PATH and identifies it.
func pinPath(p string) (int, fileID, bool, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fileID{}, false, describe("open", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fileID{}, false, describe("stat", p, err)
	}
	return fd, fileID{st.Dev, st.Ino}, st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// maxLinks bounds the symlinks one resolution follows, as the kernel does
// (ELOOP past 40).
const maxLinks = 40

// resolve opens p, following the symlinks it meets except those that lie in a
// directory matched by taint (at or beneath a directory the sandboxed side can
// write, or could earlier: see [WriteSet]), pins it as O_PATH and records
// what it is. Only directories and regular files can be roots.
//
// A path without symlinks is opened in one openat2 with RESOLVE_NO_SYMLINKS
// (nothing the server planted can be on it). Any other path is walked one
// component at a time with O_NOFOLLOW: a symlink is read and followed only
// when the directory that holds it is outside every tainted tree, decided by
// device and inode numbers walking "..", never by path strings. Inside such a
// tree only real directories are crossed, so the result is either reached
// through host-made components only or lies inside that tree, which the
// server could already reach.
func resolve(p string, taint func(dev, ino uint64) bool) (*Entry, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOSYS) {
		fd, err = walk(p, taint)
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) || errors.Is(err, ErrBadRoot) || errors.Is(err, ErrWritableSymlink) {
			return nil, err
		}
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
	// would lead anywhere.
	if linux.OnKernelFS(fd) {
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

// walk resolves the absolute path p one component at a time (see resolve)
// and returns an O_PATH descriptor of what it names.
func walk(p string, taint func(dev, ino uint64) bool) (int, error) {
	cur, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer func() { unix.Close(cur) }()
	rest := strings.Split(p, "/")
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		more := false
		for _, r := range rest {
			if r != "" && r != "." {
				more = true
				break
			}
		}
		if name == ".." {
			up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return -1, describe("open", p, err)
			}
			unix.Close(cur)
			cur = up
			continue
		}
		// O_DIRECTORY on a component that must be a directory lets an
		// automount trigger there, as a path walk would; a symlink answers
		// ENOTDIR and is opened again as itself.
		flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
		next, err := -1, error(unix.ENOTDIR)
		if more {
			next, err = unix.Openat(cur, name, flags|unix.O_DIRECTORY, 0)
		}
		if errors.Is(err, unix.ENOTDIR) {
			next, err = unix.Openat(cur, name, flags, 0)
		}
		if err != nil {
			return -1, describe("open", p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return -1, describe("stat", p, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := linkTarget(next, p, cur, name, taint)
			unix.Close(next)
			if err != nil {
				return -1, err
			}
			if links++; links > maxLinks {
				return -1, fmt.Errorf("%w: %s goes through too many symlinks", ErrBadRoot, p)
			}
			if strings.HasPrefix(target, "/") {
				root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					return -1, err
				}
				unix.Close(cur)
				cur = root
			}
			rest = append(strings.Split(target, "/"), rest...)
			continue
		case unix.S_IFDIR:
		default:
			if more {
				unix.Close(next)
				return -1, describe("open", p, unix.ENOTDIR)
			}
		}
		unix.Close(cur)
		cur = next
	}
	out := cur
	cur = -1
	return out, nil
}

// linkTarget reads the symlink held by fd, found as name in the directory
// cur while resolving p, after checking that the server cannot have made it.
func linkTarget(fd int, p string, cur int, name string, taint func(dev, ino uint64) bool) (string, error) {
	// Symlinks on kernel file systems lead to magic links (/proc/self/root,
	// /dev/fd -> /proc/self/fd): they name whatever the daemon holds.
	if linux.OnKernelFS(cur) {
		return "", fmt.Errorf("%w: %s goes through a /proc magic link or a kernel file system's symlink", ErrBadRoot, p)
	}
	if taint != nil {
		in, err := within(cur, taint)
		if err != nil {
			return "", describe("check", p, err)
		}
		if in {
			where, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(cur))
			return "", fmt.Errorf("%w: %q in %s, which the server can write or could earlier in this session; give the real path instead", ErrWritableSymlink, name, where)
		}
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", describe("readlink", p, err)
	}
	if n == 0 || n >= len(buf) {
		return "", describe("readlink", p, unix.ENOENT)
	}
	return string(buf[:n]), nil
}

// within reports whether the directory dir, or any directory above it, is
// matched by match (linux.WalkUp).
func within(dir int, match func(dev, ino uint64) bool) (bool, error) {
	return linux.WalkUp(dir, match)
}

type allowDir struct {
	path     string
	dev, ino uint64
	fd       int
}

// openAllowed pins the --allow directories. They are resolved again for
// every table, like roots, and never through a symlink in a directory the
// server can write (taint): such a directory is dropped (and named in
// dropped) while the restriction stays on, so a planted link cannot widen
// what --allow admits.
func openAllowed(paths []string, taint func(dev, ino uint64) bool) (out []allowDir, dropped []string, err error) {
	for _, p := range paths {
		clean, err := ParseRoot(p)
		if err != nil {
			closeAll(out)
			return nil, nil, fmt.Errorf("--allow: %w", err)
		}
		fd, err := unix.Openat2(unix.AT_FDCWD, clean, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOSYS) {
			fd, err = walk(clean, taint)
		}
		if errors.Is(err, ErrWritableSymlink) {
			dropped = append(dropped, fmt.Sprintf("--allow %s left out: %v", p, err))
			continue
		}
		if err != nil {
			closeAll(out)
			var pe *fs.PathError
			if !errors.As(err, &pe) && !errors.Is(err, ErrBadRoot) {
				err = describe("open", clean, err)
			}
			return nil, nil, fmt.Errorf("--allow %s: %w", p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			closeAll(out)
			return nil, nil, fmt.Errorf("--allow %s: %w", p, describe("stat", clean, err))
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(fd)
			closeAll(out)
			return nil, nil, fmt.Errorf("--allow %s: %w", p, describe("open", clean, unix.ENOTDIR))
		}
		out = append(out, allowDir{path: clean, dev: st.Dev, ino: st.Ino, fd: fd})
	}
	return out, dropped, nil
}

func closeAll(ds []allowDir) {
	for _, d := range ds {
		unix.Close(d.fd)
	}
}

// beneathAny reports whether e is one of the allowed directories or lies
// beneath one (by identity, see within).
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
	var dir int
	var err error
	if e.IsDir {
		dir, err = unix.Openat(e.fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	} else {
		dir, err = fileParent(e)
	}
	if err != nil {
		return false, err
	}
	defer unix.Close(dir)
	return within(dir, match)
}

// fileParent opens the directory that holds the single-file root e and
// checks, by inode, that it really holds the pinned file: the host could
// have moved the file since it was pinned.
func fileParent(e *Entry) (int, error) {
	dir, base := parentOf(e.HostPath), e.HostPath[len(parentOf(e.HostPath)):]
	base = strings.TrimPrefix(base, "/")
	// HostPath was read back from the pinned descriptor, so it holds no
	// symlink; one found now was put there since, maybe by the server.
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1, fmt.Errorf("%s moved while it was being checked; try again", e.HostPath)
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
