//go:build linux

package kpath

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/mountmgr/internal/spec"
)

// Roots below /tmp in host layout (issue 14). The sandbox's /tmp is its
// own tmpfs, mounted over the view's tmp placeholder, so the roots the
// view shows below tmp would be hidden. For each first component X of
// such roots, a recursive clone of the view's synthetic directory tmp/X
// is mounted on /tmp/X inside that tmpfs, as a slave of the view: the
// roots below X then come and go with the view's swaps, in one step, and
// their binds (the kernel data path) reach it by propagation. A new X is
// one more mount, made after the swap; an X left without roots shows an
// empty directory until its mount is removed right after. P2 mounts the
// components of the static roots before the server starts (its mount plan,
// with CloneTmpRoot and AttachTmpRoot),
// P1 the later ones (RootBinds.Attach) from a thread in the sandbox's
// mount namespace.

// CloneTmpRoot returns a detached recursive clone of the view's tmp/x
// (viewFD: the view's root), nosuid,nodev.
func CloneTmpRoot(viewFD int, x string) (int, error) {
	tree, err := linux.OpenTree(viewFD, "tmp/"+x, unix.OPEN_TREE_CLONE|unix.AT_RECURSIVE)
	if err != nil {
		return -1, err
	}
	if err := linux.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE,
		linux.MountAttr{Set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}); err != nil {
		unix.Close(tree)
		return -1, err
	}
	return tree, nil
}

// ident is what a path shows: its device, inode and file type.
type ident struct {
	dev, ino uint64
	mode     uint32
}

// identAt returns the identity of what dirfd/path shows (path "" is
// dirfd itself), not following a final symlink.
func identAt(dirfd int, path string) (ident, error) {
	var st unix.Stat_t
	flags := unix.AT_SYMLINK_NOFOLLOW
	if path == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if err := unix.Fstatat(dirfd, path, &st, flags); err != nil {
		return ident{}, err
	}
	return ident{dev: st.Dev, ino: st.Ino, mode: st.Mode & unix.S_IFMT}, nil
}

// AttachTmpRoot mounts tree on tmp/x (tmpFD: the sandbox's /tmp), making
// the mount point if needed (a directory, or an empty file for a
// single-file root), and makes it a slave of the view. It reports whether
// it made the mount point. The server may have made tmp/x first: a
// directory (a file, for a file root) of its own is covered, anything
// else (a symlink to elsewhere, a fifo) is refused, never followed.
//
// The server can rename what it or P1 made at tmp/x between the open
// and the mount (the mount point is in its own /tmp), so the mount could
// land at a path of its choosing, where removing tmp/x later would not
// find it and the root would stay after it leaves. Once mounted, the
// mount point can no longer be renamed or removed (EBUSY): so the mount
// is checked to be at tmp/x, and detached through its descriptor
// otherwise. procFD is a directory descriptor of /proc/self/fd in the
// caller's own /proc (the sandbox's does not show P1), or -1 to use
// /proc/self/fd by path.
func AttachTmpRoot(tmpFD, tree int, x string, procFD int) (bool, error) {
	want, err := identAt(tree, "")
	if err != nil {
		return false, err
	}
	isDir := want.mode == unix.S_IFDIR
	created := true
	if isDir {
		err = unix.Mkdirat(tmpFD, x, 0o755)
	} else {
		var fd int
		fd, err = unix.Openat(tmpFD, x, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Close(fd)
		}
	}
	if errors.Is(err, unix.EEXIST) {
		created = false
	} else if err != nil {
		return false, &os.PathError{Op: "mkdir", Path: "/tmp/" + x, Err: err}
	}
	fd, err := unix.Openat(tmpFD, x, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		if got, serr := identAt(fd, ""); serr != nil || got.mode != want.mode {
			unix.Close(fd)
			fd, err = -1, unix.ENOTDIR
			if !isDir {
				err = unix.EISDIR
			}
		}
	}
	if err != nil {
		return false, fmt.Errorf("the server's /tmp/%s is not a %s it made, so roots below it cannot be shown there: %w", x, map[bool]string{true: "directory", false: "file"}[isDir], err)
	}
	defer unix.Close(fd)
	if err := linux.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		if created {
			_ = unix.Unlinkat(tmpFD, x, rmFlag(isDir))
		}
		return false, err
	}
	if err := mountedAt(tmpFD, x, tree); err != nil && !control.On(control.NoTmpMountCheck) {
		if derr := detachTree(tree, procFD); derr != nil {
			err = fmt.Errorf("%w; and detaching it: %v", err, derr)
		}
		return created, fmt.Errorf("the server's /tmp/%s: %w", x, err)
	}
	// A clone of the view (shared) is its peer: as a slave it receives the
	// binds laid on the view, and nothing mounted here goes back.
	if err := linux.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, linux.MountAttr{Propagation: unix.MS_SLAVE}); err != nil {
		_ = detachTree(tree, procFD)
		return created, err
	}
	return created, nil
}

