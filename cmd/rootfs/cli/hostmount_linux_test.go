//go:build linux

package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// The host-mount tests: a mount the host makes over a directory of a root
// after the view started shows through the view, and its unmount too, for
// `rootfs run` (read by a command inside the sandbox) and `rootfs mount`.
// Their negative controls run a control build with mountmgr's knobs (the
// propagation before issue 10).

// knobBinary builds cmd/rootfs into a directory every user can read: a
// normal build, or with knobs a control build (-tags rootfs_control) that
// the test's environment tells to turn them on (control.EnvVar, set for
// the test and its subtests; a normal build ignores it).
func knobBinary(t *testing.T, knobs ...control.Knob) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go toolchain not available to build cmd/rootfs")
	}
	dir, err := os.MkdirTemp("", "rootfs-knob-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	p := filepath.Join(dir, "rootfs")
	args := []string{"build", "-o", p}
	if len(knobs) > 0 {
		args = append(args, "-tags", "rootfs_control")
		t.Setenv(control.EnvVar, control.Names(knobs...))
	}
	out, err := exec.Command(goTool, append(args, "github.com/rootfs-dev/rootfs/cmd/rootfs")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s ./cmd/rootfs: %v\n%s", strings.Join(args[3:], " "), err, out)
	}
	return p
}

// hostMounts is the host side: a shared tmpfs (as systemd makes /) holding
// the root ws and a directory other, each with sub/f = "under", and a
// directory over whose f = "over", to bind over ws/sub and other/sub.
type hostMounts struct {
	ws, other, over string
}

func newHostMounts(t *testing.T, owner uint32) *hostMounts {
	t.Helper()
	base, err := os.MkdirTemp("", "rootfs-hostmount-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	shared := filepath.Join(base, "shared")
	os.Mkdir(shared, 0o755)
	if err := unix.Mount("tmpfs", shared, "tmpfs", 0, "mode=0755,size=4m"); err != nil {
		t.Fatalf("tmpfs: %v", err)
	}
	if err := unix.Mount("", shared, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("make shared: %v", err)
	}
	t.Cleanup(func() {
		unix.Unmount(shared, unix.MNT_DETACH)
		os.RemoveAll(base)
	})
	h := &hostMounts{ws: filepath.Join(shared, "ws"), other: filepath.Join(shared, "other"), over: filepath.Join(base, "over")}
	for _, d := range []string{h.ws, h.other} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777)
		os.Chown(d, int(owner), int(owner)) // the user's own workspace
		os.WriteFile(filepath.Join(d, "sub", "f"), []byte("under\n"), 0o644)
	}
	os.Mkdir(h.over, 0o755)
	os.WriteFile(filepath.Join(h.over, "f"), []byte("over\n"), 0o644)
	return h
}

// mount binds over onto dir/sub on the host.
func (h *hostMounts) mount(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Mount(h.over, filepath.Join(dir, "sub"), "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("host bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(dir, "sub"), unix.MNT_DETACH) })
}

// unmount detaches it (lazily: the view may hold the mounted directory).
func (h *hostMounts) unmount(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Unmount(filepath.Join(dir, "sub"), unix.MNT_DETACH); err != nil {
		t.Fatalf("host unmount: %v", err)
	}
}

// waitFile polls for a file a command inside writes, a bounded number of
// times, and reports whether it appeared.
func waitFile(p string, exited <-chan struct{}) bool {
	for range 1200 {
		if _, err := os.Stat(p); err == nil {
			return true
		}
		select {
		case <-exited:
			_, err := os.Stat(p)
			return err == nil
		case <-time.After(25 * time.Millisecond):
		}
	}
	return false
}

// hostMountScript runs inside the sandbox: it reads /ws/sub/f once (so the
// view caches the directory), says ready, polls (at most 200 reads) until
// the host's mount shows, then checks the --ro-bind /other and the mount
// table (the view and, on the kernel data path, the root's bind and what
// is below it are slaves of P1's on purpose; nothing else may be), says so,
// polls until the unmount shows, and reports.
const hostMountScript = `
first=$(cat /ws/sub/f)
: > /ws/ready
n=0; seen=0
while [ $n -lt 200 ]; do n=$((n+1)); if [ "$(cat /ws/sub/f 2>/dev/null)" = over ]; then seen=$n; break; fi; sleep 0.05; done
leak=$(cat /other/sub/f 2>/dev/null)
masters=$(awk '$5 != "/" && $5 != "/ws" && index($5, "/ws/") != 1 && / (master|shared):/' /proc/self/mountinfo | wc -l)
: > /ws/phase2
m=0; back=0
while [ $m -lt 200 ]; do m=$((m+1)); if [ "$(cat /ws/sub/f 2>/dev/null)" = under ]; then back=$m; break; fi; sleep 0.05; done
`

