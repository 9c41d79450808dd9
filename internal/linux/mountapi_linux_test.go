//go:build linux

package linux

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// The main thread and InMountNamespace. The runtime ends a thread whose
// locked goroutine exits, but not the main thread, which it parks for
// good: a main thread that joined the sandbox's mount namespace would keep
// it, and with it a mount of the view, alive until the daemon exits, and
// the daemon's unmount would wait for that forever.

// In the "mainthread" role the main goroutine starts locked to the main
// thread (a lock taken during init lasts into main), so the role can hand
// the main thread to the scheduler at a moment it chooses.
func init() {
	if os.Getenv(envRole) == "mainthread" {
		runtime.LockOSThread()
	}
}

// mainThreadReport is what the "mainthread" role prints.
type mainThreadReport struct {
	Err string
	// SetupOnMain: a goroutine started right after the main goroutine
	// freed the main thread ran there (so InMountNamespace's can too).
	SetupOnMain bool
	// FnOnMain: InMountNamespace ran fn on the main thread.
	FnOnMain bool
	// Own, Target, MainAfter: the mount namespaces of the process at the
	// start, of the child it joined, and of the main thread afterwards.
	Own, Target, MainAfter string
}

// mainThreadMain runs InMountNamespace at a moment when the scheduler has
// the main thread free and nothing else to run (GOMAXPROCS=1), and reports
// where fn ran and which mount namespace the main thread is in afterwards.
// A control build with control.NoSpareMainThread on runs it without the
// main thread guard.
func mainThreadMain() int {
	var r mainThreadReport
	defer func() {
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	}()
	onMain := func() bool { return unix.Gettid() == unix.Getpid() }
	if !onMain() || runtime.GOMAXPROCS(0) != 1 {
		r.Err = "the role must start on the main thread with GOMAXPROCS=1"
		return 1
	}
	nsOf := func(tid int) string {
		s, _ := os.Readlink("/proc/self/task/" + strconv.Itoa(tid) + "/ns/mnt")
		return s
	}
	r.Own = nsOf(unix.Getpid())
	child := exec.Command("sleep", "60")
	child.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	if err := child.Start(); err != nil {
		r.Err = "start a child in a new mount namespace: " + err.Error()
		return 1
	}
	nsFD, err := unix.Open("/proc/"+strconv.Itoa(child.Process.Pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	r.Target = nsOf(0)
	if s, lerr := os.Readlink("/proc/" + strconv.Itoa(child.Process.Pid) + "/ns/mnt"); lerr == nil {
		r.Target = s
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	if err != nil {
		r.Err = "open the child's mount namespace: " + err.Error()
		return 1
	}
	defer unix.Close(nsFD)

	// The setup's own control: a goroutine started now runs on the main
	// thread (the new goroutine runs next, on the thread that started it).
	c := make(chan bool)
	runtime.UnlockOSThread()
	go func() {
		runtime.LockOSThread()
		c <- onMain()
		runtime.UnlockOSThread()
	}()
	r.SetupOnMain = <-c
	runtime.LockOSThread()
	if !onMain() {
		r.Err = "the main goroutine did not come back to the main thread"
		return 1
	}

	runtime.UnlockOSThread()
	err = InMountNamespace(nsFD, func() error {
		r.FnOnMain = onMain()
		return nil
	})
	if err != nil {
		r.Err = "InMountNamespace: " + err.Error()
		return 1
	}
	r.MainAfter = nsOf(unix.Getpid())
	return 0
}

// TestInMountNamespaceSparesMainThread: fn never runs on the main thread,
// which therefore never joins the namespace, even when the scheduler hands
// InMountNamespace's goroutine the main thread. Negative control: without
// the guard (control.NoSpareMainThread), fn runs there and the main thread
// stays in the namespace it joined.
func TestInMountNamespaceSparesMainThread(t *testing.T) {
	testutil.RequireRoot(t)
	run := func(knobs ...control.Knob) mainThreadReport {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRole+"=mainthread", "GOMAXPROCS=1")
		if len(knobs) > 0 {
			cmd.Path = testutil.ControlTestBinary(t)
			cmd.Env = append(cmd.Env, control.EnvVar+"="+control.Names(knobs...))
		}
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		var r mainThreadReport
		if jerr := json.Unmarshal([]byte(lastLine(string(out))), &r); jerr != nil {
			t.Fatalf("role printed no report (%v, exit: %v): %q", jerr, err, out)
		}
		if r.Err != "" {
			t.Fatalf("role: %s", r.Err)
		}
		if !r.SetupOnMain {
			t.Fatalf("a goroutine started with the main thread free did not run there: the test proves nothing (%+v)", r)
		}
		if r.Own == r.Target || r.Target == "" {
			t.Fatalf("the child's mount namespace is not a new one: %+v", r)
		}
		return r
	}

	unguarded := run(control.NoSpareMainThread)
	t.Logf("without the guard: %+v", unguarded)
	if !unguarded.FnOnMain || unguarded.MainAfter != unguarded.Target {
		t.Errorf("negative control: without the guard fn should run on the main thread and leave it in %s; got %+v", unguarded.Target, unguarded)
	}
	r := run()
	t.Logf("with the guard: %+v", r)
	if r.FnOnMain {
		t.Errorf("fn ran on the main thread: %+v", r)
	}
	if r.MainAfter != r.Own {
		t.Errorf("the main thread is in %s after InMountNamespace, want its own %s (target %s)", r.MainAfter, r.Own, r.Target)
	}
}

func lastLine(s string) string {
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}