// mountedAt checks that dirfd/name is the root of the mount tree is.
func mountedAt(dirfd int, name string, tree int) error {
	var at, want unix.Statx_t
	if err := unix.Statx(tree, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &want); err != nil {
		return err
	}
	if err := unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &at); err != nil {
		return fmt.Errorf("moved away while it was being mounted: %w", err)
	}
	if at.Mask&unix.STATX_MNT_ID == 0 || want.Mask&unix.STATX_MNT_ID == 0 {
		return errors.New("the kernel does not report mount ids (statx STATX_MNT_ID)")
	}
	if at.Mnt_id != want.Mnt_id {
		return errors.New("moved away while it was being mounted")
	}
	return nil
}

// detachTree detaches the mount whose root tree names (lazily), through
// procFD (see AttachTmpRoot) or /proc/self/fd.
func detachTree(tree, procFD int) error {
	if procFD < 0 {
		return unix.Unmount("/proc/self/fd/"+strconv.Itoa(tree), unix.MNT_DETACH)
	}
	if err := unix.Fchdir(procFD); err != nil { // this thread's own cwd (InMountNamespace unshares CLONE_FS)
		return err
	}
	return unix.Unmount(strconv.Itoa(tree), unix.MNT_DETACH)
}

// rmFlag is unlinkat's flag for a mount point that is a directory or not.
func rmFlag(isDir bool) int {
	if isDir {
		return unix.AT_REMOVEDIR
	}
	return 0
}

// tmpState is what P1 mounted (or P2, for the static roots) below the
// sandbox's /tmp, by first component.
type tmpState map[string]tmpMount

// tmpMount is one mount on the sandbox's /tmp/X: whether the mount point
// was made for it (and is removed with it), and the identity of the
// view's tmp/X it is a clone of. The clone keeps that identity: a root's
// bind cloned stays that directory, a synthetic directory's clone stays
// that node. When the view's tmp/X becomes something else (a root
// narrowed to a directory inside it, widened to X, or re-pointed at
// another directory), the clone is replaced, or it would keep showing
// what the client no longer lists.
//
// tree is the mount itself (P1's descriptor of it; -1 for those P2 made
// before the server started): it is detached through it, wherever the
// server may have renamed its mount point while it was being mounted.
type tmpMount struct {
	created bool
	of      ident
	tree    int
}

