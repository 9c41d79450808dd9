package netstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// Without a TUN device (viaNoTUN) the sandbox reaches out only through
// the fast path: the rules hold there as everywhere (runSteps runs every
// rule test in that mode too, over IPv4 and IPv6), and what the fast
// path does not take meets no route. Each attempt below that fails without the device
// reaches from a sandbox with one under the same policy (the negative
// control: the attempt itself works).
func TestNoTUNNothingElseLeaves(t *testing.T) {
	o := netpolicy.Options{Allow: []string{"203.0.113.1:4433"}}
	notun := newSandboxMode(t, o, viaNoTUN)
	tun := newSandboxMode(t, o, viaFast)

	t.Run("udp", func(t *testing.T) {
		err := udpEcho(t, notun.pid)
		if !errors.Is(err, unix.ENETUNREACH) {
			t.Errorf("UDP allowed by --allow-net, without a device: %v, want ENETUNREACH", err)
		}
		if err := udpEcho(t, tun.pid); err != nil {
			t.Errorf("negative control (with the device): %v", err)
		}
	})
	// A socket the fast path cannot take runs as made, and without a
	// device has no route; with one, the stack carries it.
	for _, c := range []struct {
		name   string
		family int
		prep   func(fd int) error
		dst    string
	}{
		// Bound to the sandbox's IPv6 address, it cannot reach the relay
		// at its IPv4 one.
		{"ipv6 socket bound to the sandbox's address", unix.AF_INET6, func(fd int) error {
			return unix.Bind(fd, &unix.SockaddrInet6{Addr: SandboxAddr6.Addr().As16()})
		}, "[2001:db8:113::1]:80"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dial := func(sb *sandbox) error {
				return inNS(t, sb.pid, func() error {
					fd, err := unix.Socket(c.family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
					if err != nil {
						return err
					}
					defer unix.Close(fd)
					if err := c.prep(fd); err != nil {
						return err
					}
					return offerFast(sb, fd, netip.MustParseAddrPort(c.dst))
				})
			}
			if err := dial(notun); !errors.Is(err, unix.ENETUNREACH) {
				t.Errorf("without a device: %v, want ENETUNREACH", err)
			}
			if err := dial(tun); err != nil {
				t.Errorf("negative control (with the device): %v", err)
			}
		})
	}
}

// TestV6onlySocketFast: an IPV6_V6ONLY socket (Go's "tcp6", some
// clients' IPv6 sockets) to an IPv6 destination is carried by the fast
// path, with or without the device: it reads the world, and the option
// is cleared (which is all the server can tell). Negative control: in a
// sandbox without the device, the same socket connected by the kernel
// meets no route, as every such socket did before the fast path took
// them.
func TestV6onlySocketFast(t *testing.T) {
	dst := netip.MustParseAddrPort("[2001:db8:113::1]:80")
	for _, mode := range []dialMode{viaFast, viaNoTUN} {
		sb := newSandboxMode(t, netpolicy.Options{}, mode)
		got := inNS(t, sb.pid, func() string {
			fd := socket6(t, true)
			defer unix.Close(fd)
			if errno, ok := sb.eng.Connect(fd, dst); !ok || errno != 0 {
				return fmt.Sprintf("taken %v, errno %v", ok, errno)
			}
			v, _ := unix.GetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY)
			return fmt.Sprintf("v6only %d, %s", v, readLine(fd, "GET / HTTP/1.0\r\n\r\n"))
		})
		if !strings.HasPrefix(got, "v6only 0, HTTP/1.") {
			t.Errorf("%s: an IPv6-only socket through the fast path: %s", mode, got)
		}
		if n := sb.eng.Stats().TCPFast; n != 1 {
			t.Errorf("%s: %d connections on the fast path, want 1", mode, n)
		}
		if mode != viaNoTUN {
			continue
		}
		err := inNS(t, sb.pid, func() error {
			fd := socket6(t, true)
			defer unix.Close(fd)
			return unix.Connect(fd, &unix.SockaddrInet6{Addr: dst.Addr().As16(), Port: int(dst.Port())})
		})
		if !errors.Is(err, unix.ENETUNREACH) {
			t.Errorf("control: without the device, the kernel's connect of the same socket: %v, want ENETUNREACH", err)
		}
	}
}

