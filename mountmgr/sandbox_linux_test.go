package mountmgr

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/internal/testutil"
	"github.com/rootfs-dev/rootfs/mountmgr/kpath"
	"github.com/rootfs-dev/rootfs/mountmgr/resolve"
	"github.com/rootfs-dev/rootfs/rootset"
	"github.com/rootfs-dev/rootfs/vfs"
)

// p1Config is what the test tells P1 (the test binary re-exec'd by
// RunDaemon) to do: stand in for the lead's `rootfs run` in P1 with a
// tmpfs holding the placeholders in place of the FUSE view.
type p1Config struct {
	Data   string // host dir that appears as the root entry /data
	Spec   Spec   // NewRoot is filled in by P1
	Action string // "" (wait for the server) or "stop"
	FUSE   bool   // serve the real view (vfs) at the private mount point, Data as its one root
	Kernel bool   // with FUSE: the kernel data path (RootBinds lays /data's bind)
	Layers bool   // make the overlay binds' layers (PrepareLayers), logging to stderr
}

const (
	envHelper = "ROOTFS_TEST_HELPER"
	envP1     = "ROOTFS_TEST_P1"
)

func TestMain(m *testing.M) {
	MaybeRunStage()
	if InDaemon() {
		os.Exit(p1Main())
	}
	switch os.Getenv(envHelper) {
	case "p0":
		code, err := RunDaemon(DaemonOptions{Args: []string{"-test.run=^$"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "p0:", err)
		}
		os.Exit(code)
	case "victim":
		for {
			time.Sleep(time.Hour)
		}
	case "preflight":
		json.NewEncoder(os.Stdout).Encode(Preflight())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func p1Main() int {
	var cfg p1Config
	if err := json.Unmarshal([]byte(os.Getenv(envP1)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "p1: config:", err)
		return 125
	}
	mnt, cleanup, err := PrivateMountDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "p1:", err)
		return 125
	}
	defer cleanup()
	spec := cfg.Spec
	spec.NewRoot = mnt
	if !cfg.FUSE {
		if err := PreparePlaceholders(mnt, Placeholders(&spec)); err != nil {
			fmt.Fprintln(os.Stderr, "p1:", err)
			return 125
		}
	}
	if cfg.FUSE {
		// The product path: the view, with Data as its root entry "data".
		view := vfs.NewView(vfs.Options{Placeholders: Placeholders(&spec), BoundEntries: cfg.Kernel})
		defer view.Close()
		if _, err := view.Install([]rootset.Root{{URI: cfg.Data}}); err != nil {
			fmt.Fprintln(os.Stderr, "p1:", err)
			return 125
		}
		m, err := view.Mount(mnt, vfs.MountOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "p1:", err)
			return 125
		}
		defer m.Unmount()
		if cfg.Kernel {
			b, err := kpath.NewRootBinds(m.Dir(), view, kpath.RootBindsOptions{NoWatch: cfg.Action == "relay-nowatch"})
			if err != nil {
				fmt.Fprintln(os.Stderr, "p1:", err)
				return 125
			}
			defer b.Close()
			if strings.HasPrefix(cfg.Action, "relay") {
				return relayCheck(mnt, cfg.Data)
			}
		}
	} else if cfg.Data != "" {
		d := filepath.Join(mnt, "data")
		if err := os.Mkdir(d, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "p1:", err)
			return 125
		}
		if err := linux.Mount(cfg.Data, d, "", unix.MS_BIND, ""); err != nil {
			fmt.Fprintln(os.Stderr, "p1:", err)
			return 125
		}
	}
	for i, a := range spec.Argv {
		spec.Argv[i] = strings.ReplaceAll(a, "{P1PID}", strconv.Itoa(os.Getpid()))
	}
	if cfg.Layers {
		log, _ := zap.NewDevelopment()
		defer PrepareLayers(&spec, log)()
	}
	srv, err := StartServer(context.Background(), &spec, ServerOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "p1:", err)
		var ee *ExecError
		if errors.As(err, &ee) {
			return ee.Code
		}
		return 125
	}
	srv.Stdin.Close()
	if srv.Net != nil { // issue 23: what P2 handed over (net_linux_test.go)
		fmt.Printf("p1-net tun=%v local=%d\n", srv.Net.TUN != nil, len(srv.Net.Local))
		defer srv.Net.Close()
	}
	if cfg.Action == "stop" {
		start := time.Now()
		code := srv.Stop(200 * time.Millisecond)
		fmt.Printf("stopped %d in %s\n", code, time.Since(start).Round(time.Millisecond))
		return 0
	}
	io.Copy(os.Stdout, srv.Stdout)
	return srv.Wait()
}