// syncTmp mounts the view's tmp/X on the sandbox's /tmp/X for each new
// first component of b's entries, replaces those whose tmp/X in the view
// is no longer what was cloned, and removes those left without roots.
// It runs in the sandbox's mount namespace; b.mu is held.
func (b *RootBinds) syncTmp() {
	if b.nsFD < 0 || b.dirFD < 0 {
		return
	}
	want := append(TmpRoots(b.v.Entries()), b.tmpKeep...)
	var add, drop []string
	wanted := map[string]bool{}
	for _, x := range want {
		if wanted[x] {
			continue
		}
		wanted[x] = true
		m, ok := b.tmp[x]
		if !ok {
			add = append(add, x)
			continue
		}
		// (The binds below /tmp lie in a kept one: it is never replaced.)
		if now, err := identAt(b.dirFD, "tmp/"+x); !slices.Contains(b.tmpKeep, x) && (err != nil || now != m.of) && !control.On(control.NoTmpRefresh) {
			drop = append(drop, x) // stale: replaced below
			add = append(add, x)
		}
	}
	for x := range b.tmp {
		if !wanted[x] {
			drop = append(drop, x)
		}
	}
	if len(add) == 0 && len(drop) == 0 {
		return
	}
	trees := map[string]int{}
	of := map[string]ident{}
	for _, x := range add {
		tree, err := CloneTmpRoot(b.dirFD, x)
		if err == nil {
			of[x], err = identAt(tree, "")
			if err != nil {
				unix.Close(tree)
			}
		}
		if err != nil {
			b.warnTmp(x, err)
			continue
		}
		trees[x] = tree
	}
	defer func() {
		for _, t := range trees {
			unix.Close(t)
		}
	}()
	procFD, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.log.Warn("roots below /tmp: cannot open /proc/self/fd", zap.Error(err))
		return
	}
	defer unix.Close(procFD)
	err = linux.InMountNamespace(b.nsFD, func() error {
		tmpFD, err := unix.Open("/tmp", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: "/tmp", Err: err}
		}
		defer unix.Close(tmpFD)
		for _, x := range drop {
			m := b.tmp[x]
			var err error
			if m.tree >= 0 && !control.On(control.NoTmpMountCheck) {
				err = detachTree(m.tree, procFD)
			} else {
				err = unix.Unmount("/tmp/"+x, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
			}
			if err != nil && !errors.Is(err, unix.EINVAL) {
				b.log.Warn("a root's mount in the server's /tmp stays", zap.String("path", "/tmp/"+x), zap.Error(err))
				if t, ok := trees[x]; ok { // a replacement: not stacked on it
					unix.Close(t)
					delete(trees, x)
				}
				continue
			}
			if m.created {
				_ = unix.Unlinkat(tmpFD, x, rmFlag(m.of.mode == unix.S_IFDIR))
			}
			if m.tree >= 0 {
				unix.Close(m.tree)
			}
			delete(b.tmp, x)
		}
		for _, x := range add {
			tree, ok := trees[x]
			if !ok {
				continue
			}
			created, err := AttachTmpRoot(tmpFD, tree, x, procFD)
			if err != nil {
				b.warnTmp(x, err)
				continue
			}
			delete(b.tmpWarned, x)
			delete(trees, x) // kept: it names the mount
			b.tmp[x] = tmpMount{created: created, of: of[x], tree: tree}
		}
		return nil
	})
	if err != nil {
		b.log.Warn("roots below /tmp: cannot enter the sandbox's mount namespace", zap.Error(err))
	}
	for x := range b.tmpWarned {
		if !wanted[x] {
			delete(b.tmpWarned, x)
		}
	}
}

// warnTmp logs once per first component and message that the roots below
// /tmp/x are not shown (the watcher retries every second).
func (b *RootBinds) warnTmp(x string, err error) {
	msg := err.Error()
	if b.tmpWarned[x] == msg {
		return
	}
	if b.tmpWarned == nil {
		b.tmpWarned = map[string]string{}
	}
	b.tmpWarned[x] = msg
	b.log.Warn("roots below /tmp/"+x+" are not shown in the server's /tmp", zap.Error(err))
}

// Attach names the sandbox (its init's pid, in this PID namespace) whose
// /tmp shows the roots below /tmp, which of them its init mounted already
// (Spec.TmpRoots, made by it), and which stay mounted whatever the roots
// (TmpPlaceholders: binds below them).
func (b *RootBinds) Attach(pid int, mounted, keep []string) error {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: the sandbox's mount namespace: %v", spec.ErrSetup, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nsFD >= 0 {
		unix.Close(b.nsFD)
	}
	b.nsFD = fd
	// P2 cloned the view's tmp/X of the static roots just before.
	for _, x := range mounted {
		of, _ := identAt(b.dirFD, "tmp/"+x)
		b.tmp[x] = tmpMount{created: true, of: of, tree: -1}
	}
	b.tmpKeep = keep
	b.syncTmp()
	return nil
}
