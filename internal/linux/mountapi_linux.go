package linux

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
)

// The new mount API (open_tree, move_mount: Linux 5.2; mount_setattr:
// 5.12) works on descriptors: a bind mount is cloned from a descriptor the
// caller already holds and attached to a descriptor or path, so no host
// path is resolved again between the check and the mount. These wrappers
// are what lays a root's bind mount over its view entry (see
// docs/kernel-data-path.md).

// MountAttr is one mount_setattr(2) change: the MOUNT_ATTR_* bits to set
// and to clear, and a propagation type (0 leaves it unchanged; else one of
// unix.MS_SHARED, MS_SLAVE, MS_PRIVATE, MS_UNBINDABLE). The zero value
// changes nothing. Clearing a bit the kernel locked (a mount copied into a
// less privileged namespace) is EPERM.
type MountAttr struct {
	Set         uint64
	Clear       uint64
	Propagation uint64
}

var mountAttrNames = []struct {
	bit  uint64
	name string
}{
	{unix.MOUNT_ATTR_RDONLY, "rdonly"}, {unix.MOUNT_ATTR_NOSUID, "nosuid"}, {unix.MOUNT_ATTR_NODEV, "nodev"},
	{unix.MOUNT_ATTR_NOEXEC, "noexec"}, {unix.MOUNT_ATTR_NOATIME, "noatime"}, {unix.MOUNT_ATTR_STRICTATIME, "strictatime"},
	{unix.MOUNT_ATTR_NODIRATIME, "nodiratime"}, {unix.MOUNT_ATTR_IDMAP, "idmap"}, {unix.MOUNT_ATTR_NOSYMFOLLOW, "nosymfollow"},
}

func mountAttrString(bits uint64) string {
	var parts []string
	for _, n := range mountAttrNames {
		if bits&n.bit != 0 {
			parts = append(parts, n.name)
			bits &^= n.bit
		}
	}
	if bits != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(bits, 16))
	}
	return strings.Join(parts, "|")
}

func (a MountAttr) String() string {
	var parts []string
	if a.Set != 0 {
		parts = append(parts, "set "+mountAttrString(a.Set))
	}
	if a.Clear != 0 {
		parts = append(parts, "clear "+mountAttrString(a.Clear))
	}
	if a.Propagation != 0 {
		parts = append(parts, "propagation "+MountFlagsString(uintptr(a.Propagation)))
	}
	return strings.Join(parts, ", ")
}

// pathOf names dirfd+path in errors: the path, or the descriptor when the
// call works on the descriptor itself (AT_EMPTY_PATH).
func pathOf(dirfd int, path string) string {
	switch {
	case path == "" && dirfd >= 0:
		return "fd " + strconv.Itoa(dirfd)
	case path != "" && path[0] != '/' && dirfd >= 0:
		return "fd " + strconv.Itoa(dirfd) + ": " + path
	}
	return path
}

// OpenTree is open_tree(2) with EINTR retry; OPEN_TREE_CLOEXEC is always
// added. With OPEN_TREE_CLONE the result is a detached copy of the mount
// (with AT_RECURSIVE, of the mount tree) at dirfd+path, which stays
// detached until MoveMount attaches it and is freed when its descriptor is
// closed otherwise. The caller closes the descriptor.
func OpenTree(dirfd int, path string, flags uint) (int, error) {
	fd, err := retryOnEINTR2(func() (int, error) { return unix.OpenTree(dirfd, path, flags|unix.OPEN_TREE_CLOEXEC) })
	if err != nil {
		return -1, &os.PathError{Op: "open_tree", Path: pathOf(dirfd, path), Err: err}
	}
	return fd, nil
}

// CloneMount returns a detached bind mount of what fd (an O_PATH or any
// other descriptor of a directory or file) refers to:
// open_tree(fd, "", OPEN_TREE_CLONE|AT_EMPTY_PATH), with AT_RECURSIVE when
// recursive, so mounts below it come along. No path is resolved. It needs
// CAP_SYS_ADMIN over the caller's mount namespace, and fd's mount must
// belong to that namespace (EINVAL otherwise). In a user namespace a
// non-recursive clone of a directory with locked mounts below it is EINVAL
// (it would reveal what they cover).
func CloneMount(fd int, recursive bool) (int, error) {
	flags := uint(unix.OPEN_TREE_CLONE | unix.AT_EMPTY_PATH)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	return OpenTree(fd, "", flags)
}

// MoveMount is move_mount(2) with EINTR retry; a failure names the target.
func MoveMount(fromDirfd int, fromPath string, toDirfd int, toPath string, flags int) error {
	err := retryOnEINTR(func() error { return unix.MoveMount(fromDirfd, fromPath, toDirfd, toPath, flags) })
	if err != nil {
		return &os.PathError{Op: "move_mount", Path: pathOf(toDirfd, toPath), Err: err}
	}
	return nil
}