// fixture is the host side of a sandbox test.
type fixture struct {
	base    string // world-readable dir under /var/tmp (same fs as /usr)
	bin     string // dir holding the probe (only the probe itself is bound read-only)
	probe   string
	data    string // the root entry /data
	secret  string
	token   string
	handle  string
	marker  string
	victim  *exec.Cmd
	sock    string
	abstr   string
	secretD *os.File
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "rootfs-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	f := &fixture{base: base, bin: filepath.Join(base, "bin"), data: filepath.Join(base, "data")}
	for _, d := range []string{f.bin, f.data, filepath.Join(base, "secret")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(f.data, 0o777)
	f.probe = filepath.Join(f.bin, "probe")
	build := exec.Command("go", "build", "-o", f.probe, "github.com/rootfs-dev/rootfs/testcmd/probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build probe: %v\n%s", err, out)
	}
	// A setuid-root copy of the probe inside the root entry (A10).
	b, _ := os.ReadFile(f.probe)
	suid := filepath.Join(f.data, "suid-probe")
	if err := os.WriteFile(suid, b, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(suid, 0, 0)
	if err := unix.Chmod(suid, 0o4755); err != nil {
		t.Fatal(err)
	}
	// A copy with file capabilities cap_net_raw+ep (A9): security.capability
	// v2 = magic 0x02000001 (revision 2, effective), permitted bit 13.
	fcap := filepath.Join(f.data, "fcap-probe")
	if err := os.WriteFile(fcap, b, 0o755); err != nil {
		t.Fatal(err)
	}
	capData := make([]byte, 20)
	binary.LittleEndian.PutUint32(capData[0:], 0x02000001)
	binary.LittleEndian.PutUint32(capData[4:], 1<<13)
	if err := unix.Setxattr(fcap, "security.capability", capData, 0); err != nil {
		t.Fatalf("setcap: %v", err)
	}
	var rnd [8]byte
	f.token = fmt.Sprintf("T1-%x", time.Now().UnixNano())
	f.marker = "rootfs-canary-proc-" + hex.EncodeToString(rnd[:]) + strconv.Itoa(os.Getpid())
	f.secret = filepath.Join(base, "secret", "secret")
	if err := os.WriteFile(f.secret, []byte(f.token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, f.secret, 0)
	if err == nil {
		f.handle = fmt.Sprintf("%d:%s", h.Type(), hex.EncodeToString(h.Bytes()))
	}
	f.secretD, err = os.Open(filepath.Dir(f.secret))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.secretD.Close() })
	// The victim: a host process of the same uid (B1, B2, B5, B9).
	f.victim = exec.Command(os.Args[0], "-test.run=^$", f.marker)
	f.victim.Env = append(os.Environ(), envHelper+"=victim")
	if err := f.victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.victim.Process.Kill(); f.victim.Wait() })
	// Host sockets answering the token (E5, E6).
	f.sock = filepath.Join(os.TempDir(), fmt.Sprintf("rootfs-canary-%d.sock", os.Getpid()))
	f.abstr = fmt.Sprintf("rootfs-canary-%d", os.Getpid())
	for _, addr := range []string{f.sock, "@" + f.abstr} {
		os.Remove(addr)
		l, err := net.Listen("unix", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, f.token)
				c.Close()
			}
		}()
	}
	t.Cleanup(func() { os.Remove(f.sock) })
	return f
}

