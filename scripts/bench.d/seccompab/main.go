//go:build linux

// Command seccompab measures what the sandbox's seccomp filter
// (internal/seccomp) adds to the system calls a file walk makes: it times
// loops of openat+close, newfstatat and getdents64 on a path given as its
// argument, then installs the filter in this process and times them again.
// Usage: seccompab DIR FILE [N]
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/rootfs-dev/rootfs/internal/seccomp"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: seccompab DIR FILE [N]")
		os.Exit(2)
	}
	dir, file := os.Args[1], os.Args[2]
	n := 200000
	if len(os.Args) > 3 {
		n, _ = strconv.Atoi(os.Args[3])
	}
	runtime.LockOSThread()
	loops := []struct {
		name string
		f    func()
	}{
		{"openat+close", func() {
			fd, err := unix.Openat(unix.AT_FDCWD, file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				panic(err)
			}
			unix.Close(fd)
		}},
		{"newfstatat", func() {
			var st unix.Stat_t
			if err := unix.Fstatat(unix.AT_FDCWD, file, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				panic(err)
			}
		}},
		{"getppid", func() { unix.Getppid() }},
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		panic(err)
	}
	buf := make([]byte, 32<<10)
	loops = append(loops, struct {
		name string
		f    func()
	}{"lseek+getdents64", func() {
		unix.Seek(dfd, 0, 0)
		unix.Getdents(dfd, buf)
	}})
	run := func(label string) {
		for _, l := range loops {
			best := time.Duration(1 << 62)
			for range 5 {
				t0 := time.Now()
				for range n {
					l.f()
				}
				if d := time.Since(t0); d < best {
					best = d
				}
			}
			fmt.Printf("%s\t%s\t%.1f ns/op\n", label, l.name, float64(best.Nanoseconds())/float64(n))
		}
	}
	run("no-filter")
	if err := seccomp.Install(); err != nil {
		panic(err)
	}
	run("filter")
}
