//go:build linux

package mountmgr

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/linux"
)

// opKind is what a mountOp does; apply executes each kind.
type opKind uint8

const (
	// opRootBind binds the new root (source) on itself, recursively, and
	// adds nosuid,nodev to it and to every mount already below it (roots
	// bound into a test root, anything the view's host mounted there).
	opRootBind opKind = iota + 1
	// opTmpClone takes a detached clone of the view's tmp/X (dest
	// /tmp/X) before the private /tmp covers it; opTmpAttach mounts it.
	opTmpClone
	// opBind binds source at dest (recursively), cuts it from the host's
	// propagation and remounts it, and the mounts below it, nosuid,nodev
	// and read-only unless rw.
	opBind
	// opDevBind is opBind of a device node: nosuid,noexec, but not nodev.
	opDevBind
	// opTmpfs mounts a tmpfs with data as its options (noexec unless rw).
	opTmpfs
	// opProc mounts a fresh proc (hidepid=invisible).
	opProc
	// opDir makes the directory dest.
	opDir
	// opSymlink makes dest a symlink to source.
	opSymlink
	// opOverlay mounts source as the read-only lower layer of an overlay
	// (see overlay); data numbers its writable layer in the sandbox's /tmp.
	opOverlay
	// opRemountRO makes the mount at dest read-only.
	opRemountRO
	// opMaskFile hides the file dest under /dev/null, where it exists.
	opMaskFile
	// opMaskDir hides the directory dest under an empty read-only tmpfs,
	// where it exists.
	opMaskDir
	// opROSelf binds dest on itself read-only, where it exists.
	opROSelf
	// opTmpAttach mounts the clone opTmpClone took for dest on dest
	// (/tmp/X), as a slave of the view.
	opTmpAttach
	// opFile writes data as the file dest (0644), a file of rootfs's own
	// in the sandbox's fresh /etc tmpfs (resolv.conf naming the gateway).
	opFile
)

var opNames = [...]string{
	opRootBind: "root-rbind", opTmpClone: "tmp-clone", opBind: "bind", opDevBind: "devbind",
	opTmpfs: "tmpfs", opProc: "proc", opDir: "dir", opSymlink: "symlink", opOverlay: "overlay",
	opRemountRO: "remount-ro", opMaskFile: "mask-file", opMaskDir: "mask-dir", opROSelf: "ro-self",
	opTmpAttach: "tmp-attach", opFile: "file",
}

func (k opKind) String() string {
	if int(k) < len(opNames) && opNames[k] != "" {
		return opNames[k]
	}
	return "opKind(" + strconv.Itoa(int(k)) + ")"
}

// mountOp is one step of the root setup, applied in order (bubblewrap's
// SetupOp list). Dest is relative to the new root.
type mountOp struct {
	kind   opKind
	source string
	dest   string
	data   string
	rw     bool
	layer  string // overlay: Bind.Layer
}

// plan turns a spec into the ordered mount list, every mount P2 makes
// below the new root before pivot_root: the new root's rbind; clones of
// the view's tmp/X for the roots below /tmp (Spec.TmpRoots), taken before
// the private /tmp covers them; the sandbox's own mounts and the binds
// (mounts); the clones mounted on /tmp/X; and last, in host layout, the
// binds below /tmp, which land on the view's mount points inside those
// clones. It reads the host (lstat) and mounts nothing.
func plan(spec *Spec) ([]mountOp, error) {
	ops := []mountOp{{kind: opRootBind, source: spec.NewRoot, dest: "/"}}
	var attach []mountOp
	for _, x := range spec.TmpRoots {
		if !validTmpName(x) {
			return nil, fmt.Errorf("%w: tmp root %q", ErrBadSpec, x)
		}
		ops = append(ops, mountOp{kind: opTmpClone, dest: "/tmp/" + x})
		attach = append(attach, mountOp{kind: opTmpAttach, dest: "/tmp/" + x})
	}
	var late []mountOp
	for _, op := range mounts(spec) {
		if spec.HostLayout && (op.kind == opBind || op.kind == opOverlay) && strings.HasPrefix(filepath.Clean(op.dest), "/tmp/") {
			late = append(late, op)
			continue
		}
		ops = append(ops, op)
	}
	ops = append(ops, attach...)
	return append(ops, late...), nil
}