var hostMountReport = regexp.MustCompile(`first=(\S*) seen=(\d+)/(\d+) other=(\S*) masters=(\d+) back=(\d+)/(\d+)`)

type hostMountResult struct {
	first, other         string
	seen, tries, masters int
	back, backTries      int
	stdout, stderr       string
	code                 int
}

// runHostMount runs `rootfs run` with the script as uid (0: root) and
// makes the host mounts while it runs.
func runHostMount(t *testing.T, bin string, uid uint32) hostMountResult {
	t.Helper()
	h := newHostMounts(t, uid)
	script := hostMountScript + say("first=$first seen=$seen/$n other=$leak masters=$masters back=$back/$m")
	// The script names the root /ws: flat layout.
	cmd := exec.Command(bin, "run", "--layout", "flat", "--root", h.ws, "--ro-bind", h.other+":/other", "--", "/bin/sh", "-c", script)
	cmd.Dir = "/"
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	cmd.Stdin = pr
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() { cmd.Process.Kill(); <-exited }()

	if !waitFile(filepath.Join(h.ws, "ready"), exited) {
		<-exited
		t.Fatalf("the command inside never got ready: stdout %q stderr %q", out.String(), errb.String())
	}
	// P1 and P2 receive from the host; nothing of theirs reaches it.
	viewAt := viewMountPoint(cmd.Process.Pid)
	if viewAt == "" {
		t.Errorf("could not find the view's mount point in P1's mount table")
	} else if hostHasMountPoint(viewAt) {
		t.Errorf("the view's mount %s propagated to the host's mount table", viewAt)
	}
	h.mount(t, h.other)
	h.mount(t, h.ws)
	if !waitFile(filepath.Join(h.ws, "phase2"), exited) {
		t.Fatalf("the command inside never finished polling: stderr %q", errb.String())
	}
	h.unmount(t, h.ws)
	h.unmount(t, h.other)
	<-exited
	r := hostMountResult{stdout: out.String(), stderr: errb.String()}
	if ee, ok := waitErr.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	}
	m := hostMountReport.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no report: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r.first, r.other = m[1], m[4]
	fmt.Sscan(m[2], &r.seen)
	fmt.Sscan(m[3], &r.tries)
	fmt.Sscan(m[5], &r.masters)
	fmt.Sscan(m[6], &r.back)
	fmt.Sscan(m[7], &r.backTries)
	t.Logf("inside: first read %q, mount seen at read %d of %d, /other/sub/f %q, %d mounts receiving propagation, unmount seen at read %d of %d",
		r.first, r.seen, r.tries, r.other, r.masters, r.back, r.backTries)
	return r
}

// viewMountPoint returns where P1 (a child of P0, pid p0) mounted the view,
// from P1's own mount table.
func viewMountPoint(p0 int) string {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p0))
	for _, tf := range tasks {
		b, _ := os.ReadFile(tf)
		for _, kid := range strings.Fields(string(b)) {
			mi, _ := os.ReadFile("/proc/" + kid + "/mountinfo")
			for _, l := range strings.Split(string(mi), "\n") {
				// PrivateMountDir's <tmp>/rootfs-*/root (P1 also has copies
				// of views other tests mounted on the host).
				if f := strings.Fields(l); len(f) > 4 && strings.Contains(l, " - fuse.rootfs ") &&
					filepath.Base(f[4]) == "root" && strings.HasPrefix(filepath.Base(filepath.Dir(f[4])), "rootfs-") {
					return f[4]
				}
			}
		}
	}
	return ""
}

func hostHasMountPoint(mp string) bool {
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (f[4] == mp || f[4] == filepath.Dir(mp)) {
			return true
		}
	}
	return false
}

// checkHostMount asserts the behaviour the README promises.
func checkHostMount(t *testing.T, r hostMountResult) {
	t.Helper()
	if r.first != "under" {
		t.Errorf("first read %q, want under", r.first)
	}
	if r.seen == 0 {
		t.Errorf("a host mount over a directory of a root was never seen inside (%d reads)", r.tries)
	}
	if r.back == 0 {
		t.Errorf("the host's unmount was never seen inside (%d reads)", r.backTries)
	}
	if r.other != "under" {
		t.Errorf("a host mount below a --ro-bind (not a root) reached the sandbox: /other/sub/f = %q", r.other)
	}
	if r.masters != 0 {
		t.Errorf("%d mounts inside the sandbox receive mounts from outside", r.masters)
	}
}