func (f *fixture) probeArgs(victims string) []string {
	return []string{"run", "-secret", f.secret, "-token", f.token, "-handle", f.handle, "-victims", victims,
		"-marker", reverse(f.marker), "-sock", f.sock, "-abstract", f.abstr, "-suid", "/data/suid-probe", "-fcap", "/data/fcap-probe", "-rootdir", "/data"}
}

type probeResult struct {
	Case    string `json:"case"`
	Escaped bool   `json:"escaped"`
	Detail  string `json:"detail"`
}

func parseResults(t *testing.T, out string) map[string]probeResult {
	t.Helper()
	res := map[string]probeResult{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r probeResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("probe output %q: %v", sc.Text(), err)
		}
		res[r.Case] = r
	}
	return res
}

// openPTY returns a pty master and its slave (E1 needs a real terminal).
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// runSandbox runs P0 (the test binary) -> P1 -> P2 -> P3 = argv.
type sandboxRun struct {
	cfg        p1Config
	extraFiles []*os.File
	stderr     *os.File // nil: a pipe, logged
	cred       *syscall.Credential
	exe        string // test binary to run (a copy for the unprivileged test)
}

func runSandbox(t *testing.T, r sandboxRun) (string, int) {
	t.Helper()
	cfgJSON, _ := json.Marshal(r.cfg)
	exe := r.exe
	if exe == "" {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=p0", envP1+"="+string(cfgJSON), "ROOTFS_CANARY_ENV=T4")
	cmd.ExtraFiles = r.extraFiles
	var stderr bytes.Buffer
	if r.stderr != nil {
		cmd.Stderr = r.stderr
	} else {
		cmd.Stderr = &stderr
	}
	if r.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	}
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if stderr.Len() > 0 {
		t.Logf("sandbox stderr:\n%s", stderr.String())
	}
	return string(out), code
}

func (f *fixture) spec(args ...string) Spec {
	env, _ := BuildEnv(func(string) string { return "" }, nil, nil)
	return Spec{Argv: append([]string{f.probe}, args...), Env: env, TmpSize: "16m"}
}

// allCases must match testcmd/probe's list: a case missing from the
// output fails the test.
var allCases = []string{
	"caps", "chroot", "dotdot", "cwd", "fds", "setns", "mount", "fsopen", "open_tree", "mknod", "suid", "fcap", "nosuid",
	"pids", "procroot", "proccwd", "procfd", "ptrace", "process_vm_readv", "kill",
	"unshare", "clone_userns", "open_by_handle_at", "keyctl", "i386", "syscalls",
	"tiocsti", "env", "unix_path", "unix_abstract", "sys", "shadow", "proc_sys_write", "sysrq",
}

// controlUnavailable lists cases whose target a host may lack (containers
// mask /proc/sysrq-trigger); their control is skipped only on ENOENT.
var controlUnavailable = map[string]string{"sysrq": "/proc/sysrq-trigger absent", "i386": "no IA32 emulation"}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// TestProbeBattery runs the escape probe outside (negative control: each
// case must escape there, showing the attack is real) and inside the
// sandbox (each must be contained).
func TestProbeBattery(t *testing.T) {
	testutil.RequireRoot(t)
	t.Run("dir", func(t *testing.T) { probeBattery(t, false) })
	t.Run("fuse", func(t *testing.T) {
		testutil.RequireFUSE(t)
		probeBattery(t, true)
	})
	t.Run("kernel", func(t *testing.T) {
		testutil.RequireFUSE(t)
		requireKernelPath(t)
		probeBattery(t, true, true)
	})
}

// requireKernelPath skips where the kernel data path cannot work (Linux
// before 5.12); rootfs run falls back to the daemon path there.
func requireKernelPath(t *testing.T) {
	t.Helper()
	if err := kpath.KernelPathSupported(); err != nil {
		testutil.Skip(t, err.Error())
	}
}

