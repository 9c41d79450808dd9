package mountmgr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/internal/seccomp"
)

// runInit is P2: PID 1 of the new PID namespace. It reports to P1 once, on
// the sync pipe (stagesync_linux.go).
func runInit() {
	runtime.LockOSThread() // capabilities, no_new_privs and Landlock are per thread; P3 is forked from this one
	syncFD, _ := strconv.Atoi(os.Getenv(envSyncFD))
	specFD, _ := strconv.Atoi(os.Getenv(envSpecFD))
	os.Unsetenv(envSyncFD)
	os.Unsetenv(envSpecFD)
	if syncFD < 3 || specFD < 3 {
		fmt.Fprintln(os.Stderr, "rootfs init: missing spec or sync fd")
		os.Exit(255)
	}
	unix.CloseOnExec(syncFD)
	unix.CloseOnExec(specFD)
	netFD, _ := strconv.Atoi(os.Getenv(envNetFD)) // issue 23: only with Spec.Net
	os.Unsetenv(envNetFD)
	if netFD >= 3 {
		unix.CloseOnExec(netFD)
	}
	report := os.NewFile(uintptr(syncFD), "sync")
	fail := func(err error) {
		_ = writeStageReport(report, stageReport{Kind: stageError, Msg: err.Error()})
		os.Exit(255)
	}
	var spec Spec
	specFile := os.NewFile(uintptr(specFD), "spec")
	if err := json.NewDecoder(io.LimitReader(specFile, 1<<20)).Decode(&spec); err != nil {
		fail(fmt.Errorf("read spec: %w", err))
	}
	specFile.Close()
	os.Clearenv()

	lastCap, err := linux.LastCap()
	if err != nil {
		fail(err)
	}
	if spec.Net != nil { // issue 23: before setupRoot's pivot_root hides /dev/net/tun
		if netFD < 3 {
			fail(errors.New("network: no hand-over socket"))
		}
		if err := setupNet(spec.Net, netFD); err != nil {
			fail(err)
		}
		unix.Close(netFD)
	}
	if err := setupRoot(&spec); err != nil {
		fail(err)
	}
	if err := dropPrivileges(&spec, lastCap); err != nil {
		fail(err)
	}
	cmd := &exec.Cmd{
		Path: spec.Argv[0], Args: spec.Argv, Env: spec.Env, Dir: spec.Dir,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	}
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCHLD)
	if err := cmd.Start(); err != nil {
		code := 126
		msg := err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			code = 127
			// ENOENT names the command even when what is missing is its
			// interpreter, a symlink's target or its ELF loader: say which.
			if d := DiagnoseExec(spec.Argv[0], spec.Env); d != nil {
				msg = d.Error() + " in the sandbox; add it with --ro-bind " + bindHint(d)
				if !spec.AutoBind {
					msg += ", or drop --no-auto-bind"
				}
			}
		} else if errors.Is(err, fs.ErrPermission) {
			msg += " (not executable: no execute permission, or a file system mounted noexec)"
		}
		_ = writeStageReport(report, stageReport{Kind: stageExec, Code: code, Msg: msg})
		os.Exit(code)
	}
	_ = writeStageReport(report, stageReport{Kind: stageOK, Pid: cmd.Process.Pid})
	report.Close()
	// P2 keeps no copy of the server's stdio pipes: P1 sees EOF on stdout
	// when the server (and whatever it left behind) is gone.
	if devnull, err := os.OpenFile("/dev/null", os.O_RDWR, 0); err == nil {
		unix.Dup2(int(devnull.Fd()), 0)
		unix.Dup2(int(devnull.Fd()), 1)
		devnull.Close()
	}
	os.Exit(reap(cmd.Process.Pid, sigs))
}

