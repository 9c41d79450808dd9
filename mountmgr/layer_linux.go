package mountmgr

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// hostUID is the uid that this process's effective uid is in the parent
// user namespace: the invoking user's in rootfs's own user namespace (P1
// without root), the effective uid itself elsewhere. P0 and P1 agree on
// it, so --dry-run names the layer the session uses.
func hostUID() int {
	euid := os.Geteuid()
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return euid
	}
	return mappedUID(string(b), euid)
}

// mappedUID is uid as the parent user namespace knows it, by uidMap (the
// text of /proc/PID/uid_map); uid itself when no line maps it.
func mappedUID(uidMap string, uid int) int {
	for _, line := range strings.Split(uidMap, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		in, err1 := strconv.ParseUint(f[0], 10, 32)
		out, err2 := strconv.ParseUint(f[1], 10, 32)
		n, err3 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if u := uint64(uid); u >= in && u < in+n {
			return int(out + u - in)
		}
	}
	return uid
}

// PrepareLayers makes on the host the layers that spec's overlay binds
// name (Bind.Layer; see the section on persistent layers in layer.go),
// locks each server's directory until release is called or this process
// ends, and replaces each Layer by its real path, which P2 opens refusing
// any symlink. It never fails: a layer it cannot make, or one that a
// running session holds, is dropped (Layer ""), so that the bind's
// writes go to the sandbox's /tmp, and a warning says that they vanish.
// A layer made now gets one line saying where the writes go and how to
// reset them; one above layerWarnSize, a warning. A nil log logs nothing.
//
// As root, for a user's HOME, the directories it makes are owned as the
// directory they are made in (the state directory's owner) and an upper
// layer as its cache, and no symlink is followed below the part of the
// state directory that exists; that part is refused when a symlink on
// the way is owned by someone other than root and the owner of where it
// leads (a user's ~/.local/state -> /etc).
func PrepareLayers(spec *Spec, log *zap.Logger) (release func()) {
	if log == nil {
		log = zap.NewNop()
	}
	type server struct {
		fd   int // -1: unusable
		real string
	}
	servers := map[string]*server{}
	release = func() {
		for _, s := range servers {
			if s.fd >= 0 {
				unix.Close(s.fd)
			}
		}
	}
	for i := range spec.Binds {
		b := &spec.Binds[i]
		if !b.Overlay || b.Layer == "" {
			continue
		}
		dir := LayerServerDir(b.Layer)
		s, ok := servers[dir]
		if !ok {
			s = &server{fd: -1}
			servers[dir] = s
			fd, real, err := openServerLayer(dir)
			if err == nil {
				err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
				if errors.Is(err, unix.EWOULDBLOCK) {
					unix.Close(fd)
					log.Warn("launcher cache: another session of this server keeps its writes; this session's writes vanish when it ends",
						zap.String("cache", b.Dest), zap.String("layer", dir))
					b.Layer = ""
					continue
				}
			}
			if err != nil {
				if fd >= 0 {
					unix.Close(fd)
				}
				log.Warn("launcher cache: cannot keep the server's writes; they vanish when the session ends",
					zap.String("cache", b.Dest), zap.String("layer", dir), zap.Error(err))
				b.Layer = ""
				continue
			}
			s.fd, s.real = fd, real
		}
		if s.fd < 0 {
			b.Layer = ""
			continue
		}
		real := filepath.Join(s.real, filepath.Base(b.Layer))
		made, err := makeLayer(s.fd, filepath.Base(b.Layer), b.Source)
		if err != nil {
			log.Warn("launcher cache: cannot keep the server's writes; they vanish when the session ends",
				zap.String("cache", b.Dest), zap.String("layer", real), zap.Error(err))
			b.Layer = ""
			continue
		}
		b.Layer = real
		if made {
			log.Info("launcher cache: the server's writes to it are kept for its next start",
				zap.String("cache", b.Dest), zap.String("writes", filepath.Join(real, "upper")), zap.String("reset", "rm -r "+s.real))
			continue
		}
		if n, more := treeSize(filepath.Join(real, "upper")); n > layerWarnSize {
			size := fmt.Sprintf("%d MiB", n>>20)
			if more {
				size = "more than " + size
			}
			log.Warn("launcher cache: the server's kept writes are large",
				zap.String("cache", b.Dest), zap.String("writes", filepath.Join(real, "upper")), zap.String("size", size), zap.String("reset", "rm -r "+s.real))
		}
	}
	return release
}

