//go:build linux

package vfs

import (
	"fmt"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/rootset"
)

// Install is the one way roots reach the view: it builds a table from roots
// under the view's own rules (Options.TableOptions, with the view's own
// names added to Reserved), refuses the table whole if it holds the view's
// own mount point or anything inside the view (the view would look itself
// up and deadlock; see Mount), and swaps it in.
//
// The table is returned even on error, so that the caller can report what
// it holds and what it left out (Entries and Skipped stay readable): when
// it was refused it is closed and the view serves what it served before;
// when only the kernel invalidation failed (see swap) it is installed.
// Safe from any goroutine that is not a FUSE handler of this view.
func (v *View) Install(roots []rootset.Root) (*rootset.Table, error) {
	o := v.opts.TableOptions
	o.Reserved = append(slices.Clip(o.Reserved), v.reserved()...)
	t := rootset.BuildTable(roots, o)
	if self := v.self.Load(); self != nil {
		if err := self.check(t); err != nil {
			t.Close()
			return t, err
		}
	}
	return t, v.swap(t)
}

// mountSelf is where the view is mounted, identified before mounting: the
// mount point and every directory above it, and (read from mountinfo after
// mounting, so the mount itself is never touched) the view's own device.
type mountSelf struct {
	dir   string
	chain []fileID // dir first, then each directory above it (ancestry)
	dev   uint64   // 0 if unknown
}

func newMountSelf(dir string) (*mountSelf, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadMountpoint, dir, err)
	}
	chain, err := ancestry(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadMountpoint, abs, err)
	}
	return &mountSelf{dir: abs, chain: chain}, nil
}

// check refuses a table with an entry at or above the mount point, or on
// the view's own device.
func (m *mountSelf) check(t *rootset.Table) error {
	if m.dev != 0 {
		for _, e := range t.Entries() {
			if dev, _ := e.Ident(); dev == m.dev {
				return fmt.Errorf("%w: root %q is inside the view itself (%s); the view cannot contain itself", ErrBadMountpoint, e.HostPath, m.dir)
			}
		}
	}
	for _, e := range t.Entries() {
		dev, ino := e.Ident()
		for i, id := range m.chain {
			if id.dev == dev && id.ino == ino {
				if i == 0 {
					return fmt.Errorf("%w: %s is root %q itself; mount the view somewhere outside its roots", ErrBadMountpoint, m.dir, e.HostPath)
				}
				return fmt.Errorf("%w: %s is inside root %q, which would make the view serve itself and hang; mount it outside its roots", ErrBadMountpoint, m.dir, e.HostPath)
			}
		}
	}
	return nil
}

// checkMountpoint refuses dir when it is one of t's entries or lies inside
// one: the view mounted there would look itself up and deadlock. The
// directories are compared by device and inode numbers, never by path.
func checkMountpoint(t *rootset.Table, dir string) error {
	m, err := newMountSelf(dir)
	if err != nil {
		return err
	}
	m.dir = dir // messages name it as the caller did
	return m.check(t)
}

// fileID is a directory's identity: its device and inode numbers.
type fileID struct{ dev, ino uint64 }

// ancestry returns the identities of the directory dir and of every
// directory above it, nearest first (linux.WalkUp).
func ancestry(dir string) ([]fileID, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var chain []fileID
	_, err = linux.WalkUp(fd, func(dev, ino uint64) bool {
		chain = append(chain, fileID{dev, ino})
		return false
	})
	if err != nil {
		return nil, err
	}
	return chain, nil
}