func probeBattery(t *testing.T, fuse bool, kernel ...bool) {
	kpath := len(kernel) > 0 && kernel[0]
	f := newFixture(t)
	victim := strconv.Itoa(f.victim.Process.Pid)

	// Outside, as root, with a terminal on stdin and a leaked dir fd.
	master, slave := openPTY(t)
	var ttyMu sync.Mutex
	var tty bytes.Buffer
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			ttyMu.Lock()
			tty.Write(b[:n])
			ttyMu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		ttyMu.Lock()
		defer ttyMu.Unlock()
		if tty.Len() > 0 {
			t.Logf("terminal (stderr of the sandbox):\n%s", tty.String())
		}
	}()
	outside := exec.Command(f.probe, f.probeArgs(victim)...)
	outside.Args = append(outside.Args[:0:0], outside.Args...)
	for i, a := range outside.Args {
		if a == "/data/suid-probe" || a == "/data/fcap-probe" {
			outside.Args[i] = filepath.Join(f.data, filepath.Base(a))
		}
		if a == "/data" {
			outside.Args[i] = f.data
		}
	}
	outside.Env = append(os.Environ(), "ROOTFS_CANARY_ENV=T4")
	outside.Stdin = slave
	outside.Stderr = os.Stderr
	outside.ExtraFiles = []*os.File{f.secretD}
	outOut, err := outside.Output()
	if err != nil {
		t.Fatalf("outside probe: %v", err)
	}
	out := parseResults(t, string(outOut))
	// The setuid case needs an unprivileged caller to mean anything.
	for _, c := range []string{"suid", "fcap"} {
		cmd := exec.Command(f.probe, "case", c, "-suid", filepath.Join(f.data, "suid-probe"), "-fcap", filepath.Join(f.data, "fcap-probe"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if b, err := cmd.Output(); err == nil {
			for k, v := range parseResults(t, string(b)) {
				out[k] = v
			}
		} else {
			t.Errorf("outside %s probe as nobody: %v", c, err)
		}
	}

	// Inside: stderr is the terminal (what P3 inherits), the dir fd leaks into P0.
	spec := f.spec(f.probeArgs(victim + ",{P1PID}")...)
	inOut, code := runSandbox(t, sandboxRun{cfg: p1Config{Data: f.data, Spec: spec, FUSE: fuse, Kernel: kpath}, extraFiles: []*os.File{f.secretD}, stderr: slave})
	if code != 0 {
		t.Fatalf("sandboxed probe exit status %d, output:\n%s", code, inOut)
	}
	in := parseResults(t, inOut)

	for _, c := range allCases {
		o, ok1 := out[c]
		i, ok2 := in[c]
		if !ok1 || !ok2 {
			t.Errorf("%s: missing result (outside %v, inside %v)", c, ok1, ok2)
			continue
		}
		if !o.Escaped && controlUnavailable[c] != "" && (strings.Contains(o.Detail, "ENOENT") || strings.Contains(o.Detail, "ENOSYS")) {
			t.Logf("%s: no negative control on this host (%s): %s", c, controlUnavailable[c], o.Detail)
		} else if !o.Escaped {
			t.Errorf("%s: negative control did not escape outside the sandbox, so the case proves nothing: %s", c, o.Detail)
		}
		if i.Escaped {
			t.Errorf("%s: ESCAPED inside the sandbox: %s", c, i.Detail)
		}
		if c != "i386" && strings.HasPrefix(i.Detail, "case process failed") {
			t.Errorf("%s: the case crashed inside, so it proves nothing: %s", c, i.Detail)
		}
		if c == "i386" && i.Detail != "case process failed: signal: bad system call" {
			t.Errorf("i386: want the process killed by SIGSYS, got %s", i.Detail)
		}
		t.Logf("%-18s outside: %-7v inside: contained=%v  (%s)", c, o.Escaped, !i.Escaped, i.Detail)
	}
}

// TestMountTable checks /proc/self/mountinfo inside the sandbox against the
// expected list (security-battery A1): no host path but the runtime binds,
// the command's directory and the roots, every mount nosuid, and the
// runtime read-only.
func TestMountTable(t *testing.T) {
	testutil.RequireRoot(t)
	t.Run("dir", func(t *testing.T) { mountTable(t, false) })
	t.Run("fuse", func(t *testing.T) {
		testutil.RequireFUSE(t)
		mountTable(t, true, false)
	})
	t.Run("kernel", func(t *testing.T) {
		testutil.RequireFUSE(t)
		requireKernelPath(t)
		mountTable(t, true, true)
	})
}

func mountTable(t *testing.T, fuse bool, kernel ...bool) {
	kpath := len(kernel) > 0 && kernel[0]
	f := newFixture(t)
	spec := f.spec("mountinfo")
	out, code := runSandbox(t, sandboxRun{cfg: p1Config{Data: f.data, Spec: spec, FUSE: fuse, Kernel: kpath}})
	if code != 0 {
		t.Fatalf("exit status %d", code)
	}
	t.Logf("mountinfo inside:\n%s", out)
	want := map[string]bool{"/": true, "/etc": true, "/dev": true, "/dev/shm": true, "/proc": true, "/tmp": true,
		"/var": true, f.probe: true, "/data": !fuse || kpath} // with the view, /data is an entry, not a mount (but for its bind on the kernel path)
	// Host paths allowed as a bind's root: the command itself (never its
	// directory) and the data root.
	hostOK := map[string]bool{f.probe: true, f.data: true}
	for _, d := range DefaultRuntimeDirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			want[d] = true
			hostOK[d] = true
		}
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom"} {
		want["/dev/"+d] = true
	}
	for _, e := range DefaultEtcFiles {
		p := filepath.Join("/etc", e)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := filepath.EvalSymlinks(p)
			if target == "" || strings.HasPrefix(target, "/usr/") {
				continue // recreated as a symlink into /usr
			}
			p = target
			hostOK[target] = true
			want[filepath.Join("/etc", e)] = true
			continue
		}
		want[p] = true
		hostOK[p] = true
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Fields(l)
		if len(fields) < 10 {
			t.Fatalf("bad mountinfo line %q", l)
		}
		root, mp, opts := linux.UnescapeMountinfo(fields[3]), linux.UnescapeMountinfo(fields[4]), fields[5]
		sep := 6
		for fields[sep] != "-" {
			sep++
		}
		fstype := fields[sep+1]
		seen[mp] = true
		if strings.HasPrefix(mp, "/proc/") {
			continue // runc-style masks and read-only binds inside the fresh proc
		}
		if mp == "/" && fuse && fstype != "fuse.rootfs" {
			t.Errorf("root is %s, want the view (fuse.rootfs)", fstype)
		}
		if !want[mp] {
			t.Errorf("unexpected mount point %s (%s, root %s)", mp, fstype, root)
		}
		if fstype == "ext4" || fstype == "xfs" || fstype == "btrfs" || fstype == "overlay" {
			if !hostOK[root] {
				t.Errorf("mount %s exposes host path %s", mp, root)
			}
		}
		if !strings.Contains(opts, "nosuid") {
			t.Errorf("mount %s is not nosuid: %s", mp, opts)
		}
		if !strings.HasPrefix(mp, "/dev/") && !strings.Contains(opts, "nodev") {
			t.Errorf("mount %s is not nodev: %s", mp, opts)
		}
		ro := mp == "/etc" || strings.HasPrefix(mp, "/etc/") || mp == "/usr" || mp == "/var" || mp == f.probe || mp == "/dev"
		if ro && !strings.HasPrefix(opts, "ro") {
			t.Errorf("mount %s should be read-only: %s", mp, opts)
		}
		if mp == "/proc" && !strings.Contains(l, "hidepid=invisible") && !strings.Contains(l, "hidepid=2") {
			t.Errorf("proc without hidepid: %s", l)
		}
	}
	for mp, w := range want {
		if w && !seen[mp] {
			t.Errorf("expected mount point %s missing", mp)
		}
	}
}

