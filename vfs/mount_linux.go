//go:build linux

package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/rootset"
)

// MountOptions configure View.Mount. The zero value mounts for the calling
// user only.
type MountOptions struct {
	// AllowOther lets users other than the daemon's use the mount (the
	// kernel still checks mode bits: the view mounts with
	// default_permissions).
	AllowOther bool
	// Debug logs every FUSE request (slow).
	Debug bool
}

// Mount is a mounted view. Unmount it exactly once (further calls return
// the first result).
type Mount struct {
	dir string
	dev uint64 // the mount's device number (0: unknown)
	srv *fuse.Server
	log *zap.Logger

	unmountOnce sync.Once
	unmountErr  error
}

// CheckMountpoint refuses a mount point that does not exist, is not a
// directory, or is at or inside one of t's roots (the view would then
// look itself up and deadlock). A stale FUSE mount left by a dead daemon
// (ENOTCONN) is detached first.
func CheckMountpoint(dir string, t *rootset.Table, log *zap.Logger) error {
	if log == nil {
		log = zap.NewNop()
	}
	if dir == "" {
		return fmt.Errorf("%w: no mount point given", ErrBadMountpoint)
	}
	// statfs always reaches a FUSE daemon (stat may be answered from the
	// kernel's attribute cache), so it is what tells a dead mount.
	var sfs unix.Statfs_t
	for range 8 { // dead mounts can be stacked
		if err := unix.Statfs(dir, &sfs); !errors.Is(err, syscall.ENOTCONN) {
			break
		}
		log.Warn("detaching a stale fuse mount", zap.String("mountpoint", dir))
		if uerr := unix.Unmount(dir, unix.MNT_DETACH); uerr != nil {
			return fmt.Errorf("%w: %s is a dead FUSE mount and could not be detached (%v); run: fusermount3 -uz %s", ErrBadMountpoint, dir, uerr, dir)
		}
	}
	var st unix.Stat_t
	err := unix.Stat(dir, &st)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%w: %s does not exist; create it with: mkdir -p %s", ErrBadMountpoint, dir, dir)
	case err != nil:
		return fmt.Errorf("%w: %s: %v", ErrBadMountpoint, dir, err)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%w: %s is not a directory", ErrBadMountpoint, dir)
	}
	if _, fstype, ok := topMount(dir); ok && fstype == "fuse.rootfs" {
		return fmt.Errorf("%w: a rootfs view is already mounted at %s; unmount it first (fusermount3 -u %s)", ErrBadMountpoint, dir, dir)
	}
	return checkMountpoint(t, dir)
}

// Mount checks dir against the view's current table (CheckMountpoint),
// mounts the view there and returns once the kernel has answered INIT
// (go-fuse WaitMount), so the mount is usable. The server runs until
// Unmount. From then on Install refuses a table that holds the mount. A
// View can be mounted once.
//
// The view mounts itself, as go-fuse's fs.Mount mounts a tree: its go-fuse
// options (caching per Options.CacheTimeout, 1 MiB writes, the writeback
// cache with Options.Writeback, CAP_HANDLE_KILLPRIV_V2, POSIX and flock locks
// forwarded to the host unless Options.ReadOnly, default_permissions,
// passthrough only with Options.Passthrough) are its own.
func (v *View) Mount(dir string, opts MountOptions) (*Mount, error) {
	log := v.log
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadMountpoint, dir, err)
	}
	if err := CheckMountpoint(abs, v.Table(), log); err != nil {
		return nil, err
	}
	o := v.fuseOptions()
	o.AllowOther = opts.AllowOther
	o.Debug = opts.Debug
	o.DirectMount = os.Geteuid() == 0 // falls back to fusermount3
	srv, err := v.serve(abs, o)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", abs, err)
	}
	m := &Mount{dir: abs, srv: srv, log: log}
	if self := v.self.Load(); self != nil {
		m.dev = self.dev
	}
	if srv.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		log.Debug("fuse passthrough not available; file i/o is served by the daemon", zap.String("mountpoint", abs))
	}
	log.Debug("mounted", zap.String("mountpoint", abs))
	return m, nil
}

// Dir is the absolute mount point.
func (m *Mount) Dir() string { return m.dir }

// Wait blocks until the server stops serving (after Unmount, or after an
// external unmount once the last open file is closed).
func (m *Mount) Wait() { m.srv.Wait() }

// Mounted reports whether the mount point still holds this mount, from
// /proc/self/mountinfo (the mount itself is never touched, so a dead mount
// cannot hang the call). After Wait returns it tells how serving ended:
// false when the mount was removed (Unmount, fusermount3 -u, umount -l from
// outside), true when it is still there but no longer served (the
// connection was aborted through /sys/fs/fuse/connections), which leaves a
// dead mount for Unmount to detach.
func (m *Mount) Mounted() bool {
	dev, fstype, ok := topMount(m.dir)
	return ok && strings.HasPrefix(fstype, "fuse") && (m.dev == 0 || dev == m.dev)
}

// Unmount unmounts once; later calls return the first result. A mount that
// someone else already removed is not an error. When the mount is busy
// (open files, a cwd inside), it is detached lazily (MNT_DETACH): it
// disappears from the namespace now and the server stops when the last
// user is gone.
func (m *Mount) Unmount() error {
	m.unmountOnce.Do(func() {
		err := m.srv.Unmount()
		if err == nil {
			m.log.Debug("unmounted", zap.String("mountpoint", m.dir))
			return
		}
		derr := unix.Unmount(m.dir, unix.MNT_DETACH)
		switch {
		case derr == nil:
			m.log.Info("mount busy; detached it lazily", zap.String("mountpoint", m.dir), zap.Error(err))
		case errors.Is(derr, syscall.EINVAL) || errors.Is(derr, syscall.ENOENT):
			// Not mounted any more: someone unmounted it already.
		default:
			m.unmountErr = fmt.Errorf("unmount %s: %v (detach: %v); run: fusermount3 -uz %s", m.dir, err, derr, m.dir)
		}
	})
	return m.unmountErr
}

// topMount reads /proc/self/mountinfo (never the mount itself) for the
// topmost mount at dir: its device number and file system type, and whether
// dir is a mount point of this mount namespace at all.
func topMount(dir string) (dev uint64, fstype string, ok bool) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, "", false
	}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 7 || linux.UnescapeMountinfo(f[4]) != dir {
			continue
		}
		// The last (topmost) mount wins.
		ok, dev, fstype = true, 0, ""
		var maj, min uint32
		if _, err := fmt.Sscanf(f[2], "%d:%d", &maj, &min); err == nil {
			dev = unix.Mkdev(maj, min)
		}
		for i := 6; i < len(f); i++ {
			if f[i] == "-" && i+1 < len(f) {
				fstype = f[i+1]
				break
			}
		}
	}
	return dev, fstype, ok
}
