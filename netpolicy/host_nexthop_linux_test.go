package netpolicy

import (
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inNewNetNS runs f on a thread of its own in a new network namespace
// (the thread ends with it: never unlocked), skipping the test where
// that cannot be done. Commands f runs start in that namespace too.
func inNewNetNS(t *testing.T, f func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
	done := make(chan string, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- "skip: unshare(CLONE_NEWNET): " + err.Error()
			return
		}
		defer func() {
			if r := recover(); r != nil {
				if s, ok := r.(skip); ok {
					done <- "skip: " + string(s)
					return
				}
				done <- "panic"
				panic(r)
			}
			done <- ""
		}()
		f()
	}()
	if msg := <-done; strings.HasPrefix(msg, "skip: ") {
		t.Skip(msg[len("skip: "):])
	}
}

type skip string

// ipCmd runs ip with args in the calling thread's namespace; an error
// is a skip (an ip or a kernel without nexthop objects).
func ipCmd(args ...string) {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		panic(skip("ip " + strings.Join(args, " ") + ": " + err.Error() + ": " + string(out)))
	}
}

// hostLAN makes, in the calling thread's namespace, a veth pair d0/d1
// with 198.51.100.2/24 and 2001:db8:5::2/64 on d0, and turns the
// kernel's nexthop compatibility off, as FRR advises: a route that uses a
// nexthop object then carries only its id (RTA_NH_ID), no RTA_GATEWAY.
func hostLAN() {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "d0", "type", "veth", "peer", "name", "d1"},
		// No link-local addresses, whose DAD would notify a watcher a
		// second later (and hide what it missed).
		{"link", "set", "d0", "addrgenmode", "none"},
		{"link", "set", "d1", "addrgenmode", "none"},
		{"link", "set", "d0", "up"},
		{"link", "set", "d1", "up"},
		{"addr", "add", "198.51.100.2/24", "dev", "d0"},
		{"-6", "addr", "add", "2001:db8:5::2/64", "dev", "d0", "nodad"},
	} {
		ipCmd(args...)
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/nexthop_compat_mode", []byte("0"), 0); err != nil {
		panic(skip("nexthop_compat_mode: " + err.Error()))
	}
}

// TestHostNowNexthopObjects: a route through a nexthop object is on-link
// only when the object has no gateway. Without the objects read, a
// route via a gateway (203.0.113.0/24 nhid 1, 1 being "via
// 198.51.100.1") looked on-link: a whole internet prefix was refused as
// the host's LAN (a router's full table, under FRR, refused the
// internet). Controls: the kernel's own on-link route, and a route
// through a nexthop object with no gateway, are on-link.
func TestHostNowNexthopObjects(t *testing.T) {
	var h Host
	var err error
	inNewNetNS(t, func() {
		hostLAN()
		for _, args := range [][]string{
			{"nexthop", "add", "id", "1", "via", "198.51.100.1", "dev", "d0"},
			{"route", "add", "203.0.113.0/24", "nhid", "1"},
			{"-6", "nexthop", "add", "id", "2", "via", "2001:db8:5::1", "dev", "d0"},
			{"-6", "route", "add", "2001:db8:77::/48", "nhid", "2"},
			{"nexthop", "add", "id", "4", "group", "1"},
			{"route", "add", "192.0.2.0/24", "nhid", "4"},
			{"-6", "nexthop", "add", "id", "3", "dev", "d0"},
			{"-6", "route", "add", "2001:db8:88::/48", "nhid", "3"},
		} {
			ipCmd(args...)
		}
		h, err = HostNow()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"203.0.113.0/24", "2001:db8:77::/48", "192.0.2.0/24"} {
		if slices.Contains(h.Nets, netip.MustParsePrefix(s)) {
			t.Errorf("%s, routed through a nexthop object with a gateway, is taken as on-link: %v", s, h.Nets)
		}
	}
	for _, s := range []string{"198.51.100.0/24", "2001:db8:88::/48"} {
		if !slices.Contains(h.Nets, netip.MustParsePrefix(s)) {
			t.Errorf("control: %s is on-link, not in %v", s, h.Nets)
		}
	}
}

// TestHostNowMultipathOnLink: a multipath route whose hops have no
// gateway (ECMP over two links) is on-link; it was taken as routed.
func TestHostNowMultipathOnLink(t *testing.T) {
	var h Host
	var err error
	inNewNetNS(t, func() {
		hostLAN()
		ipCmd("route", "add", "192.0.2.0/24", "nexthop", "dev", "d0", "nexthop", "dev", "d1")
		ipCmd("route", "add", "203.0.113.0/24", "nexthop", "via", "198.51.100.1", "dev", "d0", "nexthop", "via", "198.51.100.3", "dev", "d0")
		h, err = HostNow()
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(h.Nets, netip.MustParsePrefix("192.0.2.0/24")) {
		t.Errorf("an on-link multipath route is missed: %v", h.Nets)
	}
	if slices.Contains(h.Nets, netip.MustParsePrefix("203.0.113.0/24")) {
		t.Errorf("control: a multipath route via gateways is taken as on-link: %v", h.Nets)
	}
}

// TestWatchHostNexthopReplaced: replacing a nexthop object changes every
// route that uses it, with no route notification when the kernel's
// nexthop compatibility is off; the watcher follows it all the same.
func TestWatchHostNexthopReplaced(t *testing.T) {
	watchRefuses(t, netip.MustParseAddr("2001:db8:88::1"), func() {
		ipCmd("-6", "nexthop", "add", "id", "3", "via", "2001:db8:5::1", "dev", "d0")
		ipCmd("-6", "route", "add", "2001:db8:88::/48", "nhid", "3")
	}, func() {
		ipCmd("-6", "nexthop", "replace", "id", "3", "dev", "d0")
	}, "the nexthop object now on-link: its route's network is still allowed")
}

// watchRefuses watches the host's side of a new namespace with hostLAN,
// made as setup says, and fails with msg unless target, allowed at
// first (the control), is refused within 5 s of change.
func watchRefuses(t *testing.T, target netip.Addr, setup, change func(), msg string) {
	t.Helper()
	p, _ := New(Options{})
	var failed string
	inNewNetNS(t, func() {
		hostLAN()
		setup()
		stop, err := WatchHost(p)
		if err != nil {
			failed = err.Error()
			return
		}
		defer stop()
		if _, refused := p.Classify(target); refused {
			failed = "control: refused before the change"
			return
		}
		change()
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if _, refused := p.Classify(target); refused {
				return
			}
		}
		failed = msg
	})
	if failed != "" {
		t.Error(failed)
	}
}