// TestBoundSocketFast: a TCP socket bound before its connect (curl
// --local-port or --interface, a client given a local address) is carried
// by the fast path from where it is bound, with or without the device,
// and keeps its port. Negative control: without the device, the same
// socket connected by the kernel meets no route, as every bound socket
// did before the fast path took them.
func TestBoundSocketFast(t *testing.T) {
	const port = 41234
	cases := []struct {
		name string
		six  bool
		sa   unix.Sockaddr
	}{
		{"the wildcard address", false, &unix.SockaddrInet4{}},
		{"the wildcard address and a port", false, &unix.SockaddrInet4{Port: port}},
		{"the sandbox's address", false, &unix.SockaddrInet4{Addr: SandboxAddr.Addr().As4()}},
		{"the IPv6 wildcard address", true, &unix.SockaddrInet6{}},
		{"the IPv6 wildcard address and a port", true, &unix.SockaddrInet6{Port: port + 1}},
	}
	dsts := map[bool]netip.AddrPort{false: worldHTTP, true: netip.MustParseAddrPort("[2001:db8:113::1]:80")}
	for _, mode := range []dialMode{viaFast, viaNoTUN} {
		sb := newSandboxMode(t, netpolicy.Options{}, mode)
		for i, c := range cases {
			bound := func() (int, int) {
				fd := socket4(t)
				if c.six {
					unix.Close(fd)
					fd = socket6(t, false)
				}
				// The control binds the port again, which the first
				// connection may still hold in TIME_WAIT.
				if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
					t.Fatal(err)
				}
				if err := unix.Bind(fd, c.sa); err != nil {
					t.Fatal(err)
				}
				return fd, localPort(fd)
			}
			got := inNS(t, sb.pid, func() string {
				fd, before := bound()
				defer unix.Close(fd)
				if errno, ok := sb.eng.Connect(fd, dsts[c.six]); !ok || errno != 0 {
					return fmt.Sprintf("taken %v, errno %v", ok, errno)
				}
				if after := localPort(fd); after != before {
					return fmt.Sprintf("bound to port %d, connected from %d", before, after)
				}
				return readLine(fd, "GET / HTTP/1.0\r\n\r\n")
			})
			if !strings.HasPrefix(got, "HTTP/1.") {
				t.Errorf("%s: bound to %s: %s", mode, c.name, got)
			}
			if n := sb.eng.Stats().TCPFast; n != int64(i+1) {
				t.Errorf("%s: bound to %s: %d connections on the fast path, want %d", mode, c.name, n, i+1)
			}
			if mode != viaNoTUN {
				continue
			}
			err := inNS(t, sb.pid, func() error {
				fd, _ := bound()
				defer unix.Close(fd)
				dst := dsts[c.six]
				if c.six {
					return unix.Connect(fd, &unix.SockaddrInet6{Addr: dst.Addr().As16(), Port: int(dst.Port())})
				}
				return unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())})
			})
			if !errors.Is(err, unix.ENETUNREACH) {
				t.Errorf("control: bound to %s, without the device, the kernel's connect: %v, want ENETUNREACH", c.name, err)
			}
		}
	}
}

// localPort is the port socket fd is bound to.
func localPort(fd int) int {
	switch sa, _ := unix.Getsockname(fd); sa := sa.(type) {
	case *unix.SockaddrInet4:
		return sa.Port
	case *unix.SockaddrInet6:
		return sa.Port
	}
	return -1
}

// TestOwnAddress: a connection to the sandbox's own address, as a
// server's client part may make to a listener of its own, is the
// sandbox's kernel's, with or without the TUN, over IPv4 and IPv6.
func TestOwnAddress(t *testing.T) {
	for _, mode := range []dialMode{viaFast, viaNoTUN} {
		sb := newSandboxMode(t, netpolicy.Options{}, mode)
		for _, a := range []netip.Addr{SandboxAddr.Addr(), SandboxAddr6.Addr()} {
			err := inNS(t, sb.pid, func() error {
				l, err := net.Listen("tcp", netip.AddrPortFrom(a, 0).String())
				if err != nil {
					return err
				}
				defer l.Close()
				go func() {
					if c, err := l.Accept(); err == nil {
						c.Write([]byte("own\n"))
						c.Close()
					}
				}()
				r := connect(sb.dial, l.Addr().String(), "", "")
				if !r.reached() || r.line != "own" {
					return fmt.Errorf("%v", r)
				}
				return nil
			})
			if err != nil {
				t.Errorf("%s: %s: %v", mode, a, err)
			}
		}
		if st := sb.eng.Stats(); st.Refused != 0 || st.TCPFast != 0 {
			t.Errorf("%s: %d refused, %d carried by the fast path; want neither", mode, st.Refused, st.TCPFast)
		}
	}
}