// TestShellRuns runs a real program from the read-only runtime: it reads
// and writes the root entry, writes /dev/null and /tmp, resolves a user,
// and its exit status comes back through P2, P1 and P0.
func TestShellRuns(t *testing.T) {
	testutil.RequireRoot(t)
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.data, "in.txt"), []byte("hello from the root\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh, err := resolve.Command("sh", DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := BuildEnv(func(string) string { return "" }, []string{"GREETING=hi"}, nil)
	spec := Spec{Argv: []string{sh, "-c", `set -e
cat /data/in.txt
echo "$GREETING" > /data/out.txt
echo x > /dev/null
echo y > /tmp/y
id -u
pwd
ls / | tr '\n' ' '
echo
exit 7`}, Env: env}
	out, code := runSandbox(t, sandboxRun{cfg: p1Config{Data: f.data, Spec: spec}})
	if code != 7 {
		t.Fatalf("exit status %d, want 7; output:\n%s", code, out)
	}
	if !strings.Contains(out, "hello from the root") {
		t.Errorf("output %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(f.data, "out.txt")); string(b) != "hi\n" {
		t.Errorf("write through the root: %q", b)
	}
	t.Logf("output:\n%s", out)
}

// TestExecErrors: a command that cannot be exec'd inside gives 126, one
// that vanished gives 127, both as *ExecError from StartServer.
func TestExecErrors(t *testing.T) {
	testutil.RequireRoot(t)
	f := newFixture(t)
	noexec := filepath.Join(f.bin, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o755)
	for _, tc := range []struct {
		name string
		argv string
		want int
	}{
		{"not executable", filepath.Join(f.bin, "noexec"), 126},
		{"missing interpreter", filepath.Join(f.bin, "badinterp"), 127},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == 127 {
				os.WriteFile(tc.argv, []byte("#!/nonexistent/interp\n"), 0o755)
			} else {
				os.Chmod(tc.argv, 0o644)
			}
			spec := Spec{Argv: []string{tc.argv}}
			_, code := runSandbox(t, sandboxRun{cfg: p1Config{Spec: spec}})
			if code != tc.want {
				t.Errorf("exit status %d, want %d", code, tc.want)
			}
		})
	}
}

