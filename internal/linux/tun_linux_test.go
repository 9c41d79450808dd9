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
	done := make(chan string)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies in its namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- "unshare: " + err.Error()
			return
		}
		f, err := CreateTUN("rfs0")
		if err != nil {
			done <- err.Error()
			return
		}
		defer f.Close()
		if err := ConfigureLink("rfs0", netip.MustParsePrefix("10.0.2.100/24"), netip.MustParseAddr("10.0.2.2"), 65520); err != nil {
			done <- err.Error()
			return
		}
		if err := ConfigureLink6("rfs0", netip.MustParsePrefix("fd72:6f6f:7466::100/64")); err != nil {
			done <- err.Error()
			return
		}
		// ip runs in this thread's namespace (fork copies it).
		out, err := exec.Command("ip", "addr", "show", "rfs0").CombinedOutput()
		r, err2 := exec.Command("sh", "-c", "ip -4 route; ip -6 route").CombinedOutput()
		if err != nil || err2 != nil {
			done <- string(out) + string(r)
			return
		}
		done <- string(out) + string(r)
	}()
	got := <-done
	for _, want := range []string{"inet 10.0.2.100/24", "mtu 65520", "default via 10.0.2.2 dev rfs0", "UP",
		"inet6 fd72:6f6f:7466::100/64 scope global nodad", "default dev rfs0"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
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
		t.Run(a.String(), func(t *testing.T) { addLoopbackAddr(t, a) })
	}
}

func addLoopbackAddr(t *testing.T, a netip.Addr) {
	done := make(chan string)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies in its namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- "unshare: " + err.Error()
			return
		}
		if err := LoopbackUp(); err != nil {
			done <- err.Error()
			return
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
			done <- fmt.Sprintf("control: bind before the address: %v, want EADDRNOTAVAIL", err)
			return
		}
		if err := AddLoopbackAddr(a); err != nil {
			done <- err.Error()
			return
		}
		if err := bind(); err != nil {
			done <- "bind after the address: " + err.Error()
			return
		}
		done <- ""
	}()
	if msg := <-done; msg != "" {
		t.Error(msg)
	}
}
