package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The test LAN: a network namespace of its own, joined to the host by a
// veth pair (the host's end 10.254.N.1/24, the machine 10.254.N.2, N
// from the test process's pid and a count, so that neither two runs on
// one machine nor two tests of one run share it), standing for a registry or a database on the user's LAN: a
// private address on the host's on-link network, and not one of the
// host's own.

// lanSeq numbers the test LANs of this process: each has a subnet of
// its own.
var lanSeq atomic.Int32

// lanListener listens on a TCP port of the test LAN's machine; the
// machine and its link go when the test ends, or with the test process.
func lanListener(t *testing.T) net.Listener {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the test LAN needs root (a network namespace and a veth pair)")
	}
	// The anchor is started from a thread locked until the test ends: its
	// death signal follows the thread that forked it, which must not end
	// before the test does (nor outlive a killed test process).
	anchor := exec.Command("sleep", "3600")
	anchor.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	started, end := make(chan error), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		started <- anchor.Start()
		<-end
	}()
	must(t, <-started)
	pid := fmt.Sprint(anchor.Process.Pid)
	dev := fmt.Sprintf("rfsl%d", anchor.Process.Pid%100000)
	t.Cleanup(func() {
		// The veth pair goes at once with its host end; the namespace's
		// own end of it would only go when the kernel frees the
		// namespace, later, and meanwhile its route would shadow the
		// next test LAN's.
		exec.Command("ip", "link", "del", dev).Run()
		anchor.Process.Kill()
		anchor.Wait()
		close(end)
	})
	net24 := fmt.Sprintf("10.254.%d", 1+(os.Getpid()+int(lanSeq.Add(1))*37)%250)
	lanIP := net24 + ".2"
	for _, args := range [][]string{
		{"ip", "link", "add", dev, "type", "veth", "peer", "name", "lan0", "netns", pid},
		{"ip", "addr", "add", net24 + ".1/24", "dev", dev},
		{"ip", "link", "set", dev, "up"},
		{"nsenter", "-t", pid, "-n", "ip", "addr", "add", lanIP + "/24", "dev", "lan0"},
		{"nsenter", "-t", pid, "-n", "ip", "link", "set", "lan0", "up"},
		{"nsenter", "-t", pid, "-n", "ip", "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("test LAN: %v: %v\n%s", args, err, out)
		}
	}
	type made struct {
		ln  net.Listener
		err error
	}
	ch := make(chan made, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends in the LAN's namespace
		fd, err := unix.Open("/proc/"+pid+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- made{err: err}
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			ch <- made{err: err}
			return
		}
		ln, err := net.Listen("tcp4", lanIP+":0")
		ch <- made{ln, err}
	}()
	m := <-ch
	if m.err != nil {
		t.Fatalf("test LAN: listen: %v", m.err)
	}
	return m.ln
}
