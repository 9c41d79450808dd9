package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/vfs"
)

// errNoFUSE marks what this process lacks for a FUSE mount.
var errNoFUSE = errors.New("cannot mount FUSE")

// fuseProblem checks, before a FUSE mount, what this process needs for it,
// and returns the first thing missing as one line naming the fix (nil when
// nothing is): /dev/fuse opened read-write (the kernel's check for a
// direct mount, and fusermount3's, which opens it as the caller), without
// root fusermount3 itself, and with allowOther fuse.conf's
// user_allow_other. Refusing here, rather than letting fusermount3 fail,
// gives one line instead of its own message and "fusermount exited with
// code 256".
func fuseProblem(allowOther bool) error {
	if f := mountmgr.FUSEFinding(); !f.OK {
		return fmt.Errorf("%w: %s; %s", errNoFUSE, f.Detail, f.Fix)
	}
	if os.Geteuid() == 0 {
		return nil // mounts directly; fusermount3 is only a fallback
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		if _, err := exec.LookPath("fusermount"); err != nil {
			return fmt.Errorf("%w: fusermount3 not found, which mounts FUSE without root; install fuse3 (sudo apt-get install fuse3), or run as root", errNoFUSE)
		}
	}
	if allowOther && !userAllowOther("/etc/fuse.conf") {
		return fmt.Errorf("%w: --allow-other needs user_allow_other in /etc/fuse.conf without root; add it (echo user_allow_other | sudo tee -a /etc/fuse.conf), or drop --allow-other", errNoFUSE)
	}
	return nil
}

// userAllowOther reports whether the fuse.conf at path enables
// user_allow_other (a line of its own, not commented out).
func userAllowOther(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "user_allow_other" {
			return true
		}
	}
	return false
}

// fusermountExit matches go-fuse's error for a fusermount3 that failed; the
// number is a raw wait status.
var fusermountExit = regexp.MustCompile(`fusermount exited with code (\d+)`)

// fuseMountError turns a failed FUSE mount into one line with a fix: a bad
// mount point as it is, else what fuseProblem finds now, else the error
// itself, with fusermount3's wait status as an exit status and a pointer to
// rootfs doctor.
func fuseMountError(err error, allowOther bool) error {
	if errors.Is(err, vfs.ErrBadMountpoint) {
		return err // says what is wrong with the mount point itself
	}
	if p := fuseProblem(allowOther); p != nil {
		return p
	}
	msg := strings.TrimSpace(err.Error())
	if m := fusermountExit.FindStringSubmatch(msg); m != nil {
		if n, perr := strconv.Atoi(m[1]); perr == nil {
			ws := syscall.WaitStatus(n)
			what := fmt.Sprintf("fusermount3 failed with exit status %d (its own message is the line before)", ws.ExitStatus())
			if ws.Signaled() {
				what = fmt.Sprintf("fusermount3 was killed by signal %d", ws.Signal())
			}
			msg = strings.Replace(msg, m[0], what, 1)
		}
	}
	return fmt.Errorf("%s; run rootfs doctor to see what this machine lacks", msg)
}