// AttachMount attaches the detached mount treeFD (from CloneMount) at
// dirfd+path: move_mount(treeFD, "", dirfd, path, MOVE_MOUNT_F_EMPTY_PATH).
// The target is resolved in the calling thread's mount namespace (see
// InMountNamespace) without following a final symlink; a detached tree can
// be attached in any namespace where the caller has CAP_SYS_ADMIN.
func AttachMount(treeFD, dirfd int, path string) error {
	return MoveMount(treeFD, "", dirfd, path, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// MountSetattr is mount_setattr(2) with EINTR retry (Linux 5.12). With
// unix.AT_RECURSIVE in flags the change applies to every mount of the
// tree, atomically: either all change or none. It works on detached
// mounts too, so a tree can be made nosuid,nodev,ro before anyone sees it.
func MountSetattr(dirfd int, path string, flags uint, attr MountAttr) error {
	a := unix.MountAttr{Attr_set: attr.Set, Attr_clr: attr.Clear, Propagation: attr.Propagation}
	err := retryOnEINTR(func() error { return unix.MountSetattr(dirfd, path, flags, &a) })
	if err != nil {
		return &os.PathError{Op: "mount_setattr(" + attr.String() + ")", Path: pathOf(dirfd, path), Err: err}
	}
	return nil
}

// ErrNoMountAPI is returned by BindDescriptor when the kernel lacks
// open_tree/move_mount (before 5.2) or mount_setattr (before 5.12).
var ErrNoMountAPI = errors.New("kernel lacks the mount API (open_tree, move_mount: Linux 5.2; mount_setattr: 5.12)")

// BindOptions say how BindDescriptor makes its bind mount.
type BindOptions struct {
	// Recursive clones the mounts below the source too (AT_RECURSIVE).
	Recursive bool
	// Attr is applied to the whole detached tree before it is attached;
	// the zero value changes nothing. Callers laying a root use
	// MOUNT_ATTR_NOSUID|MOUNT_ATTR_NODEV (+MOUNT_ATTR_RDONLY).
	Attr MountAttr
}

// BindDescriptor lays a bind mount of what src refers to over dirfd+path:
// CloneMount, MountSetattr(AT_EMPTY_PATH|AT_RECURSIVE) on the detached
// tree, AttachMount. Nothing is visible before the attributes are set, and
// no host path is resolved on the source side. ENOSYS becomes
// ErrNoMountAPI (wrapped, with the errno still matching errors.Is).
func BindDescriptor(src, dirfd int, path string, o BindOptions) error {
	tree, err := CloneMount(src, o.Recursive)
	if err != nil {
		return noAPI(err)
	}
	defer unix.Close(tree)
	if o.Attr != (MountAttr{}) {
		if err := MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, o.Attr); err != nil {
			return noAPI(err)
		}
	}
	return noAPI(AttachMount(tree, dirfd, path))
}

func noAPI(err error) error {
	if errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("%w: %w", ErrNoMountAPI, err)
	}
	return err
}

// InMountNamespace runs fn on a fresh OS thread that has joined the mount
// namespace nsFD (an open /proc/PID/ns/mnt), and returns fn's error. The
// thread first unshares its file system attributes (CLONE_FS: Go threads
// share them, and setns into a mount namespace refuses a shared one), so
// the process's other threads keep their namespace, root and working
// directory; after setns the thread's root and working directory are the
// namespace's root. The thread is never returned to the Go scheduler: it
// exits when fn returns, so that nothing keeps the namespace alive
// afterwards. It is never the main thread, which the runtime does not end
// (see onOtherThread). A child started with Pdeathsig from an unlocked
// goroutine may have been forked by that very thread and would get its
// signal then: fork such children from a goroutine that stays locked. fn
// must not start goroutines that expect to run
// in the namespace. Needs CAP_SYS_ADMIN in the user namespace that owns
// the target namespace, and CAP_SYS_CHROOT and CAP_SYS_ADMIN in the
// caller's.
func InMountNamespace(nsFD int, fn func() error) error {
	return onOtherThread(func() error {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return os.NewSyscallError("unshare(CLONE_FS)", err)
		}
		if err := unix.Setns(nsFD, unix.CLONE_NEWNS); err != nil {
			return os.NewSyscallError("setns(CLONE_NEWNS)", err)
		}
		return fn()
	})
}

// onOtherThread runs fn on a goroutine locked to an OS thread other than
// the main thread, and ends that thread when fn returns (no
// UnlockOSThread: the runtime ends a thread whose locked goroutine exits).
//
// The main thread is the exception: the runtime never ends it (a process
// whose main thread exited is a zombie no one can wait for) but parks it
// for good (runtime.mexit: "just wedge it"). A main thread that had joined
// the sandbox's mount namespace would stay there, asleep, and keep the
// namespace alive with its copy of the view's mount; the daemon's unmount
// of its own mount would then never end the FUSE connection, and go-fuse's
// Unmount would wait for its readers forever. The new goroutine lands on
// the main thread whenever the scheduler has it free (the caller ran
// there, say). It then keeps the main thread locked, so that a second
// goroutine cannot be scheduled there, lets that one run fn, and gives the
// main thread back as it found it.
func onOtherThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if !control.On(control.NoSpareMainThread) && unix.Gettid() == unix.Getpid() {
			errc <- onOtherThread(fn)
			runtime.UnlockOSThread()
			return
		}
		errc <- fn()
	}()
	return <-errc
}
