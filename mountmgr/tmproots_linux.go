//go:build linux

package mountmgr

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/mountmgr/kpath"
)

// The roots below /tmp that the view holds at start (host layout,
// Spec.TmpRoots): P2 shows the view's tmp/X on its private /tmp/X, in two
// steps of its mount plan around the /tmp tmpfs (kpath/tmproots_linux.go
// says why). P1 keeps them in step with the view afterwards.

// cloneTmpRoot (opTmpClone) clones the view's tmp/X for dest /tmp/X,
// before the private /tmp covers it; the clone waits in m.trees.
func (m *mounter) cloneTmpRoot(dest string) error {
	x := filepath.Base(dest)
	rfd, err := unix.Open(m.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: m.root, Err: err}
	}
	defer unix.Close(rfd)
	t, err := kpath.CloneTmpRoot(rfd, x)
	if err != nil {
		return fmt.Errorf("roots below /tmp/%s: %w", x, err)
	}
	if m.trees == nil {
		m.trees = map[string]int{}
	}
	m.trees[dest] = t
	return nil
}

// attachTmpRoot (opTmpAttach) mounts the clone taken for dest on it,
// once the private /tmp is mounted.
func (m *mounter) attachTmpRoot(dest string) error {
	x := filepath.Base(dest)
	tree, ok := m.trees[dest]
	if !ok {
		return fmt.Errorf("roots below /tmp/%s: no clone was taken", x)
	}
	tmpFD, err := unix.Openat2(unix.AT_FDCWD, m.root+"/tmp", &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return &os.PathError{Op: "open", Path: m.root + "/tmp", Err: err}
	}
	defer unix.Close(tmpFD)
	if _, err := kpath.AttachTmpRoot(tmpFD, tree, x, -1); err != nil {
		return fmt.Errorf("roots below /tmp/%s: %w", x, err)
	}
	return nil
}

// validTmpName reports whether x is one name in /tmp.
func validTmpName(x string) bool {
	return x != "" && x != "." && x != ".." && !strings.Contains(x, "/")
}