// bindHint names the directory to bind for what d says is missing: the
// installation prefix of a file in bin/, else its directory.
func bindHint(err error) string {
	var me *MissingError
	if !errors.As(err, &me) || !filepath.IsAbs(me.Path) {
		return "DIR"
	}
	d := filepath.Dir(me.Path)
	if b := filepath.Base(d); (b == "bin" || b == "sbin") && strings.Count(d, "/") > 2 {
		d = filepath.Dir(d)
	}
	return d
}

// reap forwards signals to the server and reaps every zombie of the PID
// namespace until the server itself exits; it returns the server's status
// (128+n for a signal). When P2 exits the kernel kills the rest of the
// namespace.
func reap(pid int, sigs <-chan os.Signal) int {
	for {
		for {
			var ws unix.WaitStatus
			got, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err != nil && !errors.Is(err, unix.EINTR) {
				if errors.Is(err, unix.ECHILD) {
					return 125
				}
				break
			}
			if got <= 0 {
				break
			}
			if got == pid {
				if ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return ws.ExitStatus()
			}
		}
		s := <-sigs
		if s != syscall.SIGCHLD {
			_ = unix.Kill(pid, s.(syscall.Signal))
		}
	}
}

// mountOp is one step of the root setup, applied in order (bubblewrap's
// SetupOp list). Dest is relative to the new root.
type mountOp struct {
	kind   string // "bind", "tmpfs", "proc", "dir", "file", "symlink", "devbind", "overlay", "remount-ro", "mask-file", "mask-dir", "ro-self"
	source string
	dest   string
	data   string
	rw     bool
	layer  string // overlay: Bind.Layer
}

// plan turns a spec into the ordered mount list.
func plan(spec *Spec) ([]mountOp, error) {
	var ops []mountOp
	for _, d := range spec.runtimeDirs() {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() {
			continue // absent, or a symlink the view mirrors
		}
		ops = append(ops, mountOp{kind: "bind", source: d, dest: d})
	}
	// /etc: a tmpfs holding only the listed host files, then read-only.
	ops = append(ops, mountOp{kind: "tmpfs", dest: "/etc", data: "mode=0755,size=4m"})
	if spec.Net != nil { // issue 23: the gateway is the only resolver
		ops = append(ops, mountOp{kind: "file", dest: "/etc/resolv.conf", data: spec.Net.resolvConf()})
	}
	for _, rel := range spec.etcFiles() {
		if spec.Net != nil && rel == "resolv.conf" {
			continue
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
			if spec.underRuntime(abs) {
				ops = append(ops, mountOp{kind: "symlink", source: target, dest: host})
				continue
			}
			if _, err := os.Stat(host); err != nil {
				continue
			}
		}
		ops = append(ops, mountOp{kind: "bind", source: host, dest: host})
	}
	// (/etc is made read-only at the end, so a --bind may land in it.)
	// /dev: tmpfs with five device binds, a few symlinks and a private shm.
	ops = append(ops, mountOp{kind: "tmpfs", dest: "/dev", data: "mode=0755,size=64k"})
	for _, d := range []string{"null", "zero", "full", "random", "urandom"} {
		ops = append(ops, mountOp{kind: "devbind", source: "/dev/" + d, dest: "/dev/" + d})
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		ops = append(ops, mountOp{kind: "symlink", source: target, dest: "/dev/" + name})
	}
	ops = append(ops, mountOp{kind: "dir", dest: "/dev/shm"})
	ops = append(ops, mountOp{kind: "remount-ro", dest: "/dev"})
	ops = append(ops, mountOp{kind: "tmpfs", dest: "/dev/shm", data: "mode=1777,size=64m", rw: true})
	// /proc: fresh for the new PID namespace, with runc's masked and
	// read-only paths (the server may be uid 0 without capabilities, and
	// /proc/sys is writable by uid 0).
	ops = append(ops, mountOp{kind: "proc", dest: "/proc"})
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/kallsyms", "/proc/kmsg", "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup", "/proc/config.gz"} {
		ops = append(ops, mountOp{kind: "mask-file", dest: p})
	}
	for _, p := range []string{"/proc/acpi", "/proc/asound", "/proc/scsi", "/proc/driver", "/proc/tty"} {
		ops = append(ops, mountOp{kind: "mask-dir", dest: p})
	}
	for _, p := range []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"} {
		ops = append(ops, mountOp{kind: "ro-self", dest: p})
	}
	ops = append(ops, mountOp{kind: "tmpfs", dest: "/tmp", data: "mode=1777,size=" + spec.tmpSize(), rw: true})

	// Extra binds, shallowest first; a top-level name that is not bound
	// itself gets a read-only tmpfs scaffold holding the mount points.
	binds := spec.allBinds()
	sort.SliceStable(binds, func(i, j int) bool {
		return strings.Count(binds[i].Dest, "/") < strings.Count(binds[j].Dest, "/")
	})
	direct := map[string]bool{"etc": true, "tmp": true}
	for _, d := range spec.runtimeDirs() {
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
			ops = append(ops, mountOp{kind: "tmpfs", dest: "/" + top, data: "mode=0755,size=64k"})
		}
		if b.Overlay {
			ops = append(ops, mountOp{kind: "overlay", source: b.Source, dest: b.Dest, data: strconv.Itoa(len(ops)), layer: b.Layer})
			continue
		}
		if b.Symlink != "" {
			if !spec.HostLayout { // (in host layout the view shows the link itself)
				ops = append(ops, mountOp{kind: "symlink", source: b.Symlink, dest: b.Dest})
			}
			continue
		}
		ops = append(ops, mountOp{kind: "bind", source: b.Source, dest: b.Dest, rw: !b.ReadOnly})
	}
	ops = append(ops, mountOp{kind: "remount-ro", dest: "/etc"})
	var tops []string
	for t := range scaffolds {
		tops = append(tops, t)
	}
	sort.Strings(tops)
	for _, t := range tops {
		ops = append(ops, mountOp{kind: "remount-ro", dest: "/" + t})
	}
	return ops, nil
}

