package linux

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCreateTUN makes a TUN device in a new network namespace of a
// locked thread and checks the addresses and the default routes.
func TestCreateTUN(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a new network namespace and /dev/net/tun)")
	}
	got := inNewNetns(func() string {
		f, err := CreateTUN("rfs0")
		if err != nil {
			return err.Error()
		}
		defer f.Close()
		if err := ConfigureLink("rfs0", netip.MustParsePrefix("10.0.2.100/24"), netip.MustParseAddr("10.0.2.2"), 65520); err != nil {
			return err.Error()
		}
		if err := ConfigureLink6("rfs0", netip.MustParsePrefix("fd72:6f6f:7466::100/64")); err != nil {
			return err.Error()
		}
		// ip runs in this thread's namespace (fork copies it).
		out, _ := exec.Command("ip", "addr", "show", "rfs0").CombinedOutput()
		r, _ := exec.Command("sh", "-c", "ip -4 route; ip -6 route").CombinedOutput()
		return string(out) + string(r)
	})
	for _, want := range []string{"inet 10.0.2.100/24", "mtu 65520", "default via 10.0.2.2 dev rfs0", "UP",
		"inet6 fd72:6f6f:7466::100/64 scope global nodad", "default dev rfs0"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestPersistTUN: a persistent device stays after its queue is closed,
// detached (it drops what is routed to it), until its namespace goes.
// Negative control: without PersistTUN the close removes it.
func TestPersistTUN(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a new network namespace and /dev/net/tun)")
	}
	for _, persist := range []bool{false, true} {
		got := inNewNetns(func() string {
			if err := closedTUN(persist); err != nil {
				return err.Error()
			}
			out, _ := exec.Command("ip", "link", "show", "rfs0").CombinedOutput()
			return string(out)
		})
		if there := strings.Contains(got, "rfs0:"); there != persist {
			t.Errorf("persist %v: after the close, ip link show rfs0 says:\n%s", persist, got)
		}
	}
}

// closedTUN makes the device rfs0 in this thread's namespace, persistent
// if persist, and closes its queue.
func closedTUN(persist bool) error {
	f, err := CreateTUN("rfs0")
	if err != nil {
		return err
	}
	if persist {
		if err := PersistTUN(f); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// TestPersistTUNAttach: a thread of uid 0 without any capability (as
// the server runs when rootfs runs as root) attaches a queue by name to
// a persistent device whose queue was closed: the device has no owner or
// group, so the kernel asks for no capability (PersistTUN's comment says
// what keeps the server off it). Negative control: without PersistTUN
// the name is free again, and making a device there is refused.
func TestPersistTUNAttach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a new network namespace and /dev/net/tun)")
	}
	for _, persist := range []bool{false, true} {
		got := inNewNetns(func() string {
			if err := closedTUN(persist); err != nil {
				return "as root: " + err.Error()
			}
			// This thread only, and it is never reused.
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var none [2]unix.CapUserData
			if err := unix.Capset(&hdr, &none[0]); err != nil {
				return "capset: " + err.Error()
			}
			q, err := CreateTUN("rfs0")
			if err != nil {
				return err.Error()
			}
			q.Close()
			return "attached"
		})
		want := "ioctl(TUNSETIFF): operation not permitted"
		if persist {
			want = "attached"
		}
		if got != want {
			t.Errorf("persist %v: without capabilities, CreateTUN of the closed device's name: %s; want %s", persist, got, want)
		}
	}
}

// TestAddLoopbackAddr: in a new network namespace, a socket can be bound
// at the address only once lo has it (the control: EADDRNOTAVAIL before),
// for an IPv4 and an IPv6 address.
func TestAddLoopbackAddr(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a new network namespace)")
	}
	for _, a := range []netip.Addr{netip.MustParseAddr("10.0.2.2"), netip.MustParseAddr("fd52:6f6f:7466::2")} {
		msg := inNewNetns(func() string {
			if err := LoopbackUp(); err != nil {
				return err.Error()
			}
			bind := func() error {
				family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Addr: a.As16(), Port: 53})
				if a.Is4() {
					family, sa = unix.AF_INET, &unix.SockaddrInet4{Addr: a.As4(), Port: 53}
				}
				fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return err
				}
				defer unix.Close(fd)
				return unix.Bind(fd, sa)
			}
			if err := bind(); err != unix.EADDRNOTAVAIL {
				return fmt.Sprintf("control: bind before the address: %v, want EADDRNOTAVAIL", err)
			}
			if err := AddLoopbackAddr(a); err != nil {
				return err.Error()
			}
			if err := bind(); err != nil {
				return "bind after the address: " + err.Error()
			}
			return ""
		})
		if msg != "" {
			t.Errorf("%s: %s", a, msg)
		}
	}
}

// inNewNetns runs f on a locked thread in a new network namespace and
// returns what it says; the thread dies in its namespace.
func inNewNetns(f func() string) string {
	done := make(chan string)
	go func() {
		runtime.LockOSThread() // never unlocked
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- "unshare: " + err.Error()
			return
		}
		done <- f()
	}()
	return <-done
}
