package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/mountmgr"
)

// doctorCommand is "rootfs doctor": it checks what "rootfs run" and
// "rootfs mount" need here, by trying it, and prints one line per check with,
// for each missing piece, exactly what to add. It changes nothing.
func doctorCommand(ctx context.Context, args []string, stderr io.Writer) error {
	f := pflag.NewFlagSet("doctor", pflag.ContinueOnError)
	if err := parseFlags(f, args, doctorUsage, stderr); err != nil {
		return err
	}
	if f.NArg() != 0 {
		return fmt.Errorf("%w: doctor takes no arguments", ErrUsage)
	}
	findings := append(hostFindings(), mountmgr.Preflight()...)
	fatal := 0
	for _, fd := range findings {
		mark := "ok  "
		switch {
		case !fd.OK && fd.Fatal:
			mark = "FAIL"
			fatal++
		case !fd.OK:
			mark = "warn"
		}
		fmt.Fprintf(stderr, "%s %-10s %s\n", mark, fd.Name, fd.Detail)
		if !fd.OK && fd.Fix != "" {
			fmt.Fprintf(stderr, "     %-10s fix: %s\n", "", fd.Fix)
		}
	}
	if fatal > 0 {
		return &ExitError{Code: 1, Err: fmt.Errorf("%d check(s) failed: rootfs run cannot work here until they are fixed", fatal)}
	}
	fmt.Fprintln(stderr, "rootfs run can work here.")
	return nil
}

// hostFindings are the checks that need no probe process.
func hostFindings() []mountmgr.Finding {
	var out []mountmgr.Finding
	var u unix.Utsname
	_ = unix.Uname(&u)
	rel := unix.ByteSliceToString(u.Release[:])
	out = append(out, mountmgr.Finding{Name: "kernel", OK: true, Detail: "Linux " + rel})

	if os.Geteuid() == 0 {
		out = append(out, mountmgr.Finding{Name: "privilege", OK: true, Detail: "running as root: the view mounts directly, FUSE passthrough is possible"})
	} else {
		out = append(out, mountmgr.Finding{Name: "privilege", OK: true, Detail: fmt.Sprintf("running as uid %d: rootfs uses an unprivileged user namespace", os.Geteuid())})
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		out = append(out, mountmgr.Finding{Name: "fusermount", OK: false, Fatal: false,
			Detail: "fusermount3 not found (needed by rootfs mount without root, and by the test suite)",
			Fix:    "apt-get install fuse3"})
	} else {
		out = append(out, mountmgr.Finding{Name: "fusermount", OK: true, Detail: "fusermount3 present"})
	}
	if inContainer() {
		out = append(out, mountmgr.Finding{Name: "container", OK: true,
			Detail: "inside a container: it needs /dev/fuse and CAP_SYS_ADMIN (devcontainer.json: \"runArgs\": [\"--device=/dev/fuse\"], \"capAdd\": [\"SYS_ADMIN\"], \"securityOpt\": [\"apparmor=unconfined\", \"systempaths=unconfined\"])"})
	}
	return out
}

func inContainer() bool {
	if _, err := os.Stat("/.dockerenv"); err == nil {
		return true
	}
	b, _ := os.ReadFile("/proc/1/cgroup")
	s := string(b)
	return strings.Contains(s, "docker") || strings.Contains(s, "kubepods") || strings.Contains(s, "containerd")
}