// TestRunSeesHostMount: as root, with the negative controls (P1 private:
// the mount is never seen; P2's binds left as slaves: a host mount below a
// --ro-bind reaches the sandbox).
func TestRunSeesHostMount(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	t.Run("fixed", func(t *testing.T) {
		checkHostMount(t, runHostMount(t, knobBinary(t), 0))
	})
	t.Run("control-private-daemon", func(t *testing.T) {
		r := runHostMount(t, knobBinary(t, control.NoSlaveDaemon), 0)
		if r.seen != 0 {
			t.Errorf("control: with P1's namespace private the host mount was still seen (read %d): the test shows nothing", r.seen)
		}
	})
	t.Run("control-shared-binds", func(t *testing.T) {
		r := runHostMount(t, knobBinary(t, control.NoPrivateBinds), 0)
		if r.other != "over" || r.masters == 0 {
			t.Errorf("control: with P2's binds left as slaves the host mount below --ro-bind did not show (%q, %d receiving mounts): the test shows nothing", r.other, r.masters)
		}
	})
}

// TestRunSeesHostMountUnprivileged: the same as nobody (P1 in a user
// namespace, no host watcher: the kernel's 1s cache), with /dev/fuse
// opened to other users for the length of the test.
func TestRunSeesHostMountUnprivileged(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	st, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod("/dev/fuse", st.Mode().Perm()) })
	// Opened to others before each run (another test may restore it meanwhile).
	openFUSE := func(t *testing.T) {
		if err := os.Chmod("/dev/fuse", 0o666); err != nil {
			t.Fatal(err)
		}
	}
	probe := exec.Command("/bin/sh", "-c", "exec unshare -Urm true")
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := probe.Run(); err != nil {
		t.Skipf("no unprivileged user namespaces here: %v", err)
	}
	t.Run("fixed", func(t *testing.T) {
		bin := knobBinary(t)
		openFUSE(t)
		checkHostMount(t, runHostMount(t, bin, 65534))
	})
	t.Run("control-private-daemon", func(t *testing.T) {
		bin := knobBinary(t, control.NoSlaveDaemon)
		openFUSE(t)
		r := runHostMount(t, bin, 65534)
		if r.seen != 0 {
			t.Errorf("control: with P1's namespace private the host mount was still seen (read %d): the test shows nothing", r.seen)
		}
	})
	t.Run("control-shared-binds", func(t *testing.T) {
		bin := knobBinary(t, control.NoPrivateBinds)
		openFUSE(t)
		r := runHostMount(t, bin, 65534)
		if r.other != "over" || r.masters == 0 {
			t.Errorf("control: with P2's binds left as slaves the host mount below --ro-bind did not show (%q, %d receiving mounts): the test shows nothing", r.other, r.masters)
		}
	})
}

// TestMountSeesHostMount: `rootfs mount` serves in the host's own mount
// namespace; a host mount over a directory it has cached, and the unmount,
// show through it: as root through the host watcher, with --no-host-watch
// when the kernel's 1s cache runs out, and as nobody (no watcher either)
// the same.
func TestMountSeesHostMount(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	bin := knobBinary(t)
	t.Run("watched", func(t *testing.T) { mountSeesHostMount(t, bin, 0) })
	t.Run("no-host-watch", func(t *testing.T) { mountSeesHostMount(t, bin, 0, "--no-host-watch") })
	t.Run("unprivileged", func(t *testing.T) {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			t.Skip("fusermount3 not installed")
		}
		st, err := os.Stat("/dev/fuse")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod("/dev/fuse", st.Mode().Perm()) })
		if err := os.Chmod("/dev/fuse", 0o666); err != nil {
			t.Fatal(err)
		}
		mountSeesHostMount(t, bin, 65534)
	})
}

