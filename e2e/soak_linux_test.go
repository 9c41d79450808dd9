package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestSoak runs ROOTFS_SOAK sessions of the naive server under rootfs run
// (scripts/soak; skipped when ROOTFS_SOAK is unset), one after another,
// each ended one of five ways in rotation, with its roots below /tmp, out
// of /tmp or both (in rotation too), and a roots change in half of them
// (in a quarter right before the end). After each it checks that rootfs
// exited with the documented status, that no process of the session is
// left (by marker, and every process that descended from rootfs), that
// the session's mount namespaces (the daemon's and the sandbox's) are
// gone, and that the host's mount table gained nothing of the session's. It ends with one
// line: "soak: N passed, M failed".
func TestSoak(t *testing.T) {
	v := os.Getenv("ROOTFS_SOAK")
	if v == "" {
		t.Skip("a soak: runs only with ROOTFS_SOAK=N sessions (scripts/soak)")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("ROOTFS_SOAK=%q: want a number of sessions", v)
	}
	naive := buildNaive(t)
	rootfs := buildRootfs(t)

	// Roots below /tmp (the sandbox shows them through a mount in its own
	// /tmp that the daemon makes from a thread in the sandbox's mount
	// namespace) and elsewhere (only in the view).
	tmpF := newFixture(t, "soak-a", "soak-b")
	if !strings.HasPrefix(tmpF.base, "/tmp/") {
		t.Fatalf("the fixture is not below /tmp (%s): set TMPDIR=/tmp", tmpF.base)
	}
	outDir, err := os.MkdirTemp("/var/tmp", "rootfs-soak-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outDir) })
	outF := newFixtureIn(t, outDir, "soak-c", "soak-d")

	rootSets := []struct {
		name          string
		first, second []mcpRoot
		firstPath     string
		secondPath    string
	}{
		{"tmp", tmpF.rootsFor("soak-a"), tmpF.rootsFor("soak-b"), tmpF.v("soak-a"), tmpF.v("soak-b")},
		{"elsewhere", outF.rootsFor("soak-c"), outF.rootsFor("soak-d"), outF.v("soak-c"), outF.v("soak-d")},
		{"both", append(tmpF.rootsFor("soak-a"), outF.rootsFor("soak-c")...), append(tmpF.rootsFor("soak-b"), outF.rootsFor("soak-d")...), tmpF.v("soak-a"), outF.v("soak-d")},
	}

	var mu sync.Mutex
	var took []time.Duration // end to rootfs's exit, per passed session
	byEnd := map[string][2]int{}
	statuses := map[string]map[int]int{} // ending -> exit status -> sessions
	start := time.Now()
	passed, failed := 0, 0
	for i := range n {
		end := soakEnds[i%soakEndCount]
		rs := rootSets[i%len(rootSets)]
		change := []string{"none", "waited", "none", "at-end"}[i%4]
		name := fmt.Sprintf("%03d-%s-%s-%s", i, end.name, rs.name, change)
		ok := t.Run(name, func(t *testing.T) {
			s := soakSession(t, rootfs, naive, rs.first, rs.firstPath)
			if s == nil {
				return
			}
			switch change {
			case "waited":
				s.p.setRoots(rs.second)
				if err := s.p.visible(rs.secondPath, 15*time.Second); err != nil {
					t.Errorf("the changed roots never showed: %v\nstderr:\n%s", err, s.p.stderr)
					return
				}
			case "at-end":
				s.p.setRoots(rs.second)
			}
			d := s.end(t, end, i)
			mu.Lock()
			defer mu.Unlock()
			if statuses[end.name] == nil {
				statuses[end.name] = map[int]int{}
			}
			statuses[end.name][s.status]++
			if !t.Failed() {
				took = append(took, d)
			}
		})
		c := byEnd[end.name]
		if ok {
			passed++
			c[0]++
		} else {
			failed++
			c[1]++
		}
		byEnd[end.name] = c
		if (i+1)%50 == 0 && i+1 < n {
			fmt.Printf("soak: %d/%d sessions, %d failed, %v\n", i+1, n, failed, time.Since(start).Round(time.Second))
		}
	}
	slices.Sort(took)
	pct := func(p float64) time.Duration {
		if len(took) == 0 {
			return 0
		}
		return took[min(len(took)-1, int(p*float64(len(took))))].Round(time.Millisecond)
	}
	var ends []string
	for _, e := range soakEnds {
		c := byEnd[e.name]
		var st []string
		for code, k := range statuses[e.name] {
			st = append(st, fmt.Sprintf("%d x%d", code, k))
		}
		sort.Strings(st)
		ends = append(ends, fmt.Sprintf("%s %d/%d (exit %s)", e.name, c[0], c[0]+c[1], strings.Join(st, " ")))
	}
	fmt.Printf("soak: %d sessions in %v; passed by ending: %s\n", n, time.Since(start).Round(time.Second), strings.Join(ends, ", "))
	fmt.Printf("soak: rootfs exited after the end in p50 %v, p95 %v, max %v\n", pct(0.5), pct(0.95), pct(1))
	fmt.Printf("soak: %d passed, %d failed\n", passed, failed)
}

// soakEnd is one way a session ends, and the exit statuses rootfs run
// documents for it (want: those for session i).
type soakEnd struct {
	name string
	want func(i int) (statuses []int, why string)
}

// soakEndCount is len(soakEnds): session i ends the way i%soakEndCount says.
const soakEndCount = 5

var soakEnds = [soakEndCount]soakEnd{
	// The client closes rootfs's stdin and reads on: rootfs closes the
	// server's stdin, and exits with the server's status (the naive
	// server exits 0 at end of input).
	{"client-closes", func(int) ([]int, string) { return []int{0}, "the server's status after its stdin closed" }},
	// The client dies (SIGKILL): the kernel closes both of its pipe ends,
	// rootfs's stdin and stdout, at once. Nobody is left to read the
	// status, but it is the same.
	{"client-killed", func(int) ([]int, string) { return []int{0}, "the server's status after its stdin closed" }},
	// The server dies in the middle of a request, of SIGKILL or exiting 3
	// (alternately).
	{"server-crash", func(i int) ([]int, string) {
		if (i/soakEndCount)%2 == 0 {
			return []int{128 + 9}, "128+9: the server was killed by SIGKILL"
		}
		return []int{3}, "the server's status"
	}},
	// The server exits 0 in the middle of a request.
	{"server-exit-0", func(int) ([]int, string) { return []int{0}, "the server's status" }},
	// SIGTERM to rootfs: it closes the server's stdin and passes the
	// signal on, and exits with the server's status: 128+15 if the server
	// dies of the signal, 0 if it ends at end of input first.
	{"sigterm", func(int) ([]int, string) {
		return []int{0, 128 + 15}, "the server's status: it ends at end of input or dies of the SIGTERM rootfs passed on"
	}},
}

var soakNoNSCheck sync.Once

// session is one rootfs run whose processes and namespaces were recorded
// once it worked.
type session struct {
	p      *rawPeer
	mark   string
	before string      // the host's mountinfo before it started
	procs  []procIdent // rootfs and every process below it
	ns     []string    // "mnt:[N]" of the daemon (P1) and the sandbox (P2)
	nsID   []uint64    // their ids (never reused); nil where the kernel gives none
	view   string      // where P1 mounted the view, in its namespace
	// hostPaths are the first roots' host directories.
	hostPaths []string
	status    int // rootfs's exit status
}

// daemonNamespace returns the mount namespace most of pid's threads are in.
func daemonNamespace(pid int) string {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, _ := os.ReadDir(dir)
	count := map[string]int{}
	best := ""
	for _, e := range ents {
		if ns, err := os.Readlink(filepath.Join(dir, e.Name(), "ns", "mnt")); err == nil {
			count[ns]++
			if count[ns] > count[best] {
				best = ns
			}
		}
	}
	return best
}

// daemonThreadIn returns a thread of pid in mount namespace ns (pid if none).
func daemonThreadIn(pid int, ns string) int {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name(), "ns", "mnt")); err == nil && l == ns {
			tid, _ := strconv.Atoi(e.Name())
			return tid
		}
	}
	return pid
}

