//go:build linux

package vfs

// The host watcher's view of the mount table: fanotify reports no mount or
// unmount, so the watcher follows /proc/self/mountinfo itself.

import (
	"errors"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/linux"
)

// watchMounts follows this mount namespace's mount table (poll on
// /proc/self/mountinfo): fanotify reports no mount or unmount, and one on
// the host at or below a root would otherwise leave the kernel's cache of
// what it covers (or uncovers) stale for the hour (within a second at the
// latest, see below). A root with a changed
// mount point at or below its host path has its whole cached subtree
// dropped (negative entries included); mounts elsewhere cost nothing.
// Under `rootfs run` this namespace is the daemon's, a slave of the host's
// (mountmgr), so a host mount shows here as it propagates in; it is also
// the namespace the view's descriptors resolve in, so what this table
// says is what lookups find.
func (w *hostWatch) watchMounts(f *os.File, known map[string]bool) {
	defer unix.Close(w.stopR)
	defer f.Close()
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}, {Fd: int32(w.stopR), Events: unix.POLLIN}}
	for {
		// The kernel wakes pollers of mountinfo on most changes but not
		// on every one (a lazy unmount was seen to raise none), so the
		// table is also compared once a second.
		_, err := unix.Poll(fds, 1000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || fds[1].Revents != 0 {
			return
		}
		now := mountPoints(f)
		var changed []string
		for mp := range now {
			if !known[mp] {
				changed = append(changed, mp)
			}
		}
		for mp := range known {
			if !now[mp] {
				changed = append(changed, mp)
			}
		}
		known = now
		if !control.On(control.NoHostEvents) && w.v.serving() {
			w.remounted(changed)
		}
	}
}

// mountPoints reads the mount points of a mountinfo file from its start.
func mountPoints(f *os.File) map[string]bool {
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<30))
	out := map[string]bool{}
	if err != nil {
		return out
	}
	for _, mp := range linux.MountPoints(data) {
		out[mp] = true
	}
	return out
}

// remounted drops the kernel's cache of what each changed mount point at
// or below a root covers: the dentry of the mount point's path in the view
// (or of the deepest directory of it the view knows), with everything
// below it. Invalidating only the entry would not do: a directory dentry
// in use survives below its invalidated parent and comes back with it.
func (w *hostWatch) remounted(changed []string) {
	r := w.v.top()
	s := w.v.current()
	for _, name := range s.order {
		hp := strings.TrimSuffix(s.byName[name].entry.HostPath, "/")
		for _, mp := range changed {
			var rel string
			switch {
			case mp == hp || (hp == "" && mp == "/"):
			case strings.HasPrefix(mp, hp+"/"):
				rel = mp[len(hp)+1:]
			default:
				continue
			}
			w.gen.Add(1)
			parent, child := r, name
			if dir, base := splitKey(name); dir != "" {
				// The entry's synthetic directory, if the kernel knows it.
				for _, c := range strings.Split(dir, "/") {
					if parent = parent.GetChild(c); parent == nil {
						break
					}
				}
				if parent == nil {
					continue
				}
				child = base
			}
			for _, c := range strings.Split(rel, "/") {
				if c == "" {
					continue
				}
				next := parent.GetChild(child)
				if next == nil {
					break // nothing cached further down
				}
				parent, child = next, c
			}
			w.dropEntry(parent, child)
			w.log.Debug("a mount changed below a root: dropped the kernel's cache of it", zap.String("entry", name), zap.String("mountpoint", mp))
		}
	}
}
