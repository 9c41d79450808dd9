package seccomp

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
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

// The notifier's tests run the filter in a child of the test binary (a
// filter cannot be removed), started in a PID namespace of its own as the
// sandbox's processes are, and read its listener here, in the parent, as
// P1 does: fd 3 is a socket the child sends its listener on, fd 4 a pipe
// on which the parent says "go".
const envNotifyChild = "ROOTFS_SECCOMP_NOTIFY_CHILD"

// childReport is what the child prints.
type childReport struct {
	InstallErr string            `json:"install_err,omitempty"`
	Errs       map[string]string `json:"errs"`
	NSpid      string            `json:"nspid"` // the refusing thread's NSpid line, as the host's /proc shows it
	Refused    int               `json:"refused"`
	Elapsed    time.Duration     `json:"elapsed"` // of the repeated call
}

// notifyChild is the child: mode "notify" loads InstallNotify's filter,
// "plain" Install's, "busy" an allow-all filter with a listener first and
// then tries InstallNotify (EBUSY) before falling back to Install, as P2
// does. N in ROOTFS_SECCOMP_FLOOD repeats the refused call.
func notifyChild(mode string) {
	if mode == "connect" {
		connectChild()
	}
	runtime.LockOSThread()
	sock, gate := 3, os.NewFile(4, "gate")
	rep := childReport{Errs: map[string]string{}}
	if mode == "busy" {
		if _, err := outerListener(); err != nil {
			fmt.Fprintln(os.Stderr, "outer listener:", err)
			os.Exit(3)
		}
	}
	var lf *os.File
	var err error
	if mode == "none" {
		// no filter: the benchmarks' baseline
	} else if mode == "plain" {
		err = Install()
	} else if mode == "notify-noguard" {
		raw, perr := program(Notify{Refusals: true}, false)
		if perr != nil {
			fmt.Fprintln(os.Stderr, "program:", perr)
			os.Exit(3)
		}
		lf, err = installNotify(raw, listenerFlags)
	} else if lf, _, err = InstallNotify(Notify{Refusals: true}); err != nil {
		rep.InstallErr = err.Error()
		err = Install()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "install:", err)
		os.Exit(3)
	}
	var rights []byte
	if lf != nil {
		rights = unix.UnixRights(int(lf.Fd()))
	}
	if err := unix.Sendmsg(sock, []byte("x"), rights, nil, 0); err != nil {
		fmt.Fprintln(os.Stderr, "sendmsg:", err)
		os.Exit(3)
	}
	if lf != nil {
		lf.Close() // as P2 does: the parent's copy is the only one
	}
	unix.Close(sock)
	var b [1]byte
	gate.Read(b[:])
	st, _ := os.ReadFile("/proc/thread-self/status")
	for _, l := range strings.Split(string(st), "\n") {
		if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
			rep.NSpid = strings.Join(strings.Fields(rest), " ")
		}
	}
	n, _ := strconv.Atoi(os.Getenv("ROOTFS_SECCOMP_FLOOD"))
	var seen []string // each distinct result, in order
	nr, a0 := uintptr(unix.SYS_UNSHARE), uintptr(unix.CLONE_NEWUSER)
	if os.Getenv("ROOTFS_SECCOMP_CALL") == "getpid" {
		nr, a0 = unix.SYS_GETPID, 0
	}
	start := time.Now()
	for i := 0; i < max(n, 1); i++ {
		_, _, e := unix.Syscall(nr, a0, 0, 0)
		if s := errName(errno(e)); !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
		if e == unix.EPERM {
			rep.Refused++
		}
	}
	rep.Elapsed = time.Since(start)
	rep.Errs["unshare"] = strings.Join(seen, ",")
	_, _, e := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	rep.Errs["clone3"] = errName(errno(e))
	_, _, e = unix.Syscall(unix.SYS_GETPID, 0, 0, 0)
	rep.Errs["getpid"] = errName(errno(e))
	// A listener of the child's own: with one, it could answer its own
	// refused calls with SECCOMP_USER_NOTIF_FLAG_CONTINUE and run them.
	_, lerr := outerListener()
	rep.Errs["listener"] = errName(lerr)
	json.NewEncoder(os.Stdout).Encode(rep)
	os.Exit(0)
}