// TestNoTUNRefusalsSaid: without a device the fast path refuses what the
// stack would have, with the same record (destination, reason, flag).
func TestNoTUNRefusalsSaid(t *testing.T) {
	var got []Refusal
	sb := newSandboxEngine(t, netpolicy.Options{}, viaNoTUN, Options{Refused: func(r Refusal) { got = append(got, r) }})
	r := inNS(t, sb.pid, func() result { return connect(sb.dial, "192.168.77.1:80", "", "") })
	if r.reached() || !errors.Is(r.err, unix.ECONNREFUSED) {
		t.Fatalf("the LAN without a device: %v, want ECONNREFUSED", r)
	}
	if len(got) != 1 || got[0].Proto != "tcp" || !strings.HasPrefix(got[0].Dst, "192.168.77.1:80") || got[0].Decision.Hint == "" {
		t.Errorf("refusals recorded: %+v, want one for 192.168.77.1:80 naming a flag", got)
	}
	// A socket the fast path cannot take (bound first) is judged all
	// the same: refused and said, not left to meet no route unsaid.
	errno := inNS(t, sb.pid, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrInet4{}); err != nil {
			return err
		}
		errno, ok := sb.eng.Connect(fd, netip.MustParseAddrPort("169.254.169.254:80"))
		if !ok {
			return errors.New("let run")
		}
		return errno
	})
	if !errors.Is(errno, unix.ECONNREFUSED) {
		t.Errorf("a bound socket to the metadata address without a device: %v, want ECONNREFUSED", errno)
	}
	if len(got) != 2 || !strings.HasPrefix(got[1].Dst, "169.254.169.254:80") {
		t.Errorf("refusals recorded: %+v, want a second for 169.254.169.254:80", got)
	}
	if st := sb.eng.Stats(); st.Refused != 2 {
		t.Errorf("%d refusals counted, want 2", st.Refused)
	}
}

// TestDNSTCPIdleLeavesUDP: DNS connections that send nothing hold at
// most maxDNSTCP places, so questions over UDP are still answered (they
// shared maxDNS's 64 places, and 64 idle connections shut the resolver
// off for the whole sandbox). Through the resolver on lo and through the
// stack's.
func TestDNSTCPIdleLeavesUDP(t *testing.T) {
	for _, mode := range []dialMode{viaStack, viaNoTUN} {
		sb := newSandboxMode(t, netpolicy.Options{}, mode)
		err := inNS(t, sb.pid, func() error {
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for range 70 {
				c, err := net.DialTimeout("tcp4", Gateway.String()+":53", time.Second)
				if err != nil {
					break // refused past the stack's limit: fine
				}
				conns = append(conns, c)
			}
			time.Sleep(100 * time.Millisecond)
			_, err := resolve("www.internet.test")
			return err
		})
		if err != nil {
			t.Errorf("%s: a question over UDP with 70 idle DNS connections open: %v", mode, err)
		}
	}
}

// TestNoTUNDNSOverTCP: the resolver on lo answers over TCP too, where a
// client asks again after a truncated answer.
func TestNoTUNDNSOverTCP(t *testing.T) {
	sb := newSandboxMode(t, netpolicy.Options{}, viaNoTUN)
	err := inNS(t, sb.pid, func() error {
		c, err := net.DialTimeout("tcp4", Gateway.String()+":53", 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		m := new(dns.Msg)
		m.SetQuestion("www.internet.test.", dns.TypeA)
		q, err := m.Pack()
		if err != nil {
			return err
		}
		if _, err := c.Write(append([]byte{byte(len(q) >> 8), byte(len(q))}, q...)); err != nil {
			return err
		}
		var hdr [2]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return err
		}
		b := make([]byte, int(hdr[0])<<8|int(hdr[1]))
		if _, err := io.ReadFull(c, b); err != nil {
			return err
		}
		if !strings.Contains(string(b), string([]byte{203, 0, 113, 1})) {
			return errors.New("no 203.0.113.1 in the answer")
		}
		return nil
	})
	if err != nil {
		t.Errorf("DNS over TCP to the gateway without a device: %v", err)
	}
}

