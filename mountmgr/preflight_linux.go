package mountmgr

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/internal/seccomp"
)

// Preflight checks what `rootfs run` needs on this machine for the
// current user, by trying it: a probe child (this binary, hidden stage)
// is started in new user (when not root), mount and PID namespaces and
// mounts a tmpfs and a proc there. It also checks /dev/fuse, seccomp and
// Landlock. It never changes the host.
func Preflight() []Finding {
	var out []Finding
	out = append(out, probeNamespaces())
	out = append(out, FUSEFinding(), tunFinding())
	if mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		out = append(out, Finding{Name: "seccomp", Fatal: true, Detail: "seccomp unavailable: " + errText(err), Fix: "use a kernel built with CONFIG_SECCOMP_FILTER"})
	} else if mode != 0 {
		out = append(out, Finding{Name: "seccomp", OK: true, Detail: "filter mode already active (stacked filters are fine)"})
	} else if _, err := seccomp.Program(); err != nil {
		out = append(out, Finding{Name: "seccomp", Fatal: true, Detail: err.Error()})
	} else {
		out = append(out, Finding{Name: "seccomp", OK: true, Detail: "filter builds for this architecture"})
	}
	if abi := linux.LandlockABI(); abi >= 9 {
		out = append(out, Finding{Name: "landlock", OK: true, Detail: "abi " + strconv.Itoa(abi) + ": abstract unix sockets and signals scoped; socket files in roots and connecting to host sockets there refused"})
	} else if abi >= 6 {
		out = append(out, Finding{Name: "landlock", OK: true, Detail: "abi " + strconv.Itoa(abi) + ": abstract unix sockets and signals scoped; socket files in roots refused, but not connecting to host sockets there (needs abi 9, Linux 7.1, or --strict)"})
	} else {
		sock := "socket files in roots refused"
		if abi < 2 {
			sock = "socket files in roots not refused (needs abi 2)"
		}
		out = append(out, Finding{Name: "landlock", Detail: fmt.Sprintf("abi %d (< 6): abstract unix sockets of the host stay reachable unless --no-network; %s", abi, sock),
			Fix: "use Linux 6.12+ with landlock in the lsm= list, or pass --no-network"})
	}
	return out
}

// tunFinding checks that this process can open /dev/net/tun, which the
// sandbox's own network needs in full (without it the server gets TCP and
// DNS only, through the fast path, on Linux 5.19 and later). Not fatal:
// the server still runs.
func tunFinding() Finding {
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err == nil {
		f.Close()
		return Finding{Name: "network", OK: true, Detail: "/dev/net/tun opens: the server gets its own network, filtered by rootfs"}
	}
	return Finding{Name: "network", Detail: "/dev/net/tun: " + errText(err) + ": the server would get TCP and DNS only (no UDP, no ping; before Linux 5.19, loopback only)",
		Fix: "modprobe tun, and make /dev/net/tun mode 0666 (as Debian and Ubuntu ship it; in a container, --device=/dev/net/tun)"}
}

// FUSEFinding checks that this process can open /dev/fuse read-write,
// which every FUSE mount needs: a direct mount opens it, and fusermount3
// opens it with the caller's own credentials.
func FUSEFinding() Finding {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err == nil {
		f.Close()
		return Finding{Name: "fuse", OK: true, Detail: "/dev/fuse opens read-write"}
	}
	fd := Finding{Name: "fuse", Fatal: true, Detail: "cannot open /dev/fuse: " + errText(err)}
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO):
		fd.Fix = "load the fuse module (sudo modprobe fuse); in a container, pass the device (docker run --device /dev/fuse)"
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		fd.Fix = "make /dev/fuse readable and writable by this user (sudo chmod 0666 /dev/fuse; mode 0666 is the usual default), or run rootfs as root"
	default:
		fd.Fix = "load the fuse module (modprobe fuse) and make /dev/fuse readable and writable by this user (mode 0666 is the usual default)"
	}
	return fd
}

func errText(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e.Error()
	}
	return err.Error()
}

func probeNamespaces() Finding {
	attr := &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= unix.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	var stderr bytes.Buffer
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{"rootfs-probe"}, Env: []string{envStage + "=" + stageProbe},
		Dir: "/", Stderr: &stderr, SysProcAttr: attr}
	err := cmd.Run()
	name := "sandbox"
	if os.Geteuid() != 0 {
		name = "userns"
	}
	if err == nil {
		return Finding{Name: name, OK: true, Detail: "new user/mount/pid/ipc/uts/net namespaces, tmpfs and proc mounts work"}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return Finding{Name: name, Fatal: true, Detail: "mounting in a new namespace failed: " + strings.TrimSpace(stderr.String()),
			Fix: "run outside a container that forbids mounts, or give it a fully visible /proc"}
	}
	return userNSFinding(err, os.Geteuid() != 0)
}

// inUserNS reports whether this process runs in a user namespace other
// than the initial one (its uid map is not the identity).
func inUserNS() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return !(len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295")
}

// userNSFinding explains a refused clone(CLONE_NEWUSER|...), or a user
// namespace that was created without the power to mount (AppArmor).
func userNSFinding(err error, unprivileged bool) Finding {
	f := Finding{Name: "userns", Fatal: true, Detail: "cannot create namespaces: " + errText(err)}
	if !unprivileged {
		f.Name = "sandbox"
		f.Fix = "run on a host (or a privileged container) that allows CLONE_NEWNS and CLONE_NEWPID"
		return f
	}
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	switch {
	case read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
		f.Detail = "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)"
		f.Fix = "enable them: sudo sysctl -w kernel.unprivileged_userns_clone=1, or run rootfs as root"
	case read("/proc/sys/user/max_user_namespaces") == "0":
		f.Detail = "user namespaces are disabled (user.max_user_namespaces=0)"
		f.Fix = "enable them: sudo sysctl -w user.max_user_namespaces=15000, or run rootfs as root"
	case read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
		f.Detail = "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)"
		f.Fix = "add an AppArmor profile granting 'userns,' to the rootfs binary, or sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or run rootfs as root"
	case errors.Is(err, unix.ENOSPC):
		f.Detail = "the user namespace limit is reached (ENOSPC)"
		f.Fix = "raise it: sudo sysctl -w user.max_user_namespaces=15000"
	default:
		f.Fix = "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces>0, no AppArmor/seccomp policy denying them), or run rootfs as root"
	}
	return f
}

func userNSError(err error) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, userNSFinding(err, os.Geteuid() != 0).String())
}

// runProbe is the preflight child: already in the new namespaces.
func runProbe() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := linux.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fail(err)
	}
	dir := filepath.Join(os.TempDir(), "rootfs-probe-"+strconv.Itoa(os.Getpid()))
	// Mount over the host's /tmp in this private namespace only, so the
	// probe creates nothing on the host.
	if err := linux.Mount("tmpfs", os.TempDir(), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64k"); err != nil {
		fail(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		fail(err)
	}
	if err := linux.Mount("proc", dir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		fail(err)
	}
	os.Exit(0)
}