// mounts lists the sandbox's own mounts (runtime, /etc, /dev, /proc,
// /tmp) and the binds, in the order they are made when nothing is below
// /tmp.
func mounts(spec *Spec) []mountOp {
	var ops []mountOp
	for _, d := range spec.RuntimeDirList() {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() {
			continue // absent, or a symlink the view mirrors
		}
		ops = append(ops, mountOp{kind: opBind, source: d, dest: d})
	}
	// /etc: a tmpfs holding only the listed host files, then read-only.
	ops = append(ops, mountOp{kind: opTmpfs, dest: "/etc", data: "mode=0755,size=4m"})
	if spec.Net != nil { // the gateway is the only resolver
		ops = append(ops, mountOp{kind: opFile, dest: "/etc/resolv.conf", data: spec.Net.ResolvConf()})
	}
	for _, rel := range spec.EtcFileList() {
		if spec.Net != nil && rel == "resolv.conf" {
			continue // rootfs's own, above
		}
		host := filepath.Join("/etc", rel)
		fi, err := os.Lstat(host)
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(host)
			abs := target
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(filepath.Dir(host), target)
			}
			if spec.UnderRuntime(abs) {
				ops = append(ops, mountOp{kind: opSymlink, source: target, dest: host})
				continue
			}
			if _, err := os.Stat(host); err != nil {
				continue
			}
		}
		ops = append(ops, mountOp{kind: opBind, source: host, dest: host})
	}
	// (/etc is made read-only at the end, so a --bind may land in it.)
	// /dev: tmpfs with five device binds, a few symlinks and a private shm.
	ops = append(ops, mountOp{kind: opTmpfs, dest: "/dev", data: "mode=0755,size=64k"})
	for _, d := range []string{"null", "zero", "full", "random", "urandom"} {
		ops = append(ops, mountOp{kind: opDevBind, source: "/dev/" + d, dest: "/dev/" + d})
	}
	for _, l := range [][2]string{{"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}} {
		ops = append(ops, mountOp{kind: opSymlink, source: l[1], dest: "/dev/" + l[0]})
	}
	ops = append(ops, mountOp{kind: opDir, dest: "/dev/shm"})
	ops = append(ops, mountOp{kind: opRemountRO, dest: "/dev"})
	ops = append(ops, mountOp{kind: opTmpfs, dest: "/dev/shm", data: "mode=1777,size=64m", rw: true})
	// /proc: fresh for the new PID namespace, with runc's masked and
	// read-only paths (the server may be uid 0 without capabilities, and
	// /proc/sys is writable by uid 0).
	ops = append(ops, mountOp{kind: opProc, dest: "/proc"})
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/kallsyms", "/proc/kmsg", "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup", "/proc/config.gz"} {
		ops = append(ops, mountOp{kind: opMaskFile, dest: p})
	}
	for _, p := range []string{"/proc/acpi", "/proc/asound", "/proc/scsi", "/proc/driver", "/proc/tty"} {
		ops = append(ops, mountOp{kind: opMaskDir, dest: p})
	}
	for _, p := range []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"} {
		ops = append(ops, mountOp{kind: opROSelf, dest: p})
	}
	ops = append(ops, mountOp{kind: opTmpfs, dest: "/tmp", data: "mode=1777,size=" + spec.TmpSizeOrDefault(), rw: true})

	// Extra binds, shallowest first; a top-level name that is not bound
	// itself gets a read-only tmpfs scaffold holding the mount points.
	binds := spec.AllBinds()
	sort.SliceStable(binds, func(i, j int) bool {
		return strings.Count(binds[i].Dest, "/") < strings.Count(binds[j].Dest, "/")
	})
	direct := map[string]bool{"etc": true, "tmp": true}
	for _, d := range spec.RuntimeDirList() {
		direct[topLevel(d)] = true
	}
	for _, b := range binds {
		if filepath.Clean(b.Dest) == "/"+topLevel(b.Dest) {
			direct[topLevel(b.Dest)] = true
		}
	}
	scaffolds := map[string]bool{}
	for _, b := range binds {
		top := topLevel(b.Dest)
		if !direct[top] && !scaffolds[top] && !spec.HostLayout {
			// (In host layout the view holds the mount point itself.)
			scaffolds[top] = true
			ops = append(ops, mountOp{kind: opTmpfs, dest: "/" + top, data: "mode=0755,size=64k"})
		}
		if b.Overlay {
			ops = append(ops, mountOp{kind: opOverlay, source: b.Source, dest: b.Dest, data: strconv.Itoa(len(ops)), layer: b.Layer})
			continue
		}
		if b.Symlink != "" {
			if !spec.HostLayout { // (in host layout the view shows the link itself)
				ops = append(ops, mountOp{kind: opSymlink, source: b.Symlink, dest: b.Dest})
			}
			continue
		}
		ops = append(ops, mountOp{kind: opBind, source: b.Source, dest: b.Dest, rw: !b.ReadOnly})
	}
	ops = append(ops, mountOp{kind: opRemountRO, dest: "/etc"})
	var tops []string
	for t := range scaffolds {
		tops = append(tops, t)
	}
	sort.Strings(tops)
	for _, t := range tops {
		ops = append(ops, mountOp{kind: opRemountRO, dest: "/" + t})
	}
	return ops
}