func mountSeesHostMount(t *testing.T, bin string, uid uint32, flags ...string) {
	h := newHostMounts(t, uid)
	dir, err := os.MkdirTemp("", "rootfs-hostmount-view-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	mp := filepath.Join(dir, "view")
	os.Mkdir(mp, 0o755)
	os.Chown(mp, int(uid), int(uid))
	t.Cleanup(func() {
		if mountedAt(mp) {
			unix.Unmount(mp, unix.MNT_DETACH)
		}
		os.RemoveAll(dir)
	})
	var cred *syscall.Credential
	if uid != 0 {
		cred = &syscall.Credential{Uid: uid, Gid: uid}
	}
	p := startMountAs(t, cred, bin, append(flags, "--root", h.ws, mp)...)
	if !p.waitFor("mounted") {
		t.Fatalf("mount did not start: %s", p.output())
	}
	f := filepath.Join(mp, "ws", "sub", "f")
	read := func() string { // as the mount's owner: a FUSE mount refuses other users
		cmd := exec.Command("/bin/cat", f)
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		b, _ := cmd.Output()
		return strings.TrimSpace(string(b))
	}
	poll := func(want string) int {
		for i := 1; i <= 200; i++ {
			if read() == want {
				return i
			}
			time.Sleep(50 * time.Millisecond)
		}
		return 0
	}
	if got := read(); got != "under" {
		t.Fatalf("first read %q: %s", got, p.output())
	}
	h.mount(t, h.ws)
	seen := poll("over")
	if seen == 0 {
		t.Fatalf("a host mount over a cached directory of a root was not seen through rootfs mount in 200 reads")
	}
	h.unmount(t, h.ws)
	back := poll("under")
	if back == 0 {
		t.Fatalf("the host's unmount was not seen through rootfs mount in 200 reads")
	}
	t.Logf("mount seen at read %d, unmount at read %d", seen, back)
}

// TestRunReadOnlySQLite: inside `rootfs run --read-only --strict`, a SQLite
// reader reads, and while it holds a read transaction open a host process
// still commits to the same database. On the kernel data path the kernel
// serves the file and the reader's lock is a host lock, which blocks the
// commit as a reader on the host would. The control runs the same reader on a
// writable root, where its lock reaches the host and the host's commit
// fails with "database is locked".
func TestRunReadOnlySQLite(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("sqlite3 not installed (Debian package sqlite3)")
	}
	bin := knobBinary(t)
	for _, tc := range []struct {
		name   string
		ro     bool
		strict bool
	}{{"read-only", true, true}, {"read-only-kernel-path", true, false}, {"writable-control", false, true}} {
		ro, name := tc.ro, tc.name
		t.Run(name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "rootfs-sqlite-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			os.Chmod(dir, 0o755)
			r := filepath.Join(dir, "r")
			os.Mkdir(r, 0o755)
			db := filepath.Join(r, "db")
			if out, err := exec.Command(sqlite, db, "CREATE TABLE t(x); INSERT INTO t VALUES(1);").CombinedOutput(); err != nil {
				t.Fatalf("create db: %v %s", err, out)
			}
			script := `mkfifo /tmp/p
sqlite3 -readonly R/db < /tmp/p > /tmp/out 2>&1 &
exec 3>/tmp/p
echo "BEGIN; SELECT count(*) FROM t;" >&3
n=0; while [ ! -s /tmp/out ] && [ $n -lt 400 ]; do n=$((n+1)); sleep 0.05; done
` + say("holding $(cat /tmp/out)") + `
n=0; while [ ! -e R/done ] && [ $n -lt 400 ]; do n=$((n+1)); sleep 0.05; done
echo "COMMIT;" >&3; exec 3>&-; wait
` + say("after $(sqlite3 -readonly R/db 'SELECT count(*) FROM t;' 2>&1)")
			script = strings.ReplaceAll(script, "R/", r+"/")
			args := []string{"run", "--root", r, "--strict=" + strconv.FormatBool(tc.strict)}
			if ro {
				args = append(args, "--read-only")
			}
			cmd := exec.Command(bin, append(args, "--", "/bin/sh", "-c", script)...)
			cmd.Dir = "/"
			pr, pw, _ := os.Pipe()
			defer pw.Close()
			cmd.Stdin = pr
			var errb bytes.Buffer
			cmd.Stderr = &errb
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pr.Close()
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			lines := make(chan string, 4)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			next := func(want string) string {
				for l := range lines {
					if strings.Contains(l, want) {
						return l
					}
				}
				t.Fatalf("rootfs ended before %q: stderr %s", want, errb.String())
				return ""
			}
			if l := next(`"holding`); !strings.Contains(l, `"holding 1"`) {
				t.Fatalf("reader inside: %s", l)
			}
			hostOut, hostErr := exec.Command(sqlite, db, "INSERT INTO t VALUES(2);").CombinedOutput()
			os.WriteFile(filepath.Join(r, "done"), nil, 0o644)
			after := next(`"after`)
			t.Logf("host commit while the reader inside holds a transaction: %v %s; then inside: %s", hostErr, strings.TrimSpace(string(hostOut)), after)
			switch {
			case ro && !tc.strict && (hostErr == nil || !strings.Contains(string(hostOut), "locked")):
				// The kernel serves the file: the reader's lock is the host's
				// own, as any host reader's (README, Data paths).
				t.Errorf("kernel path: the reader's lock did not reach the host (%v %s)", hostErr, hostOut)
			case ro && !tc.strict:
			case ro && hostErr != nil:
				t.Errorf("a reader inside rootfs run --read-only blocked a host commit: %v %s", hostErr, hostOut)
			case ro && !strings.Contains(after, `"after 2"`):
				t.Errorf("the reader inside did not see the host's commit afterwards: %s", after)
			case !ro && (hostErr == nil || !strings.Contains(string(hostOut), "locked")):
				t.Errorf("control: the reader on a writable root did not block the host commit (%v %s): the test shows nothing", hostErr, hostOut)
			}
		})
	}
}
