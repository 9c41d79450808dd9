package mountmgr

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/linux"
)

// Environment markers of the hidden stages. They are removed from the
// environment as soon as a stage reads them.
const (
	envStage     = "ROOTFS_STAGE"      // "daemon" (P1), "init" (P2), "probe" (preflight)
	envParentPID = "ROOTFS_PARENT_PID" // pid of the parent, to catch a parent that died before Pdeathsig took effect
	envSpecFD    = "ROOTFS_SPEC_FD"    // P2: fd of the spec pipe (JSON)
	envSyncFD    = "ROOTFS_SYNC_FD"    // P2: fd of the report pipe
	envNetFD     = "ROOTFS_NET_FD"     // P2, with Spec.Net: fd of the socket that carries the TUN (net_linux.go)
	envAuditFD   = "ROOTFS_AUDIT_FD"   // P2, with ServerOptions.AuditGroup: the fanotify group, then the pipe its events go on to
	envSeccompFD = "ROOTFS_SECCOMP_FD" // P2, with ServerOptions.SyscallRefused or .Connect: fd of the socket its seccomp listener goes back on (seccompnotify_linux.go)
	// envSeccompNotify: what the listener is for, "refusals" and/or "connect" (comma-separated).
	envSeccompNotify = "ROOTFS_SECCOMP_NOTIFY"
)

const (
	stageDaemon = "daemon"
	stageInit   = "init"
	stageProbe  = "probe"
)

var inDaemon bool

// InDaemon reports whether this process is P1 (MaybeRunStage saw the
// daemon marker and set the process up).
func InDaemon() bool { return inDaemon }

// MaybeRunStage must be the first call in main. In P2 (init) and in the
// preflight probe it runs the stage and never returns. In P1 (daemon) it
// prepares the process (mounts slaves of the host's, not dumpable, inherited
// fds close-on-exec), sets InDaemon and returns so that main parses the same
// arguments again. In P0 it only marks inherited fds >= 3 close-on-exec
// (security-battery A4) and returns.
func MaybeRunStage() {
	stage := os.Getenv(envStage)
	os.Unsetenv(envStage)
	if stage == "" {
		_ = linux.CloseExecFrom(3)
		return
	}
	if p := os.Getenv(envParentPID); p != "" {
		os.Unsetenv(envParentPID)
		if strconv.Itoa(os.Getppid()) != p && os.Getppid() != 0 {
			os.Exit(255) // the parent died before our death signal was armed
		}
	}
	switch stage {
	case stageDaemon:
		if err := daemonSetup(); err != nil {
			if errors.Is(err, unix.EPERM) && inUserNS() {
				// A user namespace without mount power: policy (AppArmor) says no.
				err = fmt.Errorf("%w: %s", ErrUnsupported, userNSFinding(err, true).String())
			}
			fmt.Fprintf(os.Stderr, "rootfs: %v\n", err)
			os.Exit(125)
		}
		inDaemon = true
		return
	case stageInit:
		runInit() // never returns
	case stageProbe:
		runProbe() // never returns
	}
	fmt.Fprintf(os.Stderr, "rootfs: unknown stage %q\n", stage)
	os.Exit(125)
}

// daemonSetup runs first in P1: the mount namespace is new (clone flag), so
// make every mount a slave before anything is mounted, then become not
// dumpable so that nothing of the same uid can ptrace P1 or read its fds.
//
// Slave, not private: mounts and unmounts the host makes later below a root
// (where the host's mount is shared, as systemd makes /) propagate into
// P1, whose view resolves beneath the roots' descriptors in this namespace
// and so shows them; nothing mounted in P1 propagates back (a slave only
// receives), and every mount P1 makes itself (the tmpfs of
// mountBase is where PrivateMountDir makes its directory: the first of
// $TMPDIR (or /tmp), /dev/shm, /run and /var/tmp that lies in none of
// avoid (the host paths of the roots): a root that is the temporary
// directory itself, as when rootfs starts in /tmp with no --root, would
// otherwise hold the view's own mount point.
func mountBase(avoid []string) string {
	inside := func(d string) bool {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			d = r
		}
		for _, a := range avoid {
			if r, err := filepath.EvalSymlinks(a); err == nil {
				a = r
			}
			if d == a || strings.HasPrefix(d, a+"/") || a == "/" {
				return true
			}
		}
		return false
	}
	for _, d := range []string{os.TempDir(), "/dev/shm", "/run", "/var/tmp"} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && unix.Access(d, unix.W_OK|unix.X_OK) == nil && !inside(d) {
			return d
		}
	}
	return os.TempDir() // the view refuses it with a clear error
}