const commonFlags = unix.MS_NOSUID | unix.MS_NODEV

// submounts lists the mount points strictly beneath dir, from mountinfo.
func submounts(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, mp := range linux.MountPoints(b) {
		if strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, nil
}

// remount adds flags to the mount at path, keeping the flags the kernel
// may have locked (a remount in a user namespace must not clear them).
func remount(path string, add uintptr, keepRW bool) error {
	cur, err := linux.MountFlagsOf(path)
	if err != nil {
		return err
	}
	return linux.Mount("", path, "", unix.MS_REMOUNT|unix.MS_BIND|cur|add, "")
}

// target resolves dest beneath root refusing any symlink on the way
// (CVE-2021-30465 class: a mount must land exactly where it is meant) and
// returns a /proc/self/fd path to mount on, with a closer.
func target(root, dest string) (string, func(), error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rfd)
	rel := strings.TrimPrefix(filepath.Clean(dest), "/")
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return "", nil, fmt.Errorf("mount target %s: %w", dest, &os.PathError{Op: "openat2", Path: filepath.Join(root, rel), Err: err})
	}
	return "/proc/self/fd/" + strconv.Itoa(fd), func() { unix.Close(fd) }, nil
}

// ensure creates dest (a directory, or an empty file when isFile) inside
// root if it does not exist. Each missing component is made beneath root
// and no symlink on the way is followed: in host layout a mount point
// may lie inside a static root, a host directory the server could write
// in an earlier session, where a planted link would lead this process,
// root on the host, to make directories wherever it points.
func ensure(root, dest string, isFile bool) error {
	rel := strings.TrimPrefix(filepath.Clean(dest), "/")
	if rel == "" {
		return nil
	}
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	dfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer func() { unix.Close(dfd) }()
	fail := func(err error) error {
		return fmt.Errorf("mount point %s: %w", dest, err)
	}
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		last := i == len(parts)-1
		h := *how
		if !last {
			h.Flags |= unix.O_DIRECTORY
		}
		fd, err := unix.Openat2(dfd, c, &h)
		if errors.Is(err, unix.ENOENT) {
			switch {
			case last && isFile:
				var f int
				f, err = unix.Openat(dfd, c, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
				if err == nil {
					unix.Close(f)
				}
			default:
				err = unix.Mkdirat(dfd, c, 0o755)
			}
			if err != nil && !errors.Is(err, unix.EEXIST) {
				return fail(&os.PathError{Op: "create", Path: filepath.Join(root, strings.Join(parts[:i+1], "/")), Err: err})
			}
			fd, err = unix.Openat2(dfd, c, &h)
		}
		if err != nil {
			return fail(&os.PathError{Op: "openat2", Path: filepath.Join(root, strings.Join(parts[:i+1], "/")), Err: err})
		}
		unix.Close(dfd)
		dfd = fd
	}
	return nil
}