// TestStop: Stop with the server ignoring its closed stdin escalates to
// SIGTERM (forwarded by P2) and returns 128+15.
func TestStop(t *testing.T) {
	testutil.RequireRoot(t)
	f := newFixture(t)
	spec := f.spec("sleep", "x")
	out, code := runSandbox(t, sandboxRun{cfg: p1Config{Spec: spec, Action: "stop"}})
	if code != 0 || !strings.HasPrefix(out, "stopped 143 ") {
		t.Fatalf("status %d, output %q", code, out)
	}
	t.Log(strings.TrimSpace(out))
}

// TestKill9LeavesNothing: SIGKILL of P0 in the middle of a session takes
// P1, P2 and the server with it, and no mount appears on the host.
func TestKill9LeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	t.Run("dir", func(t *testing.T) { kill9(t, false) })
	t.Run("fuse", func(t *testing.T) {
		testutil.RequireFUSE(t)
		kill9(t, true)
	})
}

func kill9(t *testing.T, fuse bool) {
	f := newFixture(t)
	marker := "kill9-" + reverse(f.marker)
	spec := f.spec("sleep", marker)
	cfgJSON, _ := json.Marshal(p1Config{Spec: spec, Data: f.data, FUSE: fuse})
	p0 := exec.Command(os.Args[0], "-test.run=^$")
	p0.Env = append(os.Environ(), envHelper+"=p0", envP1+"="+string(cfgJSON))
	p0.Stderr = os.Stderr
	if err := p0.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p0.Process.Kill(); p0.Wait() })
	var pids []int
	deadline := time.Now().Add(20 * time.Second)
	for len(pids) == 0 {
		if time.Now().After(deadline) {
			p0.Process.Kill()
			t.Fatal("server never appeared")
		}
		time.Sleep(20 * time.Millisecond)
		pids = findProcs(marker)
	}
	// The chain: P0 -> P1 -> P2 -> server.
	p1 := childrenOf(p0.Process.Pid)
	if len(p1) != 1 {
		t.Fatalf("P0 children: %v", p1)
	}
	// P1's private mount point: a tmpfs named "rootfs" that only its
	// namespace shows, never the host's (checked while it runs and after).
	mi, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", p1[0]))
	private := ""
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 9 && strings.Contains(l, " - tmpfs rootfs ") {
			private = linux.UnescapeMountinfo(f[4])
		}
	}
	if private == "" {
		t.Fatalf("P1's namespace does not show its private tmpfs:\n%s", mi)
	}
	hostHas := func() bool {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		return bytes.Contains(b, []byte(" "+private+" ")) || bytes.Contains(b, []byte(" "+private+"/"))
	}
	if hostHas() {
		t.Errorf("host mount table shows P1's private mount %s", private)
	}
	chain := append(append([]int{}, p1...), childrenOf(p1[0])...)
	chain = append(chain, pids...)
	if err := p0.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p0.Wait()
	deadline = time.Now().Add(20 * time.Second)
	for {
		var alive []int
		for _, p := range chain {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); err == nil && !bytes.Contains(b, []byte(") Z ")) {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 && len(findProcs(marker)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still alive after kill -9 of P0: %v", alive)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if hostHas() {
		t.Errorf("host mount table shows %s after kill -9", private)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(b, []byte(f.bin)) {
		t.Errorf("host mount table shows a mount of the sandbox:\n%s", b)
	}
	t.Logf("killed P0 %d; P1, P2 and server %v gone; %s never visible on the host", p0.Process.Pid, chain, private)
}

func findProcs(marker string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(b, []byte(marker)) {
			out = append(out, pid)
		}
	}
	return out
}

// childrenOf lists pid's children over all its threads (Go forks from
// whichever thread runs the goroutine).
func childrenOf(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			out = append(out, n)
		}
	}
	return out
}