// PrivateMountDir, the view) is private. Without root, the kernel already
// made the copies of shared host mounts slaves when it created the user's
// less privileged namespace (CL_SHARED_TO_SLAVE); this keeps them so.
func daemonSetup() error {
	prop := uintptr(unix.MS_SLAVE)
	if control.On(control.NoSlaveDaemon) {
		prop = unix.MS_PRIVATE
	}
	if err := linux.Mount("", "/", "", unix.MS_REC|prop, ""); err != nil {
		return fmt.Errorf("%w: make / a slave: %w", ErrSetup, err)
	}
	if err := linux.SetDumpable(false); err != nil {
		return fmt.Errorf("%w: %v", ErrSetup, err)
	}
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	// The view holds a descriptor per known inode (security-battery H5).
	_, _ = linux.RaiseNoFile()
	return linux.CloseExecFrom(3)
}

// RunDaemon runs in P0: it starts P1 (this binary again) in a new mount
// namespace, plus a user namespace mapping the invoking uid and gid to 0
// when not root, with stdio, cwd and environment inherited (so relative
// flag values mean the same in P1) and SIGKILL as its death signal; it
// relays SIGINT, SIGTERM, SIGHUP and SIGQUIT to P1, waits and returns P1's
// exit status (128+n when P1 died of signal n). An error means P1 could
// not be started; it wraps ErrUnsupported with the fix when the kernel or
// policy refused the namespaces.
func RunDaemon(opts DaemonOptions) (int, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(withoutStageEnv(env), envStage+"="+stageDaemon, envParentPID+"="+strconv.Itoa(os.Getpid()))
	attr := &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= unix.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd := &exec.Cmd{
		Path: "/proc/self/exe", Args: append([]string{"rootfs"}, opts.Args...), Env: env,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, ExtraFiles: opts.ExtraFiles, SysProcAttr: attr,
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	code, err := startAndWait(cmd, sigs, log)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EACCES) {
			return 125, userNSError(err)
		}
		return 125, fmt.Errorf("%w: start namespace daemon: %v", ErrSetup, err)
	}
	return code, nil
}

// startAndWait starts cmd from a goroutine locked to its thread for the
// child's whole life: Pdeathsig fires when the *thread* that forked exits,
// and the Go runtime may retire an unlocked thread.
func startAndWait(cmd *exec.Cmd, sigs <-chan os.Signal, log *zap.Logger) (int, error) {
	type result struct {
		code int
		err  error
	}
	started := make(chan error, 1)
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		done <- result{exitCode(cmd.ProcessState), err}
	}()
	if err := <-started; err != nil {
		return 0, err
	}
	log.Debug("namespace daemon started", zap.Int("pid", cmd.Process.Pid))
	for {
		select {
		case s := <-sigs:
			log.Debug("relaying signal", zap.String("signal", s.String()))
			_ = cmd.Process.Signal(s)
		case r := <-done:
			return r.code, nil
		}
	}
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return 125
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func withoutStageEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "ROOTFS_STAGE=") || strings.HasPrefix(kv, "ROOTFS_PARENT_PID=") ||
			strings.HasPrefix(kv, "ROOTFS_SPEC_FD=") || strings.HasPrefix(kv, "ROOTFS_SYNC_FD=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// PrivateMountDir runs in P1: it creates a fresh directory under
// os.TempDir(), mounts a small tmpfs on it (mode 0700) in P1's private
// namespace, and returns mnt = <dir>/root, an empty directory on that tmpfs
// where the FUSE view is to be mounted. The host sees only an empty
// directory. cleanup unmounts the tmpfs and removes the directory; if P1 is
// killed, the namespace and its mounts vanish with it and only the empty
// directory remains.
func PrivateMountDir(avoid ...string) (mnt string, cleanup func(), err error) {
	if !inDaemon {
		return "", nil, fmt.Errorf("%w: PrivateMountDir must run in the namespace daemon (P1)", ErrSetup)
	}
	dir, err := os.MkdirTemp(mountBase(avoid), "rootfs-")
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	if err := linux.Mount("rootfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=64k"); err != nil {
		os.Remove(dir)
		return "", nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	mnt = filepath.Join(dir, "root")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		_ = linux.Unmount(dir, unix.MNT_DETACH)
		os.Remove(dir)
		return "", nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	return mnt, func() {
		_ = linux.Unmount(dir, unix.MNT_DETACH)
		_ = os.Remove(dir)
	}, nil
}
