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
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/internal/seccomp"
	"github.com/rootfs-dev/rootfs/mountmgr/resolve"
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
	netFD, _ := strconv.Atoi(os.Getenv(envNetFD)) // only with Spec.Net
	os.Unsetenv(envNetFD)
	if netFD >= 3 {
		unix.CloseOnExec(netFD)
	}
	// The audit group and the pipe its events go on to (never the server's).
	auditGroup, auditOut := -1, -1
	if g, o, ok := strings.Cut(os.Getenv(envAuditFD), ","); ok {
		auditGroup, _ = strconv.Atoi(g)
		auditOut, _ = strconv.Atoi(o)
		for _, fd := range []int{auditGroup, auditOut} {
			if fd >= 3 {
				unix.CloseOnExec(fd)
			}
		}
	}
	os.Unsetenv(envAuditFD)
	seccompFD, _ := strconv.Atoi(os.Getenv(envSeccompFD)) // only with ServerOptions.SyscallRefused or .Connect
	os.Unsetenv(envSeccompFD)
	var notify seccomp.Notify
	for _, w := range strings.Split(os.Getenv(envSeccompNotify), ",") {
		notify.Refusals = notify.Refusals || w == "refusals"
		notify.Connect = notify.Connect || w == "connect"
	}
	os.Unsetenv(envSeccompNotify)
	if seccompFD >= 3 {
		unix.CloseOnExec(seccompFD)
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
	if spec.Net == nil {
		notify.Connect = false // the host's network, or none: nothing to carry
	}
	if spec.Net != nil { // issue 23: before setupRoot's pivot_root hides /dev/net/tun
		if netFD < 3 {
			fail(errors.New("network: no hand-over socket"))
		}
		engine, err := setupNet(spec.Net, netFD)
		if err != nil {
			fail(err)
		}
		notify.Connect = notify.Connect && engine // no engine, no fast path
		unix.Close(netFD)
	}
	if err := setupRoot(&spec); err != nil {
		fail(err)
	}
	if err := dropPrivileges(&spec, lastCap, seccompFD, notify); err != nil {
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
			if d := resolve.DiagnoseExec(spec.Argv[0], spec.Env); d != nil {
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
	stopAudit := func() {}
	if auditGroup >= 3 && auditOut >= 3 {
		// Read here, in the sandbox's PID namespace, where the kernel
		// tells the sandbox's processes from the host's (audit.Forward).
		stopAudit = audit.Forward(os.NewFile(uintptr(auditGroup), "audit-group"), os.NewFile(uintptr(auditOut), "audit-out"))
	}
	// P2 keeps no copy of the server's stdio pipes: P1 sees EOF on stdout
	// when the server (and whatever it left behind) is gone.
	if devnull, err := os.OpenFile("/dev/null", os.O_RDWR, 0); err == nil {
		unix.Dup2(int(devnull.Fd()), 0)
		unix.Dup2(int(devnull.Fd()), 1)
		devnull.Close()
	}
	code := reap(cmd.Process.Pid, sigs)
	stopAudit() // what is queued still goes on
	os.Exit(code)
}

// bindHint names the directory to bind for what d says is missing: the
// installation prefix of a file in bin/, else its directory.
func bindHint(err error) string {
	var me *resolve.MissingError
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
	// Every mount below the new root, from its rbind to the binds below
	// /tmp, is one step of the plan (plan_linux.go).
	ops, err := plan(spec)
	if err != nil {
		return err
	}
	root := spec.NewRoot
	m := &mounter{root: root}
	defer m.close()
	for _, op := range ops {
		if err := m.apply(op); err != nil {
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

// dropPrivileges runs after pivot_root, on the locked thread that will fork
// the server, in the order of STYLE.md practice 11: groups and ids (stay
// uid/gid 0 of the current user namespace: real root, or the namespace root
// mapped to the invoking user), capabilities (all sets, secure bits
// locked), not dumpable, fds >= 3 close-on-exec, no_new_privs, Landlock
// (landlock_linux.go: scopes, and unix sockets in the roots), seccomp last
// (with a listener sent back on seccompSock when it is a descriptor:
// seccompnotify_linux.go).
func dropPrivileges(spec *Spec, lastCap, seccompSock int, notify seccomp.Notify) error {
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
	return installSeccomp(seccompSock, notify)
}
