//go:build linux

package mountmgr

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
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
// components of the static roots before the server starts (tmpRootsOps),
// P1 the later ones (RootBinds.Attach) from a thread in the sandbox's
// mount namespace.

// cloneTmpRoot returns a detached recursive clone of the view's tmp/x
// (viewFD: the view's root), nosuid,nodev.
func cloneTmpRoot(viewFD int, x string) (int, error) {
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

// attachTmpRoot mounts tree on tmp/x (tmpFD: the sandbox's /tmp), making
// the mount point if needed, and makes it a slave of the view. It reports
// whether it made the mount point. The server may have made tmp/x first:
// a directory of its own is covered, anything else (a symlink to
// elsewhere, a file) is refused, never followed.
func attachTmpRoot(tmpFD, tree int, x string) (bool, error) {
	created := true
	if err := unix.Mkdirat(tmpFD, x, 0o755); errors.Is(err, unix.EEXIST) {
		created = false
	} else if err != nil {
		return false, &os.PathError{Op: "mkdir", Path: "/tmp/" + x, Err: err}
	}
	fd, err := unix.Openat(tmpFD, x, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("the server's /tmp/%s is not a directory it made, so roots below it cannot be shown there: %w", x, err)
	}
	defer unix.Close(fd)
	if err := linux.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		if created {
			_ = unix.Unlinkat(tmpFD, x, unix.AT_REMOVEDIR)
		}
		return false, err
	}
	// A clone of the view (shared) is its peer: as a slave it receives the
	// binds laid on the view, and nothing mounted here goes back.
	if err := linux.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, linux.MountAttr{Propagation: unix.MS_SLAVE}); err != nil {
		_ = unix.Unmount("/proc/self/fd/"+strconv.Itoa(tree), unix.MNT_DETACH)
		return created, err
	}
	return created, nil
}

// cloneTmpRoots clones the view's tmp/X for each X of xs (P2, before its
// /tmp covers them); root is the new root, the view.
func cloneTmpRoots(root string, xs []string) ([]int, error) {
	if len(xs) == 0 {
		return nil, nil
	}
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rfd)
	var trees []int
	for _, x := range xs {
		if x == "" || x == "." || x == ".." || strings.Contains(x, "/") {
			return trees, fmt.Errorf("%w: tmp root %q", ErrBadSpec, x)
		}
		t, err := cloneTmpRoot(rfd, x)
		if err != nil {
			return trees, fmt.Errorf("roots below /tmp/%s: %w", x, err)
		}
		trees = append(trees, t)
	}
	return trees, nil
}

// attachTmpRoots mounts each clone on its /tmp/X below root (P2, once its
// /tmp is mounted).
func attachTmpRoots(root string, xs []string, trees []int) error {
	if len(xs) == 0 {
		return nil
	}
	tmpFD, err := unix.Openat2(unix.AT_FDCWD, root+"/tmp", &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return &os.PathError{Op: "open", Path: root + "/tmp", Err: err}
	}
	defer unix.Close(tmpFD)
	for i, x := range xs {
		if _, err := attachTmpRoot(tmpFD, trees[i], x); err != nil {
			return fmt.Errorf("roots below /tmp/%s: %w", x, err)
		}
	}
	return nil
}

// tmpState is what P1 mounted (or P2, for the static roots) below the
// sandbox's /tmp: first component -> whether the mount point was made for
// it (and is removed with it).
type tmpState map[string]bool

// syncTmp mounts the view's tmp/X on the sandbox's /tmp/X for each new
// first component of b's entries, and removes those left without roots.
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
		if _, ok := b.tmp[x]; !ok {
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
	for _, x := range add {
		tree, err := cloneTmpRoot(b.dirFD, x)
		if err != nil {
			b.log.Warn("roots below /tmp/"+x+" are not shown in the server's /tmp", zap.Error(err))
			continue
		}
		trees[x] = tree
	}
	defer func() {
		for _, t := range trees {
			unix.Close(t)
		}
	}()
	err := linux.InMountNamespace(b.nsFD, func() error {
		tmpFD, err := unix.Open("/tmp", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: "/tmp", Err: err}
		}
		defer unix.Close(tmpFD)
		for _, x := range drop {
			if err := unix.Unmount("/tmp/"+x, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
				b.log.Warn("a root's mount in the server's /tmp stays", zap.String("path", "/tmp/"+x), zap.Error(err))
				continue
			}
			if b.tmp[x] {
				_ = unix.Unlinkat(tmpFD, x, unix.AT_REMOVEDIR)
			}
			delete(b.tmp, x)
		}
		for _, x := range add {
			tree, ok := trees[x]
			if !ok {
				continue
			}
			created, err := attachTmpRoot(tmpFD, tree, x)
			if err != nil {
				b.log.Warn("roots below /tmp/"+x+" are not shown in the server's /tmp", zap.Error(err))
				continue
			}
			b.tmp[x] = created
		}
		return nil
	})
	if err != nil {
		b.log.Warn("roots below /tmp: cannot enter the sandbox's mount namespace", zap.Error(err))
	}
}

// Attach names the sandbox (its init's pid, in this PID namespace) whose
// /tmp shows the roots below /tmp, which of them its init mounted already
// (Spec.TmpRoots, made by it), and which stay mounted whatever the roots
// (TmpPlaceholders: binds below them).
func (b *RootBinds) Attach(pid int, mounted, keep []string) error {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: the sandbox's mount namespace: %v", ErrSetup, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nsFD >= 0 {
		unix.Close(b.nsFD)
	}
	b.nsFD = fd
	for _, x := range mounted {
		b.tmp[x] = true
	}
	b.tmpKeep = keep
	b.syncTmp()
	return nil
}
