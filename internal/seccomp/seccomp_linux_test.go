package seccomp

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// tries are try-syscall cases (bubblewrap tests/try-syscall.c): called with
// arguments that make an allowed call fail harmlessly, so the errno tells
// whether the filter refused it.
func tries(dir string) map[string]func() error {
	errno := func(_, _ uintptr, e unix.Errno) error {
		if e == 0 {
			return nil
		}
		return e
	}
	return map[string]func() error{
		"unshare":      func() error { return errno(unix.Syscall(unix.SYS_UNSHARE, 0xffffffff, 0, 0)) },
		"tiocsti-high": func() error { return errno(unix.Syscall(unix.SYS_IOCTL, ^uintptr(0), unix.TIOCSTI|1<<32, 0)) },
		"tiocsti":      func() error { return errno(unix.Syscall(unix.SYS_IOCTL, ^uintptr(0), unix.TIOCSTI, 0)) },
		"tcgets":       func() error { return errno(unix.Syscall(unix.SYS_IOCTL, ^uintptr(0), unix.TCGETS, 0)) },
		"clone3":       func() error { return errno(unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)) },
		"clone-newns": func() error {
			return errno(unix.Syscall6(unix.SYS_CLONE, unix.CLONE_NEWNS|unix.CLONE_FS, 0, 0, 0, 0, 0))
		},
		"af-packet": func() error { return errno(unix.Syscall(unix.SYS_SOCKET, unix.AF_PACKET, 99, 0)) },
		"af-inet":   func() error { return errno(unix.Syscall(unix.SYS_SOCKET, unix.AF_INET, 99, 0)) },
		"nl-route": func() error {
			fd, _, e := unix.Syscall(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
			if e == 0 {
				unix.Close(int(fd))
			}
			return errno(0, 0, e)
		},
		"nl-uevent": func() error {
			fd, _, e := unix.Syscall(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_KOBJECT_UEVENT)
			if e == 0 {
				unix.Close(int(fd))
			}
			return errno(0, 0, e)
		},
		"mknod-chr":   func() error { return unix.Mknod(filepath.Join(dir, "c"), unix.S_IFCHR|0o600, 0x0103) },
		"mknod-fifo":  func() error { return unix.Mknod(filepath.Join(dir, "f"), unix.S_IFIFO|0o600, 0) },
		"personality": func() error { return errno(unix.Syscall(unix.SYS_PERSONALITY, 0x0040000, 0, 0)) },
		"persona-query": func() error {
			_, _, e := unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
			return errno(0, 0, e)
		},
		"chmod-suid":  func() error { return unix.Chmod(regular(dir, "p1"), 0o4755) },
		"chmod-sgid":  func() error { return unix.Fchmodat(unix.AT_FDCWD, regular(dir, "p2"), 0o2755, 0) },
		"chmod-plain": func() error { return unix.Chmod(regular(dir, "p3"), 0o755) },
		"create-suid": func() error {
			fd, err := unix.Open(filepath.Join(dir, "s"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o4755)
			if err == nil {
				unix.Close(fd)
			}
			return err
		},
		"fchmod-suid": func() error {
			fd, err := unix.Open(regular(dir, "p4"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Fchmod(fd, 0o6755)
		},
		"mknod-suid": func() error { return unix.Mknod(filepath.Join(dir, "r"), unix.S_IFREG|0o4755, 0) },
		"openat2": func() error {
			_, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC})
			return err
		},
		"fsopen": func() error { return errno(unix.Syscall(unix.SYS_FSOPEN, 0, 0, 0)) },
		"bpf":    func() error { return errno(unix.Syscall(unix.SYS_BPF, 0xffff, 0, 0)) },
		"x32":    func() error { return errno(unix.Syscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)) },
	}
}

// regular creates an empty regular file dir/name (a case of its own, so no
// other case's FIFO or node is in the way) and returns its path.
func regular(dir, name string) string {
	p := filepath.Join(dir, name)
	os.WriteFile(p, nil, 0o644)
	return p
}

func errName(err error) string {
	var e unix.Errno
	if err == nil {
		return "ok"
	}
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(envNotifyChild); mode != "" {
		notifyChild(mode)
	}
	if dir := os.Getenv("ROOTFS_SECCOMP_CHILD"); dir != "" {
		if os.Getenv("ROOTFS_SECCOMP_INSTALL") == "1" {
			if err := Install(); err != nil {
				os.Stderr.WriteString(err.Error())
				os.Exit(3)
			}
		}
		out := map[string]string{}
		for name, f := range tries(dir) {
			out[name] = errName(f())
		}
		json.NewEncoder(os.Stdout).Encode(out)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChild(t *testing.T, install bool) map[string]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ROOTFS_SECCOMP_CHILD="+t.TempDir())
	if install {
		cmd.Env = append(cmd.Env, "ROOTFS_SECCOMP_INSTALL=1")
	}
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	var out map[string]string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("child output %q: %v", b, err)
	}
	return out
}

func TestFilter(t *testing.T) {
	off := runChild(t, false)
	on := runChild(t, true)
	want := map[string]string{
		"unshare": "EPERM", "tiocsti-high": "EPERM", "tiocsti": "EPERM", "tcgets": "EBADF",
		"clone3": "ENOSYS", "clone-newns": "EPERM", "af-packet": "EAFNOSUPPORT", "af-inet": "EINVAL", "nl-route": "ok", "nl-uevent": "EPROTONOSUPPORT",
		"mknod-fifo": "ok", "personality": "EPERM", "persona-query": "ok",
		"fsopen": "ENOSYS", "bpf": "EPERM", "x32": "ENOSYS",
		"chmod-suid": "EPERM", "chmod-sgid": "EPERM", "chmod-plain": "ok", "create-suid": "EPERM",
		"fchmod-suid": "EPERM", "mknod-suid": "EPERM", "openat2": "ENOSYS",
	}
	if os.Geteuid() == 0 {
		want["mknod-chr"] = "EPERM"
	}
	for name, w := range want {
		if on[name] != w {
			t.Errorf("%s with filter: got %s, want %s", name, on[name], w)
		}
		// Negative control: without the filter a refused call reaches the
		// kernel and fails differently (or succeeds).
		// (x32 is compiled out of many kernels, so its control may match.)
		if w != "ok" && w != "EBADF" && w != "EINVAL" && name != "x32" && off[name] == w {
			t.Errorf("%s without filter also gives %s: the case cannot fail", name, w)
		}
	}
	t.Logf("without filter: %v", off)
}

func TestProgramAssembles(t *testing.T) {
	p, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) < 20 || len(p) > 4096 {
		t.Fatalf("program length %d", len(p))
	}
}