func errno(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// outerListener loads an allow-all filter with a listener, as a
// container runtime's supervisor might have: a second listener is EBUSY.
func outerListener() (int, error) {
	filter := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
	prog := unix.SockFprog{Len: 1, Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, err
	}
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// child is a running notifyChild.
type child struct {
	cmd      *exec.Cmd
	pid      int      // in this test's PID namespace
	listener *os.File // nil when the child loaded no listener
	gate     *os.File
	out      strings.Builder
}

func startChild(t testing.TB, mode string, flood int, env ...string) *child {
	t.Helper()
	testutil.RequireRoot(t) // a PID namespace of its own, as the sandbox's
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	parentSock, childSock := os.NewFile(uintptr(fds[0]), "p"), os.NewFile(uintptr(fds[1]), "c")
	defer parentSock.Close()
	gateR, gateW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{gate: gateW}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(append(os.Environ(), envNotifyChild+"="+mode, "ROOTFS_SECCOMP_FLOOD="+strconv.Itoa(flood)), env...)
	c.cmd.ExtraFiles = []*os.File{childSock, gateR}
	c.cmd.Stdout, c.cmd.Stderr = &c.out, os.Stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	childSock.Close()
	gateR.Close()
	c.pid = c.cmd.Process.Pid
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait(); gateW.Close() })
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(parentSock.Fd()), make([]byte, 8), oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		t.Fatalf("recvmsg: %v", err)
	}
	if msgs, _ := unix.ParseSocketControlMessage(oob[:oobn]); len(msgs) == 1 {
		if got, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(got) == 1 {
			c.listener = os.NewFile(uintptr(got[0]), "listener")
		}
	}
	return c
}

// run lets the child make its calls and returns its report.
func (c *child) run(t testing.TB) childReport {
	t.Helper()
	c.gate.Write([]byte{1})
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	var rep childReport
	if err := json.Unmarshal([]byte(c.out.String()), &rep); err != nil {
		t.Fatalf("child output %q: %v", c.out.String(), err)
	}
	return rep
}

// collect gathers a listener's reports.
type collect struct {
	mu   sync.Mutex
	got  []Refusal
	lost int64
}

func (c *collect) opts(q int, slow time.Duration) ListenOptions {
	return ListenOptions{Queue: q,
		Refused: func(r Refusal) {
			time.Sleep(slow)
			c.mu.Lock()
			c.got = append(c.got, r)
			c.mu.Unlock()
		},
		Lost: func(n int64) { c.mu.Lock(); c.lost += n; c.mu.Unlock() }}
}