// mounter applies a plan below root. trees holds, by destination, the
// clones opTmpClone took until opTmpAttach mounts them.
type mounter struct {
	root  string
	trees map[string]int
}

// close closes the clones opTmpClone took (once mounted, a clone needs
// its descriptor no more).
func (m *mounter) close() {
	for _, t := range m.trees {
		unix.Close(t)
	}
}

// apply executes op below m.root.
func (m *mounter) apply(op mountOp) error {
	root := m.root
	switch op.kind {
	case opRootBind:
		if err := linux.Mount(op.source, root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		if err := remount(root, commonFlags, false); err != nil {
			return err
		}
		subs, err := submounts(root)
		if err != nil {
			return err
		}
		for _, sub := range subs {
			if err := remount(sub, commonFlags, false); err != nil {
				return err
			}
		}
		return nil
	case opTmpClone:
		return m.cloneTmpRoot(op.dest)
	case opTmpAttach:
		return m.attachTmpRoot(op.dest)
	case opDir:
		return ensure(root, op.dest, false)
	case opFile:
		t, done, err := target(root, filepath.Dir(op.dest))
		if err != nil {
			return err
		}
		defer done()
		return os.WriteFile(filepath.Join(t, filepath.Base(op.dest)), []byte(op.data), 0o644)
	case opSymlink:
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, op.dest)), 0o755); err != nil {
			return err
		}
		return os.Symlink(op.source, filepath.Join(root, op.dest))
	case opTmpfs, opProc:
		if err := ensure(root, op.dest, false); err != nil {
			return err
		}
		t, done, err := target(root, op.dest)
		if err != nil {
			return err
		}
		defer done()
		if op.kind == opProc {
			// hidepid=invisible: the server does not even see P2 (not
			// dumpable). Members of the gid= group are exempt, and it
			// defaults to gid 0, the server's group as real root: name a
			// group the server is not in. In a user namespace 65534 may be
			// unmapped (EINVAL), but there the server's gid is not host 0.
			err := linux.Mount("proc", t, "proc", commonFlags|unix.MS_NOEXEC, "hidepid=invisible,gid=65534")
			if errors.Is(err, unix.EINVAL) {
				err = linux.Mount("proc", t, "proc", commonFlags|unix.MS_NOEXEC, "hidepid=invisible")
			}
			return err
		}
		flags := uintptr(commonFlags)
		if !op.rw {
			flags |= unix.MS_NOEXEC
		}
		return linux.Mount("tmpfs", t, "tmpfs", flags, op.data)
	case opBind, opDevBind:
		fi, err := os.Stat(op.source)
		if err != nil {
			return fmt.Errorf("bind source: %w", err)
		}
		if err := ensure(root, op.dest, !fi.IsDir()); err != nil {
			return err
		}
		t, done, err := target(root, op.dest)
		if err != nil {
			return err
		}
		defer done()
		if err := linux.Mount(op.source, t, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		add := uintptr(commonFlags)
		if op.kind == opDevBind {
			add = unix.MS_NOSUID | unix.MS_NOEXEC // device nodes need dev
		}
		if !op.rw {
			add |= unix.MS_RDONLY
		}
		// Re-resolve: the first fd names the directory under the new mount.
		t2, done2, err := target(root, op.dest)
		if err != nil {
			return err
		}
		defer done2()
		// A bind of a host path is a slave of the host's mount (P1's
		// mounts are), so a mount the host makes below it later would
		// appear in the sandbox, without this bind's ro,nosuid,nodev.
		// Only the roots are meant to follow the host; cut the rest,
		// first, so that none arrives after the remounts below.
		if !control.On(control.NoPrivateBinds) {
			if err := linux.Mount("", t2, "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return err
			}
		}
		if err := remountFD(t2, add); err != nil {
			return err
		}
		// MS_REC copied the source's submounts with their own flags, and
		// a bind remount changes one mount only: a read-only bind over a
		// directory holding a read-write mount (/usr/local on its own
		// partition, a data disk under an auto-bound prefix) would leave
		// that mount writable, to a server that is uid 0 and owns what
		// root owns there. Each gets this bind's flags too.
		if control.On(control.NoSubmountRemount) {
			return nil
		}
		subs, err := submounts(filepath.Join(root, op.dest))
		if err != nil {
			return err
		}
		for _, m := range subs {
			if err := remount(m, add, false); err != nil {
				return fmt.Errorf("bind %s: submount %s: %w", op.dest, strings.TrimPrefix(m, root), err)
			}
		}
		return nil
	case opOverlay:
		return m.overlay(op)
	case opRemountRO:
		return remount(filepath.Join(root, op.dest), unix.MS_RDONLY|commonFlags, false)
	case opMaskFile, opMaskDir, opROSelf:
		p := filepath.Join(root, op.dest)
		if _, err := os.Lstat(p); err != nil {
			return nil // not on this kernel
		}
		switch op.kind {
		case opMaskFile:
			return linux.Mount(filepath.Join(root, "dev/null"), p, "", unix.MS_BIND, "")
		case opMaskDir:
			return linux.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|commonFlags|unix.MS_NOEXEC, "size=0")
		default:
			if err := linux.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return err
			}
			return remount(p, unix.MS_RDONLY|commonFlags|unix.MS_NOEXEC, false)
		}
	}
	return fmt.Errorf("unknown mount op %v", op.kind)
}