// procIdent is a process by pid and start time (pids are reused).
type procIdent struct {
	pid   int
	start string
	cmd   string
}

// soakSession starts rootfs with roots, waits until path is served and
// records the session's processes and namespaces. It returns nil after
// reporting a failure.
func soakSession(t *testing.T, rootfs, naive string, roots []mcpRoot, path string) *session {
	t.Helper()
	s := &session{before: hostMountinfo(t), mark: marker()}
	for _, r := range roots {
		s.hostPaths = append(s.hostPaths, strings.TrimPrefix(r.URI, "file://"))
	}
	s.p = startRaw(t, wrap(rootfs, nil, naive, s.mark), roots, true)
	s.p.initialize(true)
	if err := s.p.visible(path, 15*time.Second); err != nil {
		t.Errorf("the session never served its root: %v\nstderr:\n%s", err, s.p.stderr)
		return nil
	}
	p0 := s.p.cmd.Process.Pid
	s.procs = descendants(p0)
	var p1, p2 int
	for _, pr := range s.procs {
		switch ppid := parentOf(pr.pid); {
		case ppid == p0:
			p1 = pr.pid
		case ppid == p1 && p1 != 0 && strings.HasPrefix(pr.cmd, "rootfs-init"):
			p2 = pr.pid
		}
	}
	if p1 == 0 || p2 == 0 || len(s.procs) < 4 {
		t.Errorf("the session's processes are not rootfs, its daemon, the sandbox init and the server: %+v", s.procs)
		return nil
	}
	// The daemon's namespace is the one most of its threads are in: one
	// of them may be in the sandbox's for a moment (a mount below /tmp).
	// The main thread must never be: the runtime never ends it, and there
	// it would keep the sandbox's namespace, with its mount of the view,
	// alive, and the daemon would wait in its unmount forever.
	p1ns := daemonNamespace(p1)
	if mainNS, _ := os.Readlink(fmt.Sprintf("/proc/%d/task/%d/ns/mnt", p1, p1)); mainNS != p1ns {
		t.Errorf("the daemon's main thread is in mount namespace %s, not the daemon's %s:\n  %s",
			mainNS, p1ns, strings.Join(threadNamespaces(p1), "\n  "))
	}
	for _, pid := range []int{p1, p2} {
		path := fmt.Sprintf("/proc/%d/ns/mnt", pid)
		if pid == p1 {
			path = fmt.Sprintf("/proc/%d/task/%d/ns/mnt", p1, daemonThreadIn(p1, p1ns))
		}
		ns, err := os.Readlink(path)
		if err != nil {
			t.Errorf("mount namespace of %d: %v", pid, err)
			return nil
		}
		s.ns = append(s.ns, ns)
		id, err := mntNSID(path)
		if err == nil {
			if _, err = mntNSExists(id); err == nil {
				s.nsID = append(s.nsID, id)
				continue
			}
		}
		soakNoNSCheck.Do(func() { t.Logf("the mount namespaces are not checked (needs Linux 6.11): %v", err) })
		s.nsID = nil
		break
	}
	if s.ns[0] == s.ns[1] {
		t.Errorf("the daemon and the sandbox share a mount namespace (%s)", s.ns[0])
		return nil
	}
	mi, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", p1))
	for _, l := range fuseMounts(string(mi)) {
		if f := strings.Fields(l); len(f) > 4 && strings.Contains(l, "fuse.rootfs") {
			s.view = f[4]
		}
	}
	if s.view == "" {
		t.Errorf("no view in the daemon's mount table:\n%s", mi)
		return nil
	}
	return s
}

