//go:build linux

package kpath

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/mountmgr/internal/spec"
	"github.com/rootfs-dev/rootfs/rootset"
)

// The kernel data path (issue 13, docs/kernel-data-path.md): the view
// decides which roots exist, and a bind mount of each root's pinned host
// directory or file over its entry lets the kernel serve everything below
// it, checked against the server's own credentials. P1 lays the binds on
// its own view mount, which it made shared before starting the sandbox;
// the sandbox's copy is a slave (P2 makes / a recursive slave), so every
// bind reaches it, and nothing the sandbox mounts comes back. Removal needs
// nothing from here: the view's FUSE_NOTIFY_DELETE of a removed entry
// detaches its bind in every namespace before Install returns.

// KernelPathSupported reports whether this kernel has what the kernel data
// path needs (mount_setattr with AT_RECURSIVE on a detached tree: Linux
// 5.12); the error says what is missing.
func KernelPathSupported() error {
	// An invalid descriptor: EBADF where the call exists, ENOSYS where not.
	err := unix.MountSetattr(-1, "", unix.AT_EMPTY_PATH, &unix.MountAttr{})
	if errors.Is(err, unix.ENOSYS) {
		return linux.ErrNoMountAPI
	}
	return nil
}

// RootBinds keeps one bind mount over each entry of a mounted view. Every
// change of the view's table goes through Update, which serialises it with
// the binds. The zero value is not usable; see NewRootBinds.
type RootBinds struct {
	v        View
	log      *zap.Logger
	readOnly bool
	dir      string

	mu        sync.Mutex // serialises table changes and binds
	dirFD     int        // O_PATH of the view's root, through the mount; -1 once closed
	failed    map[string]string
	noBind    bool     // only the roots below /tmp (--strict)
	nsFD      int      // the sandbox's mount namespace (Attach), or -1
	tmp       tmpState // tmproots_linux.go
	tmpKeep   []string
	tmpWarned map[string]string // first component -> the last warning about it

	wake [2]int // a pipe: Close writes to wake the watcher's poll
	done chan struct{}
}

// NewRootBinds makes the view's mount at dir shared (call it before StartServer,
// so the sandbox's copy becomes its slave), lays a bind over every entry
// of v, and follows the namespace's mount table to lay again a bind the
// kernel dropped. Close it before unmounting the view.
func NewRootBinds(dir string, v View, o RootBindsOptions) (*RootBinds, error) {
	if err := KernelPathSupported(); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	// Only this mount becomes shared: P1's / stays a slave of the host's,
	// so nothing reaches the host, and a new mount gets a new peer group.
	if err := linux.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return nil, fmt.Errorf("%w: kernel data path: %v", spec.ErrSetup, err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: kernel data path: open %s: %v", spec.ErrSetup, dir, err)
	}
	b := &RootBinds{v: v, log: log, readOnly: o.ReadOnly, dir: dir, dirFD: fd, failed: map[string]string{},
		noBind: o.NoRootBinds, nsFD: -1, tmp: tmpState{},
		wake: [2]int{-1, -1}, done: make(chan struct{})}
	if !o.NoWatch {
		if err := unix.Pipe2(b.wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("%w: kernel data path: %v", spec.ErrSetup, os.NewSyscallError("pipe2", err))
		}
	}
	b.mu.Lock()
	b.sync()
	b.mu.Unlock()
	if o.NoWatch {
		close(b.done)
	} else {
		go b.watch()
	}
	return b, nil
}

// Install is vfs.View.Install followed by the binds of the entries that
// have none (Update); the bridge installs roots through it.
func (b *RootBinds) Install(roots []rootset.Root) (*rootset.Table, error) {
	var t *rootset.Table
	err := b.Update(func() error {
		var err error
		t, err = b.v.Install(roots)
		return err
	})
	return t, err
}

// Table is the view's current table.
func (b *RootBinds) Table() *rootset.Table { return b.v.Table() }

// Update runs change (which installs a table in the view) and then lays the binds
// of the entries that have none, under the one lock that serialises both:
// a bind made from a stale table could land on a newer entry of the same
// name. Entries removed or re-pointed by change lost their binds in it.
func (b *RootBinds) Update(change func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := change()
	b.sync() // also after an error: the table may be installed (see vfs.View.Install)
	return err
}

// Sync lays the missing binds now (the watcher does it too).
func (b *RootBinds) Sync() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sync()
}