// copyTestBinary puts a copy of the test binary where an unprivileged user
// can execute it.
func copyTestBinary(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "mountmgr.test")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

var nobody = &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: false, Groups: []uint32{}}

// TestUnprivileged runs the whole chain as uid 65534: P1 in a user
// namespace (ns root mapped to 65534), the same sandbox, the same probe.
// Where the machine forbids unprivileged user namespaces, it checks the
// one-line refusal instead.
func TestUnprivileged(t *testing.T) {
	testutil.RequireRoot(t)
	f := newFixture(t)
	exe := copyTestBinary(t, f.base)

	pf := exec.Command(exe, "-test.run=^$")
	pf.Env = append(os.Environ(), envHelper+"=preflight")
	pf.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
	b, err := pf.Output()
	if err != nil {
		t.Fatalf("preflight as nobody: %v", err)
	}
	var findings []Finding
	if err := json.Unmarshal(b, &findings); err != nil {
		t.Fatal(err)
	}
	userns := findings[0]
	t.Logf("preflight as nobody: %v", findings)
	if userns.Name != "userns" {
		t.Fatalf("first finding %q, want userns", userns.Name)
	}

	victim := strconv.Itoa(f.victim.Process.Pid)
	spec := f.spec(f.probeArgs(victim + ",{P1PID}")...)
	cfg := p1Config{Data: f.data, Spec: spec}
	if !userns.OK {
		// The refusal: exit 125, one line naming what is missing and the fix.
		cfgJSON, _ := json.Marshal(cfg)
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), envHelper+"=p0", envP1+"="+string(cfgJSON))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 125 {
			t.Fatalf("want exit 125, got %v", err)
		}
		msg := strings.TrimSpace(stderr.String())
		if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, userns.Fix) {
			t.Fatalf("refusal %q does not carry the fix %q", msg, userns.Fix)
		}
		t.Logf("unprivileged user namespaces unavailable; refusal: %s", msg)
		return
	}
	inOut, code := runSandbox(t, sandboxRun{cfg: cfg, cred: nobody, exe: exe})
	if code != 0 {
		t.Fatalf("sandboxed probe as nobody: exit status %d:\n%s", code, inOut)
	}
	in := parseResults(t, inOut)

	// Negative control for the cases an unprivileged user can do outside.
	outside := exec.Command(f.probe, f.probeArgs(victim)...)
	outside.Env = append(os.Environ(), "ROOTFS_CANARY_ENV=T4")
	outside.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
	ob, err := outside.Output()
	if err != nil {
		t.Fatalf("outside probe as nobody: %v", err)
	}
	out := parseResults(t, string(ob))
	for _, c := range []string{"clone_userns", "pids", "unix_abstract", "env", "syscalls", "keyctl", "dotdot", "cwd"} {
		if !out[c].Escaped {
			t.Errorf("%s: negative control as nobody did not escape: %s", c, out[c].Detail)
		}
	}
	for _, c := range allCases {
		i, ok := in[c]
		if !ok {
			t.Errorf("%s: missing", c)
			continue
		}
		if i.Escaped {
			t.Errorf("%s: ESCAPED inside the unprivileged sandbox: %s", c, i.Detail)
		}
		t.Logf("%-18s outside(nobody): %-5v inside: contained=%v  (%s)", c, out[c].Escaped, !i.Escaped, i.Detail)
	}
}