const commonFlags = unix.MS_NOSUID | unix.MS_NODEV

// setupRoot builds the sandbox in P2's new mount namespace and pivots into it.
func setupRoot(spec *Spec) error {
	if err := linux.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return err
	}
	if spec.NoNetwork {
		if err := linux.LoopbackUp(); err != nil {
			return err
		}
	}
	_ = unix.Sethostname([]byte("rootfs"))
	root := spec.NewRoot
	if err := linux.Mount(root, root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if err := remount(root, commonFlags, false); err != nil {
		return err
	}
	// Mounts already inside the new root (roots bound into a test root, or
	// anything the view's host mounted there) get nosuid,nodev too.
	subs, err := submounts(root)
	if err != nil {
		return err
	}
	for _, m := range subs {
		if err := remount(m, commonFlags, false); err != nil {
			return err
		}
	}
	ops, err := plan(spec)
	if err != nil {
		return err
	}
	// Roots below /tmp (host layout): their part of the view, taken before
	// the private /tmp covers it (tmproots_linux.go).
	trees, err := cloneTmpRoots(root, spec.TmpRoots)
	if err != nil {
		return err
	}
	defer func() {
		for _, t := range trees {
			unix.Close(t)
		}
	}()
	// In host layout a bind below /tmp lands on the view's mount point,
	// inside the view's tmp/X mounted over the private /tmp/X: after it.
	var late []mountOp
	for _, op := range ops {
		if spec.HostLayout && (op.kind == "bind" || op.kind == "overlay") && strings.HasPrefix(filepath.Clean(op.dest), "/tmp/") {
			late = append(late, op)
			continue
		}
		if err := apply(root, op); err != nil {
			return err
		}
	}
	if err := attachTmpRoots(root, spec.TmpRoots, trees); err != nil {
		return err
	}
	for _, op := range late {
		if err := apply(root, op); err != nil {
			return err
		}
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	if err := linux.PivotRoot(".", "."); err != nil {
		return err
	}
	if err := linux.Unmount(".", unix.MNT_DETACH); err != nil {
		return err
	}
	return os.Chdir("/")
}

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

func apply(root string, op mountOp) error {
	switch op.kind {
	case "dir":
		return ensure(root, op.dest, false)
	case "file": // issue 23: a file of rootfs's own in the sandbox's fresh /etc tmpfs
		t, done, err := target(root, filepath.Dir(op.dest))
		if err != nil {
			return err
		}
		defer done()
		return os.WriteFile(filepath.Join(t, filepath.Base(op.dest)), []byte(op.data), 0o644)
	case "symlink":
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, op.dest)), 0o755); err != nil {
			return err
		}
		return os.Symlink(op.source, filepath.Join(root, op.dest))
	case "tmpfs", "proc":
		if err := ensure(root, op.dest, false); err != nil {
			return err
		}
		t, done, err := target(root, op.dest)
		if err != nil {
			return err
		}
		defer done()
		if op.kind == "proc" {
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
	case "bind", "devbind":
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
		if op.kind == "devbind" {
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
	case "overlay":
		return overlay(root, op)
	case "remount-ro":
		return remount(filepath.Join(root, op.dest), unix.MS_RDONLY|commonFlags, false)
	case "mask-file", "mask-dir", "ro-self":
		p := filepath.Join(root, op.dest)
		if _, err := os.Lstat(p); err != nil {
			return nil // not on this kernel
		}
		switch op.kind {
		case "mask-file":
			return linux.Mount(filepath.Join(root, "dev/null"), p, "", unix.MS_BIND, "")
		case "mask-dir":
			return linux.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|commonFlags|unix.MS_NOEXEC, "size=0")
		default:
			if err := linux.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return err
			}
			return remount(p, unix.MS_RDONLY|commonFlags|unix.MS_NOEXEC, false)
		}
	}
	return fmt.Errorf("unknown mount op %q", op.kind)
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
func overlay(root string, op mountOp) error {
	ro := op
	ro.kind = "bind"
	if strings.ContainsAny(op.source, ",:\\") {
		return apply(root, ro)
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
		return apply(root, ro)
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

// dropPrivileges runs after pivot_root, on the locked thread that will fork
// the server, in the order of STYLE.md practice 11: groups and ids (stay
// uid/gid 0 of the current user namespace: real root, or the namespace root
// mapped to the invoking user), capabilities (all sets, secure bits
// locked), not dumpable, fds >= 3 close-on-exec, no_new_privs, Landlock
// (landlock_linux.go: scopes, and unix sockets in the roots), seccomp last.
func dropPrivileges(spec *Spec, lastCap int) error {
	if sg, err := os.ReadFile("/proc/self/setgroups"); err != nil || strings.TrimSpace(string(sg)) != "deny" {
		if err := unix.Setgroups(nil); err != nil {
			return os.NewSyscallError("setgroups", err)
		}
	}
	if err := unix.Setresgid(0, 0, 0); err != nil {
		return os.NewSyscallError("setresgid", err)
	}
	if err := unix.Setresuid(0, 0, 0); err != nil {
		return os.NewSyscallError("setresuid", err)
	}
	if err := linux.DropAllCapabilities(lastCap); err != nil {
		return err
	}
	// The server is forked from this (locked) thread, which is what
	// counts; also empty the other threads of P2 where the runtime allows
	// it (AllThreadsSyscall returns ENOTSUP in cgo binaries).
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	_, _, _ = syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	if err := linux.SetDumpable(false); err != nil {
		return err
	}
	if err := linux.CloseExecFrom(3); err != nil {
		return err
	}
	if err := linux.SetNoNewPrivs(); err != nil {
		return err
	}
	if err := linux.LandlockRestrict(landlockRuleset(spec, linux.LandlockABI())); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return seccomp.Install()
}
