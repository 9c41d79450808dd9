//go:build linux

// Command outerlistener runs a command under a seccomp filter that
// allows everything and has a listener, which it holds and never reads,
// as a container runtime's supervisor might: the kernel then refuses a
// second listener (EBUSY) to anything below. The end-to-end tests run
// rootfs under it to see its fallback to the plain filter.
//
// Usage: outerlistener COMMAND [ARG...]
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: outerlistener COMMAND [ARG...]")
		os.Exit(2)
	}
	filter := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
	prog := unix.SockFprog{Len: 1, Filter: &filter[0]}
	// no_new_privs is per thread and seccomp(2) without CAP_SYS_ADMIN
	// checks the calling thread's: both calls must run on one thread,
	// or an unprivileged run fails with EACCES when the runtime moves
	// the goroutine between them.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "outerlistener: no_new_privs:", err)
		os.Exit(2)
	}
	fd, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC|unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH|unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	if e != 0 {
		fmt.Fprintln(os.Stderr, "outerlistener: seccomp:", e)
		os.Exit(2)
	}
	defer unix.Close(int(fd)) // held (close-on-exec) while the command runs
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "outerlistener:", err)
		os.Exit(2)
	}
}
