package mountmgr

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
)

// layerWarnSize is the size of a layer above which each start warns: the
// default size cap of the sandbox's /tmp, which bounded the writes before
// they were kept.
const layerWarnSize = 256 << 20

// PrepareLayers makes on the host the layers that spec's overlay binds
// name (Bind.Layer; see the section on persistent layers in
// internal/spec/layer.go),
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
	var unmade []int // binds whose missing cache could not be made
	defer func() { spec.Binds = dropBinds(spec.Binds, unmade) }()
	for i := range spec.Binds {
		b := &spec.Binds[i]
		if !b.Overlay || b.Layer == "" {
			continue
		}
		if _, err := os.Lstat(b.Source); err != nil {
			// A launcher cache that does not exist yet (auto-bind keeps
			// it only with a layer): made empty, owned as where it is
			// made, so that the server's downloads are kept.
			fd, _, err := linux.OpenMkdirAll(b.Source, openNoFollow, checkLinkOwners)
			if err != nil {
				log.Warn("launcher cache: cannot make it; the launcher downloads into the sandbox's /tmp at each start",
					zap.String("cache", b.Source), zap.Error(err))
				unmade = append(unmade, i)
				continue
			}
			unix.Close(fd)
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

// dropBinds returns binds without the ones at the indices drop (ascending).
func dropBinds(binds []Bind, drop []int) []Bind {
	if len(drop) == 0 {
		return binds
	}
	out := binds[:0:0]
	for i, b := range binds {
		if len(drop) > 0 && drop[0] == i {
			drop = drop[1:]
			continue
		}
		out = append(out, b)
	}
	return out
}

// openServerLayer opens the server directory dir (see PrepareLayers),
// making it and what is missing above it, and returns a descriptor to
// lock and its real path.
func openServerLayer(dir string) (fd int, real string, err error) {
	dfd, real, err := linux.OpenMkdirAll(dir, openNoFollow, checkLinkOwners)
	if err != nil {
		return -1, "", err
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
	lfd, made, err := linux.MkdirOwnedAt(sfd, name, 0o700)
	if err != nil {
		return false, err
	}
	defer unix.Close(lfd)
	var lst unix.Stat_t
	if err := unix.Stat(lower, &lst); err != nil {
		return false, &fs.PathError{Op: "stat", Path: lower, Err: err}
	}
	ufd, umade, err := linux.MkdirOwnedAt(lfd, "upper", 0o700)
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
	wfd, _, err := linux.MkdirOwnedAt(lfd, "work", 0o700)
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

// checkLinkOwners refuses, as root, a state directory reached through a
// symlink owned by someone other than root and the owner of where it
// leads: root, running for a user's HOME, must not make directories (and
// keep a server's writes) wherever a user's link points.
func checkLinkOwners(path string, target fs.FileInfo) error {
	if link, luid, tuid := linux.ForeignLink(path, target); link != "" {
		return fmt.Errorf("%s: reached through the symlink %s (owner uid %d) but owned by uid %d; as root, rootfs keeps a server's writes only where the link's owner may write", path, link, luid, tuid)
	}
	return nil
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