// TestNotifyRefusedCallReported: under InstallNotify's filter a refused
// call (unshare) still fails with EPERM, answered by Listen, and is
// reported once with its name, the calling thread as this namespace
// numbers it and its process as the child's PID namespace does (1),
// with its command. clone3 (the ENOSYS list) stays ENOSYS unreported and
// getpid runs. Negative control: Install's filter refuses the same calls
// the same way and gives no listener, so nothing can be reported.
func TestNotifyRefusedCallReported(t *testing.T) {
	c := startChild(t, "notify", 0)
	if c.listener == nil {
		t.Fatal("the child sent no listener")
	}
	var col collect
	l, err := Listen(c.listener, col.opts(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	rep := c.run(t)
	l.Close()
	if rep.InstallErr != "" {
		t.Fatalf("InstallNotify: %s", rep.InstallErr)
	}
	want := map[string]string{"unshare": "EPERM", "clone3": "ENOSYS", "getpid": "ok"}
	for k, w := range want {
		if rep.Errs[k] != w {
			t.Errorf("%s under the notifier: %s, want %s", k, rep.Errs[k], w)
		}
	}
	ns := strings.Fields(rep.NSpid) // host tid, then the child's
	if len(ns) != 2 {
		t.Fatalf("NSpid %q: the child is not in a PID namespace of its own", rep.NSpid)
	}
	if len(col.got) != 1 || l.Answered() != 1 {
		t.Fatalf("reported %+v, answered %d; want one unshare", col.got, l.Answered())
	}
	r := col.got[0]
	exe, _ := os.Executable()
	comm := exe[strings.LastIndex(exe, "/")+1:]
	if len(comm) > 15 {
		comm = comm[:15]
	}
	if r.Syscall != "unshare" || r.Nr != unix.SYS_UNSHARE || strconv.Itoa(r.TID) != ns[0] || r.PID != 1 || r.Comm != comm {
		t.Errorf("refusal %+v; want unshare, tid %s (this namespace's), pid 1 (the child's namespace's), comm %q", r, ns[0], comm)
	}

	// Negative control: the plain filter.
	p := startChild(t, "plain", 0)
	if p.listener != nil {
		t.Fatal("Install gave a listener")
	}
	prep := p.run(t)
	for k, w := range want {
		if prep.Errs[k] != w {
			t.Errorf("%s under the plain filter: %s, want %s", k, prep.Errs[k], w)
		}
	}
}

// TestNotifyListenerClosed: a refused call never runs when rootfs is not
// there to answer: while the listener is held but not read it waits, and
// when the last copy closes the kernel fails it, and every later one,
// with ENOSYS (seccomp_notify_release, and no listener left in
// seccomp_do_user_notification).
func TestNotifyListenerClosed(t *testing.T) {
	c := startChild(t, "notify", 3)
	if c.listener == nil {
		t.Fatal("the child sent no listener")
	}
	c.gate.Write([]byte{1})
	time.Sleep(300 * time.Millisecond) // the first unshare waits on the unread listener
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, c.pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if info.Signo != 0 { // SIGCHLD: it exited
		t.Fatal("the child went on without an answer")
	}
	c.listener.Close()
	waited := make(chan error, 1)
	go func() { waited <- c.cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("child: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the refused call still waits after the listener was closed")
	}
	var rep childReport
	if err := json.Unmarshal([]byte(c.out.String()), &rep); err != nil {
		t.Fatalf("child output %q: %v", c.out.String(), err)
	}
	if rep.Errs["unshare"] != "ENOSYS" || rep.Refused != 0 {
		t.Errorf("with the listener closed unshare gave %s (%d EPERM); want ENOSYS for the waiting call and the later ones", rep.Errs["unshare"], rep.Refused)
	}
	if rep.Errs["listener"] != "EBUSY" {
		t.Errorf("with rootfs's listener closed the server got a listener of its own (%s), which could let its refused calls run", rep.Errs["listener"])
	}
}

// TestNotifyGuardControl is the negative control of the guard: the same
// filter without it lets the child take a listener of its own once the
// parent's copy is closed (the kernel's EBUSY lasts only while that copy
// lives), after which its refused calls would be its own to let run.
func TestNotifyGuardControl(t *testing.T) {
	c := startChild(t, "notify-noguard", 0)
	if c.listener == nil {
		t.Fatal("the child sent no listener")
	}
	c.listener.Close()
	rep := c.run(t)
	if rep.Errs["listener"] != "ok" {
		t.Errorf("without the guard, after the listener closed: %q; want a listener of the child's own (the attack this guards against)", rep.Errs["listener"])
	}
}

// TestNotifyFlood: a flood of refused calls with a slow reporter and a
// small queue is answered in full, every call EPERM; the reports the
// queue could not take are counted as lost, none vanish.
func TestNotifyFlood(t *testing.T) {
	const n = 20000
	c := startChild(t, "notify", n)
	var col collect
	l, err := Listen(c.listener, col.opts(8, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rep := c.run(t)
	l.Close()
	if rep.Refused != n {
		t.Errorf("%d of %d calls EPERM", rep.Refused, n)
	}
	if l.Answered() != n || int64(len(col.got))+col.lost != n || col.lost == 0 {
		t.Errorf("answered %d, reported %d, lost %d; want %d answered, reported+lost = %d, some lost", l.Answered(), len(col.got), col.lost, n, n)
	}
}

// TestNotifyBusyFallsBack: under a filter that already has a listener
// InstallNotify is refused (EBUSY) and loads nothing; Install's filter
// then refuses as before.
func TestNotifyBusyFallsBack(t *testing.T) {
	c := startChild(t, "busy", 0)
	if c.listener != nil {
		t.Fatal("InstallNotify gave a listener under another")
	}
	rep := c.run(t)
	if !strings.Contains(rep.InstallErr, "device or resource busy") {
		t.Errorf("InstallNotify under another listener: %q, want EBUSY", rep.InstallErr)
	}
	if rep.Errs["unshare"] != "EPERM" || rep.Errs["clone3"] != "ENOSYS" || rep.Errs["getpid"] != "ok" {
		t.Errorf("the fallback filter: %v", rep.Errs)
	}
}

// TestNotifyProgramAssembles: the notifying filter differs from the plain
// one only in its EPERM returns.
func TestNotifyProgramAssembles(t *testing.T) {
	plain, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	notify, err := NotifyProgram(Notify{Refusals: true})
	if err != nil {
		t.Fatal(err)
	}
	// The guard is one rule block more (7 instructions) after the
	// argument rules: seccomp(2) with NEW_LISTENER refused with EBUSY.
	const guardLen = 7
	if len(notify) != len(plain)+guardLen {
		t.Fatalf("lengths %d and %d, want the guard's %d more", len(plain), len(notify), guardLen)
	}
	at := -1
	for o := 0; o+guardLen <= len(notify); o++ {
		if notify[o+guardLen-1].K == unix.SECCOMP_RET_ERRNO|uint32(unix.EBUSY) && notify[o+2].K == 16+8*1 {
			at = o
			break
		}
	}
	if at < 0 {
		t.Fatal("no guard block (EBUSY on seccomp's flags) in the notifying filter")
	}
	notify = append(notify[:at:at], notify[at+guardLen:]...)
	changed := 0
	for i := range plain {
		if plain[i] != notify[i] {
			changed++
			if plain[i].K != unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM) || notify[i].K != unix.SECCOMP_RET_USER_NOTIF {
				t.Errorf("instruction %d: %+v became %+v", i, plain[i], notify[i])
			}
		}
	}
	if changed == 0 {
		t.Error("no EPERM return became a notification")
	}
}

// BenchmarkCall times one call in a child under each filter, as the
// child measures it (its start-up is not counted): getpid, which every
// filter allows, and unshare, which each refuses: with EPERM from the
// filter itself (plain), or through the listener, read, named from
// /proc and answered here (notify: the round trip a refusal costs when
// an audit log is written). "none" is without a filter.
func BenchmarkCall(b *testing.B) {
	for _, call := range []string{"getpid", "unshare"} {
		for _, mode := range []string{"none", "plain", "notify"} {
			b.Run(call+"/"+mode, func(b *testing.B) {
				c := startChild(b, mode, b.N, "ROOTFS_SECCOMP_CALL="+call)
				if c.listener != nil {
					l, err := Listen(c.listener, ListenOptions{Refused: func(Refusal) {}})
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
				}
				rep := c.run(b)
				b.ReportMetric(float64(rep.Elapsed.Nanoseconds())/float64(b.N), "ns/op")
			})
		}
	}
}

// BenchmarkProcess times what the listener reads of a caller before it
// answers (here of this thread: the status file and comm).
func BenchmarkProcess(b *testing.B) {
	tid := unix.Gettid()
	for range b.N {
		process(tid)
	}
}