// overlay mounts op.source read-only as the lower layer of an overlay at
// op.dest. The upper layer is the persistent one op.layer names (see
// layer.go), opened refusing any symlink and named to the kernel through
// its descriptor; without one, or when that one cannot be mounted, it is a
// directory in the sandbox's /tmp (so its size cap holds, and it vanishes
// with the sandbox), and a line says that the writes vanish. Where the
// kernel refuses an overlay here at all (an unusual lower file system, a
// path overlayfs cannot name), the source is bound read-only instead and
// one line says so.
func (m *mounter) overlay(op mountOp) error {
	root := m.root
	ro := op
	ro.kind = opBind
	if strings.ContainsAny(op.source, ",:\\") {
		return m.apply(ro)
	}
	if err := ensure(root, op.dest, false); err != nil {
		return err
	}
	if op.layer != "" {
		err := func() error {
			var fds []int
			defer func() {
				for _, fd := range fds {
					unix.Close(fd)
				}
			}()
			var dirs []string
			for _, d := range []string{"upper", "work"} {
				fd, err := openNoFollow(filepath.Join(op.layer, d))
				if err != nil {
					return err
				}
				fds = append(fds, fd)
				dirs = append(dirs, "/proc/self/fd/"+strconv.Itoa(fd))
			}
			return mountOverlay(root, op, dirs[0], dirs[1])
		}()
		if err == nil {
			return nil
		}
		fmt.Fprintf(os.Stderr, "rootfs init: cannot keep the writes to %s in %s (%v); they go to the sandbox's /tmp and vanish with it\n", op.source, op.layer, err)
	}
	base := filepath.Join(root, "tmp", ".rootfs-overlay", op.data)
	upper, work := filepath.Join(base, "upper"), filepath.Join(base, "work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("overlay %s: %w", op.dest, err)
		}
	}
	if err := mountOverlay(root, op, upper, work); err != nil {
		fmt.Fprintf(os.Stderr, "rootfs init: cannot overlay %s (%v); it is read-only in the sandbox\n", op.source, err)
		return m.apply(ro)
	}
	return nil
}

// mountOverlay mounts the overlay of op.source with upper and work at
// op.dest (which exists).
func mountOverlay(root string, op mountOp, upper, work string) error {
	t, done, err := target(root, op.dest)
	if err != nil {
		return err
	}
	defer done()
	data := "lowerdir=" + op.source + ",upperdir=" + upper + ",workdir=" + work
	err = linux.Mount("overlay", t, "overlay", commonFlags, data)
	if err != nil {
		// In a user namespace overlayfs keeps its metadata in user.* xattrs.
		err = linux.Mount("overlay", t, "overlay", commonFlags, data+",userxattr")
	}
	return err
}

func remountFD(t string, add uintptr) error {
	cur, err := linux.MountFlagsOf(t)
	if err != nil {
		return err
	}
	return linux.Mount("", t, "", unix.MS_REMOUNT|unix.MS_BIND|cur|add, "")
}
