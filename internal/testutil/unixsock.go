package testutil

import (
	"bufio"
	"errors"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DialWhenThere waits for a socket file at path (until done), connects to
// it as a host process and returns the line it reads, the errno name of a
// refused connect, or "no socket": what the unix-socket tests of the
// sandbox and of rootfs run compare.
func DialWhenThere(path string, done <-chan struct{}) string {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			c, err := net.DialTimeout("unix", path, 3*time.Second)
			if err != nil {
				var e unix.Errno
				if errors.As(err, &e) {
					return unix.ErrnoName(e)
				}
				return err.Error()
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(3 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return "read: " + err.Error()
			}
			return strings.TrimSpace(line)
		}
		select {
		case <-done:
			return "no socket"
		case <-tick.C:
		}
	}
}