// offerFast offers the connect of fd to dst to sb's fast path, as P1's
// listener does, which must decline it; the call then runs as made.
func offerFast(sb *sandbox, fd int, dst netip.AddrPort) error {
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	_, ok := sb.eng.Connect(dup, dst)
	unix.Close(dup)
	if ok {
		return errors.New("the fast path took the call")
	}
	var sa unix.Sockaddr = &unix.SockaddrInet6{Addr: dst.Addr().As16(), Port: int(dst.Port())}
	if dst.Addr().Is4() {
		sa = &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())}
	}
	return unix.Connect(fd, sa)
}

func init() { attacks["busy"] = busyConnects }

// shortDial is hostNSDial giving up after 3 s (not 10): on the black
// hole, when busyConnects has counted its answers, so a run ends sooner.
func shortDial(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return hostNSDial(ctx, network, addr)
}

// busyConnects makes 300 blocking connects to addr at once (black-holed
// in the world: each holds one of the listener's 256 places for as long
// as P1 dials), and counts the answers given within two seconds, by
// errno.
func busyConnects(addr string) map[string]string {
	got := connectMany(addr, 300)
	counts := map[string]int{}
	for deadline := time.After(2 * time.Second); ; {
		select {
		case e := <-got:
			counts[e]++
			continue
		case <-deadline:
		}
		break
	}
	steps := map[string]string{}
	for k, n := range counts {
		steps[k] = strconv.Itoa(n)
	}
	return steps
}

// connectMany makes n blocking connects to addr at once, each from a
// goroutine of its own, and gives each answer as it comes.
func connectMany(addr string, n int) <-chan string {
	got := make(chan string, n)
	for range n {
		go func() {
			fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			got <- errName(unix.Connect(fd, sa4(addr)))
		}()
	}
	return got
}

// TestNoTUNListenerFull: past the 256 connects the listener answers at
// once, a connect is refused as when the flows are all taken
// (ECONNREFUSED, and said), where without a TUN it would meet no route
// unsaid (the control: the same workload, the busy connects let run,
// gets ENETUNREACH).
func TestNoTUNListenerFull(t *testing.T) {
	blackhole(t)
	var mu sync.Mutex
	var busy int
	sb := newSandboxEngine(t, netpolicy.Options{}, viaNoTUN, Options{Dial: shortDial, Refused: func(r Refusal) {
		if r.Decision.Reason == "too many connections at once" {
			mu.Lock()
			busy++
			mu.Unlock()
		}
	}})
	steps := runClient(t, sb, "busy", "203.0.113.77:80", 1, nil).Steps
	logSteps(t, steps)
	if steps["ENETUNREACH"] != "" || steps["ECONNREFUSED"] == "" {
		t.Errorf("without a TUN, the connects past the listener's room: %v, want ECONNREFUSED and no ENETUNREACH", steps)
	}
	mu.Lock()
	n := busy
	mu.Unlock()
	// Each refused connect was said (more may have been, after the
	// child stopped counting).
	if refused, _ := strconv.Atoi(steps["ECONNREFUSED"]); n < refused {
		t.Errorf("%d refusals said, want at least %d", n, refused)
	}
	// The control: the listener lets them run (Busy nil).
	ctl := newSandboxEngine(t, netpolicy.Options{}, viaNoTUN, Options{Dial: shortDial})
	ctl.noBusy = true
	steps = runClient(t, ctl, "busy", "203.0.113.77:80", 1, nil).Steps
	logSteps(t, steps)
	if steps["ENETUNREACH"] == "" {
		t.Errorf("control: with the busy connects let run, %v, want some ENETUNREACH", steps)
	}
}