// openServerLayer opens the server directory dir (see PrepareLayers),
// making it and what is missing above it, and returns a descriptor to
// lock and its real path.
func openServerLayer(dir string) (fd int, real string, err error) {
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
	if real, err = filepath.EvalSymlinks(exist); err != nil {
		return -1, "", err
	}
	st, err := os.Stat(real)
	if err != nil {
		return -1, "", err
	}
	if err := checkLinkOwners(exist, st); err != nil {
		return -1, "", err
	}
	rel, err := filepath.Rel(exist, dir)
	if err != nil {
		return -1, "", err
	}
	dfd, err := openNoFollow(real)
	if err != nil {
		return -1, "", err
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "." || c == "" {
			continue
		}
		next, _, err := mkdirOpen(dfd, c, 0o700)
		unix.Close(dfd)
		if err != nil {
			return -1, "", &fs.PathError{Op: "mkdir", Path: filepath.Join(real, c), Err: err}
		}
		dfd, real = next, filepath.Join(real, c)
	}
	// A descriptor that flock accepts (not O_PATH), on the directory itself.
	fd, err = unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(dfd)
	if err != nil {
		return -1, "", &fs.PathError{Op: "open", Path: real, Err: err}
	}
	return fd, real, nil
}

// makeLayer makes the layer name in the server directory sfd, if it is
// missing: name/upper with the mode (and, as root, the owner) of the
// cache lower, since the overlay's root shows them, and name/work. It
// reports whether it made name.
func makeLayer(sfd int, name, lower string) (bool, error) {
	lfd, made, err := mkdirOpen(sfd, name, 0o700)
	if err != nil {
		return false, err
	}
	defer unix.Close(lfd)
	var lst unix.Stat_t
	if err := unix.Stat(lower, &lst); err != nil {
		return false, &fs.PathError{Op: "stat", Path: lower, Err: err}
	}
	ufd, umade, err := mkdirOpen(lfd, "upper", 0o700)
	if err != nil {
		return false, err
	}
	if umade {
		if os.Geteuid() == 0 {
			if err := unix.Fchownat(lfd, "upper", int(lst.Uid), int(lst.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
				unix.Close(ufd)
				return false, err
			}
		}
		err = unix.Fchmodat(lfd, "upper", lst.Mode&0o777, 0)
	}
	unix.Close(ufd)
	if err != nil {
		return false, err
	}
	wfd, _, err := mkdirOpen(lfd, "work", 0o700)
	if err != nil {
		return false, err
	}
	unix.Close(wfd)
	return made, nil
}

// openNoFollow opens dir (absolute, resolved) as O_PATH one component at
// a time, following no symlink.
func openNoFollow(dir string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, &fs.PathError{Op: "openat2", Path: dir, Err: err}
	}
	return fd, nil
}

// mkdirOpen opens the directory name in dfd without following a symlink,
// making it first if it is missing (mode perm; as root, owned as dfd is),
// and reports whether it made it.
func mkdirOpen(dfd int, name string, perm uint32) (int, bool, error) {
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

// checkLinkOwners refuses, as root, a state directory reached through a
// symlink owned by someone other than root and the owner of where it
// leads: root, running for a user's HOME, must not make directories (and
// keep a server's writes) wherever a user's link points.
func checkLinkOwners(path string, target fs.FileInfo) error {
	if os.Geteuid() != 0 {
		return nil
	}
	ts, ok := target.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	for p := path; ; p = filepath.Dir(p) {
		if st, err := os.Lstat(p); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			if ls, ok := st.Sys().(*syscall.Stat_t); ok && ls.Uid != 0 && ls.Uid != ts.Uid {
				return fmt.Errorf("%s: reached through the symlink %s (owner uid %d) but owned by uid %d; as root, rootfs keeps a server's writes only where the link's owner may write", path, p, ls.Uid, ts.Uid)
			}
		}
		if d := filepath.Dir(p); d == p {
			return nil
		}
	}
}

// treeSize adds up the sizes of the files below dir, without following
// symlinks, and reports whether it stopped early (treeSizeLimit entries).
func treeSize(dir string) (int64, bool) {
	var n int64
	entries := 0
	more := false
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if entries++; entries > treeSizeLimit {
			more = true
			return filepath.SkipAll
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, more
}

// treeSizeLimit bounds the entries treeSize looks at, so that a start
// never walks a huge layer for long.
const treeSizeLimit = 200000