// sync binds every current entry that does not show its pinned host inode
// through the view. The entry is FUSE-served until then (the same host
// tree through the daemon), so a failure costs speed, not correctness; it
// is logged once per entry and message.
func (b *RootBinds) sync() {
	if b.dirFD < 0 {
		return
	}
	defer b.syncTmp()
	if b.noBind {
		return
	}
	seen := map[string]bool{}
	for _, e := range b.v.Entries() {
		seen[e.ViewPath] = true
		if b.bound(e) {
			continue
		}
		err := b.bind(e)
		if err == nil && !b.bound(e) {
			err = errors.New("the entry does not show the pinned host inode after the bind")
		}
		if err != nil {
			msg := err.Error()
			if b.failed[e.ViewPath] != msg {
				b.failed[e.ViewPath] = msg
				b.log.Warn("kernel data path: root stays served by the daemon", zap.String("entry", e.InView()), zap.String("host", e.HostPath), zap.Error(err))
			}
			continue
		}
		delete(b.failed, e.ViewPath)
		b.log.Debug("kernel data path: root bound", zap.String("entry", e.InView()), zap.String("host", e.HostPath))
	}
	for name := range b.failed {
		if !seen[name] {
			delete(b.failed, name)
		}
	}
}

// bound reports whether the view's entry shows e's pinned host inode,
// i.e. its bind is in place (the FUSE-served entry has the view's device).
func (b *RootBinds) bound(e *rootset.Entry) bool {
	var st unix.Stat_t
	if err := unix.Fstatat(b.dirFD, e.ViewPath, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false
	}
	dev, ino := e.Ident()
	return st.Dev == dev && st.Ino == ino
}

// bind lays e's bind: a recursive clone of its pinned descriptor (mounts
// below the root come along; in a user namespace a non-recursive clone of
// a tree with locked mounts is refused anyway), made nosuid,nodev (and
// read-only) while still detached, then attached on the entry, which is
// resolved through the view by this goroutine, never by a FUSE handler.
func (b *RootBinds) bind(e *rootset.Entry) error {
	attr := linux.MountAttr{Set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if b.readOnly {
		attr.Set |= unix.MOUNT_ATTR_RDONLY
	}
	return linux.BindDescriptor(e.FD(), b.dirFD, e.ViewPath, linux.BindOptions{Recursive: true, Attr: attr})
}

// watch lays again the binds the kernel dropped. The doc lists how one can
// be (the view avoids those it could cause); each drop is a change of this
// namespace's mount table, which poll reports, but a lazy detach was seen
// to raise no event, so it also looks once a second.
func (b *RootBinds) watch() {
	defer close(b.done)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		b.log.Debug("kernel data path: mount table not followed", zap.Error(err))
	}
	if f != nil {
		defer f.Close()
	}
	buf := make([]byte, 64<<10)
	for {
		if f != nil {
			// Reading to the end re-arms the poll event.
			_, _ = f.Seek(0, 0)
			for {
				if n, err := f.Read(buf); n == 0 || err != nil {
					break
				}
			}
			fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}, {Fd: int32(b.wake[0]), Events: unix.POLLIN}}
			_, _ = unix.Poll(fds, 1000)
		} else {
			fds := []unix.PollFd{{Fd: int32(b.wake[0]), Events: unix.POLLIN}}
			_, _ = unix.Poll(fds, 1000)
		}
		b.mu.Lock()
		stopped := b.dirFD < 0
		b.sync()
		b.mu.Unlock()
		if stopped {
			return
		}
	}
}

// Close stops following the mount table and detaches the binds (lazily;
// the view can then be unmounted without EBUSY). Call it when the sandbox
// is gone, before unmounting the view.
func (b *RootBinds) Close() {
	b.mu.Lock()
	if b.dirFD >= 0 {
		for _, e := range b.v.Entries() {
			if b.bound(e) {
				_ = unix.Unmount(b.dir+"/"+e.ViewPath, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
			}
		}
		unix.Close(b.dirFD)
		b.dirFD = -1
		if b.nsFD >= 0 {
			unix.Close(b.nsFD)
			b.nsFD = -1
		}
		for x, m := range b.tmp {
			if m.tree >= 0 {
				unix.Close(m.tree)
			}
			delete(b.tmp, x)
		}
		if b.wake[1] >= 0 {
			_, _ = unix.Write(b.wake[1], []byte{0})
		}
	}
	b.mu.Unlock()
	<-b.done
	for i, fd := range b.wake {
		if fd >= 0 {
			unix.Close(fd)
			b.wake[i] = -1
		}
	}
}