// end ends the session the way e says, and checks that it ended as
// documented and left nothing. It returns how long rootfs took to exit.
func (s *session) end(t *testing.T, e soakEnd, i int) time.Duration {
	t.Helper()
	p := s.p
	start := time.Now()
	switch e.name {
	case "client-closes":
		p.stdin.Close()
	case "client-killed":
		p.stdin.Close()
		p.stdout.Close()
	case "server-crash", "server-exit-0":
		args := map[string]any{"code": 0}
		if e.name == "server-crash" {
			if want, _ := e.want(i); want[0] == 137 {
				args = map[string]any{"code": 1, "signal": 9}
			} else {
				args = map[string]any{"code": want[0]}
			}
		}
		_, _, err := p.tool("crash", args, 10*time.Second)
		if err == nil || !strings.HasPrefix(err.Error(), "json-rpc error") {
			t.Errorf("the request in flight when the server died got %v, want a JSON-RPC error", err)
		}
	case "sigterm":
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	status, exited := p.waitExit(10 * time.Second)
	took := time.Since(start)
	if !exited {
		_, pids := waitGone(s.mark, 0)
		t.Errorf("rootfs has not exited %v after the end%s\nstderr:\n%s", took.Round(time.Millisecond), procsInfo(s.alive(pids)), p.stderr)
		_ = p.cmd.Process.Kill() // its death signal takes the rest
		<-p.exited
		return took
	}
	s.status = status
	if want, why := e.want(i); !slices.Contains(want, status) {
		t.Errorf("rootfs exited %d, want %v (%s)\nstderr:\n%s", status, want, why, p.stderr)
	}
	if _, pids := waitGone(s.mark, 5*time.Second); len(pids) > 0 {
		t.Errorf("marked processes left: %v%s", pids, procsInfo(pids))
	}
	// Each parent reaps its child before it exits, so not even a zombie
	// should be left for init to reap; allow a moment all the same.
	left := s.alive(nil)
	for deadline := time.Now().Add(2 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = s.alive(nil) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("processes of the session left: %v%s", left, procsInfo(left))
	}
	for k, id := range s.nsID {
		exists, err := mntNSExists(id)
		for deadline := time.Now().Add(2 * time.Second); exists && err == nil && time.Now().Before(deadline); exists, err = mntNSExists(id) {
			time.Sleep(20 * time.Millisecond)
		}
		if exists || err != nil {
			t.Errorf("the %s's mount namespace %s is still there (%v):\n  %s", []string{"daemon", "sandbox"}[k], s.ns[k], err, strings.Join(nsHolders(s.ns[k], id), "\n  "))
		}
	}
	if left := s.newMounts(hostMountinfo(t), s.hostPaths...); len(left) > 0 {
		t.Errorf("new mounts on the host: %q", left)
	}
	return took
}

// alive returns the recorded processes still running (the same pid and
// start time), plus extra.
func (s *session) alive(extra []int) []int {
	out := slices.Clone(extra)
	for _, pr := range s.procs {
		if st, ok := procStart(pr.pid); ok && st == pr.start && !slices.Contains(out, pr.pid) {
			out = append(out, pr.pid)
		}
	}
	sort.Ints(out)
	return out
}

// newMounts returns the lines of now, not in the mountinfo from before the
// session, that name the directory of the session's view (in the daemon's
// namespace only, never on the host) or one of paths. Other tests may
// mount views of their own meanwhile.
func (s *session) newMounts(now string, paths ...string) []string {
	old := map[string]bool{}
	for _, l := range strings.Split(s.before, "\n") {
		old[l] = true
	}
	var out []string
	for _, l := range strings.Split(now, "\n") {
		if old[l] {
			continue
		}
		for _, p := range append(paths, filepath.Dir(s.view)) {
			if strings.Contains(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// setRoots changes the roots the peer answers with and tells rootfs.
func (p *rawPeer) setRoots(roots []mcpRoot) {
	p.mu.Lock()
	p.roots = roots
	p.mu.Unlock()
	p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
}

// visible polls list_dir of path until it succeeds or d passes (waitPath
// without ending the test).
func (p *rawPeer) visible(path string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		text, isErr, err := p.tool("list_dir", map[string]any{"path": path}, d)
		if err == nil && !isErr {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %q isError=%v err=%v", path, text, isErr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// descendants returns pid and every process below it.
func descendants(pid int) []procIdent {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if c, err := strconv.Atoi(e.Name()); err == nil {
			children[parentOf(c)] = append(children[parentOf(c)], c)
		}
	}
	var out []procIdent
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		st, ok := procStart(p)
		if !ok {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		out = append(out, procIdent{pid: p, start: st, cmd: strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")})
		queue = append(queue, children[p]...)
	}
	return out
}

// statFields returns the fields of /proc/pid/stat after the command name.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

func parentOf(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return -1
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// procStart returns pid's start time (clock ticks after boot).
func procStart(pid int) (string, bool) {
	f := statFields(pid)
	if len(f) < 20 {
		return "", false
	}
	return f[19], true
}

// nsGetMntnsID is NS_GET_MNTNS_ID, _IOR(0xb7, 0x5, __u64) (Linux 6.8).
const nsGetMntnsID = 0x8008b705

// mntNSID returns the id of the mount namespace that path (a
// /proc/.../ns/mnt) names: unlike its inode number, which the next new
// namespace may take, it is never reused.
func mntNSID(path string) (uint64, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var id uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), nsGetMntnsID, uintptr(unsafe.Pointer(&id))); e != 0 {
		return 0, os.NewSyscallError("ioctl NS_GET_MNTNS_ID", e)
	}
	return id, nil
}

// mntNSExists reports whether the mount namespace id still exists:
// listmount(2) of its root (Linux 6.11) fails with ENOENT once it is gone.
func mntNSExists(id uint64) (bool, error) {
	req := struct {
		size, spare        uint32
		mntID, param, nsID uint64
	}{size: 32, mntID: ^uint64(0), nsID: id} // LSMT_ROOT
	var ids [1]uint64
	_, _, e := unix.Syscall6(unix.SYS_LISTMOUNT, uintptr(unsafe.Pointer(&req)), uintptr(unsafe.Pointer(&ids[0])), 1, 0, 0, 0)
	switch e {
	case 0:
		return true, nil
	case unix.ENOENT:
		return false, nil
	}
	return false, os.NewSyscallError("listmount", e)
}

// nsHolders lists what refers to the mount namespace ns (its "mnt:[N]"
// and id): a thread in it, or a descriptor naming it.
func nsHolders(ns string, id uint64) []string {
	var out []string
	ours := func(link, path string) bool {
		if link != ns {
			return false
		}
		got, err := mntNSID(path)
		return err == nil && got == id
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		what := strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")
		tasks, _ := os.ReadDir(filepath.Join(dir, "task"))
		for _, tk := range tasks {
			p := filepath.Join(dir, "task", tk.Name(), "ns", "mnt")
			if l, err := os.Readlink(p); err == nil && ours(l, p) {
				out = append(out, fmt.Sprintf("thread %s of %s (%s) is in it", tk.Name(), e.Name(), what))
			}
		}
		fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
		for _, fd := range fds {
			p := filepath.Join(dir, "fd", fd.Name())
			if l, err := os.Readlink(p); err == nil && ours(l, p) {
				out = append(out, fmt.Sprintf("fd %s of %s (%s) names it", fd.Name(), e.Name(), what))
			}
		}
	}
	if len(out) == 0 {
		out = append(out, "no thread or descriptor: a mount of its namespace file, or it is being freed")
	}
	return out
}

// TestSoakNamespaceCheck shows that the soak's namespace check can fail: a
// mount namespace whose last process is gone but that a descriptor still
// names exists, and the descriptor is found; closed, the namespace is gone.
func TestSoakNamespaceCheck(t *testing.T) {
	testutil.RequireRoot(t)
	child := exec.Command("sleep", "60")
	child.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	must(t, child.Start())
	path := fmt.Sprintf("/proc/%d/ns/mnt", child.Process.Pid)
	ns, _ := os.Readlink(path)
	id, err := mntNSID(path)
	if err == nil {
		_, err = mntNSExists(id)
	}
	if err != nil {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Skipf("the kernel cannot tell a mount namespace's id or whether it exists (needs Linux 6.11): %v", err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	must(t, err)
	_ = child.Process.Kill()
	_ = child.Wait()
	exists, err := mntNSExists(id)
	holders := nsHolders(ns, id)
	expect(t, kindControl, "a namespace held by a descriptor is still there, and the descriptor is found",
		err == nil && exists && strings.Contains(strings.Join(holders, "\n"), fmt.Sprintf("fd %d of %d", fd, os.Getpid())),
		"exists=%v err=%v holders=%q", exists, err, holders)
	unix.Close(fd)
	exists, err = mntNSExists(id)
	for deadline := time.Now().Add(2 * time.Second); exists && err == nil && time.Now().Before(deadline); exists, err = mntNSExists(id) {
		time.Sleep(20 * time.Millisecond)
	}
	expect(t, kindControl, "a namespace nothing holds is gone", err == nil && !exists, "exists=%v err=%v", exists, err)
}