// TestPreflightRoot: as root the namespace probe passes.
func TestPreflightRoot(t *testing.T) {
	testutil.RequireRoot(t)
	fs := Preflight()
	for _, f := range fs {
		t.Log(f.String())
	}
	if fs[0].Name != "sandbox" || !fs[0].OK {
		t.Fatalf("namespace probe as root: %v", fs[0])
	}
}

// TestBindsAndNoNetwork: --bind (rw) and --ro-bind (deeper destination on a
// scaffold) land where asked with the right flags; with NoNetwork the host's
// abstract socket is unreachable even without Landlock's help, and lo is up.
func TestBindsAndNoNetwork(t *testing.T) {
	testutil.RequireRoot(t)
	f := newFixture(t)
	rw := filepath.Join(f.base, "cache")
	ro := filepath.Join(f.base, "ro")
	os.Mkdir(rw, 0o755)
	os.Mkdir(ro, 0o755)
	os.WriteFile(filepath.Join(ro, "f"), []byte("ro-content\n"), 0o644)
	sh, _ := resolve.Command("sh", DefaultPath)
	env, _ := BuildEnv(func(string) string { return "" }, nil, nil)
	spec := Spec{
		Argv: []string{sh, "-c", `cat /etc/extra.conf; touch /etc/new 2>/dev/null || echo etc-ro; cat /srv/deep/ro/f; echo w > /cache/w && echo rw-ok; echo x > /srv/deep/ro/x 2>/dev/null || echo ro-refused
cat /proc/net/unix | grep -c rootfs-canary || true
grep -q '^ *lo:' /proc/net/dev && echo lo-present`},
		Env:       env,
		NoNetwork: true,
		Binds: []Bind{{Source: rw, Dest: "/cache"}, {Source: ro, Dest: "/srv/deep/ro", ReadOnly: true},
			{Source: filepath.Join(ro, "f"), Dest: "/etc/extra.conf", ReadOnly: true}},
	}
	out, code := runSandbox(t, sandboxRun{cfg: p1Config{Spec: spec}})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{"ro-content\netc-ro\nro-content", "rw-ok", "ro-refused", "\n0\n", "lo-present"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(rw, "w")); string(b) != "w\n" {
		t.Errorf("rw bind did not write through: %q", b)
	}
	// The abstract socket probe with NoNetwork: refused by the netns.
	spec2 := f.spec(f.probeArgs("1")...)
	spec2.NoNetwork = true
	o2, code := runSandbox(t, sandboxRun{cfg: p1Config{Spec: withOnly(spec2, "unix_abstract")}})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if r := parseResults(t, o2)["unix_abstract"]; r.Escaped || r.Case == "" {
		t.Errorf("abstract socket with NoNetwork: %+v", r)
	} else {
		t.Logf("abstract socket with NoNetwork: %s", r.Detail)
	}
}

func withOnly(s Spec, cases string) Spec {
	s.Env = append(append([]string{}, s.Env...), "PROBE_ONLY="+cases)
	return s
}
