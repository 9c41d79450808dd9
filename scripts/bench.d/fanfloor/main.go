//go:build linux

// Command fanfloor measures what a fanotify group costs the process that
// opens files, before rootfs reads anything: it times `grep -rl` over DIR
// (a tree on its own filesystem, page cache warm) with no group, then
// with a group of each kind marking DIR's filesystem for FAN_OPEN and a
// reader that drains it, as the audit log's is on the kernel data path
// (issue 24). Each figure is the median of 7 runs; the whole is done
// twice. Run as root. Usage: fanfloor DIR
package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

func grep(dir string) time.Duration {
	t := time.Now()
	_ = exec.Command("grep", "-rl", "a string in no file", dir).Run()
	return time.Since(t)
}

func median(dir string) time.Duration {
	var ds []time.Duration
	for range 7 {
		ds = append(ds, grep(dir))
	}
	slices.Sort(ds)
	return ds[3]
}

// drain reads fd's events until stop is closed, closing the descriptors
// a classic group's events carry.
func drain(fd int, classic bool, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, 64<<10)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, _ := unix.Read(fd, buf)
		if n <= 0 {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		for off := 0; classic && off+unix.FAN_EVENT_METADATA_LEN <= n; {
			l := int(binary.NativeEndian.Uint32(buf[off:]))
			if efd := int(int32(binary.NativeEndian.Uint32(buf[off+16:]))); efd >= 0 {
				unix.Close(efd)
			}
			if l <= 0 {
				break
			}
			off += l
		}
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: fanfloor DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	grep(dir) // warm the page cache
	kinds := []struct {
		name  string
		flags uint
	}{
		{"classic (root only)", unix.FAN_CLASS_NOTIF},
		{"FAN_REPORT_FID", unix.FAN_CLASS_NOTIF | unix.FAN_REPORT_FID},
		{"FAN_REPORT_DFID_NAME (rootfs's)", unix.FAN_CLASS_NOTIF | unix.FAN_REPORT_DFID_NAME},
	}
	for range 2 {
		base := median(dir)
		fmt.Printf("no group: %v\n", base)
		for _, k := range kinds {
			fd, err := unix.FanotifyInit(k.flags|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY)
			if err == nil {
				err = unix.FanotifyMark(fd, unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, unix.FAN_OPEN, unix.AT_FDCWD, dir)
			}
			if err != nil {
				fmt.Printf("%s: %v\n", k.name, err)
				continue
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go drain(fd, k.flags&(unix.FAN_REPORT_FID|unix.FAN_REPORT_DIR_FID) == 0, stop, &wg)
			d := median(dir)
			close(stop)
			wg.Wait()
			unix.Close(fd)
			fmt.Printf("%s: %v (%.2fx)\n", k.name, d, float64(d)/float64(base))
		}
	}
}
