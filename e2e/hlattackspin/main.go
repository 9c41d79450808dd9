// Command hlattackspin is the server side of TestAttackTmpMountRace: run
// inside the sandbox, it moves whatever is at /tmp/R to /tmp/Y and back
// as fast as it can, so that a mount rootfs makes on /tmp/R lands on
// /tmp/Y instead; once /tmp/Y is a mount point (its device is not
// /tmp's), it makes /tmp/R a plain directory again and says so on stderr.
//
//	hlattackspin R Y SECONDS
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func main() {
	r, y := "/tmp/"+os.Args[1], "/tmp/"+os.Args[2]
	secs, _ := strconv.Atoi(os.Args[3])
	end := time.Now().Add(time.Duration(secs) * time.Second)
	var tmp, st syscall.Stat_t
	if err := syscall.Stat("/tmp", &tmp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	_ = syscall.Mkdir(r, 0o755)
	n := 0
	for time.Now().Before(end) {
		for i := 0; i < 1000; i++ {
			n++
			_ = syscall.Rename(r, y)
			if syscall.Rename(y, r) == syscall.EBUSY && syscall.Stat(y, &st) == nil && st.Dev != tmp.Dev {
				_ = syscall.Mkdir(r, 0o755)
				fmt.Fprintf(os.Stderr, "landed on %s after %d\n", y, n)
				return
			}
			if syscall.Stat(r, &st) == nil && st.Dev != tmp.Dev {
				time.Sleep(time.Millisecond) // mounted where it should be: wait for another try
			}
		}
	}
	fmt.Fprintf(os.Stderr, "no landing after %d\n", n)
	os.Exit(1)
}
