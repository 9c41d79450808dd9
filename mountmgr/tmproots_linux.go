//go:build linux

package mountmgr

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/mountmgr/kpath"
)

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
		if !validTmpName(x) {
			return trees, fmt.Errorf("%w: tmp root %q", ErrBadSpec, x)
		}
		t, err := kpath.CloneTmpRoot(rfd, x)
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
		if _, err := kpath.AttachTmpRoot(tmpFD, trees[i], x, -1); err != nil {
			return fmt.Errorf("roots below /tmp/%s: %w", x, err)
		}
	}
	return nil
}

// validTmpName reports whether x is one name in /tmp.
func validTmpName(x string) bool {
	return x != "" && x != "." && x != ".." && !strings.Contains(x, "/")
}
