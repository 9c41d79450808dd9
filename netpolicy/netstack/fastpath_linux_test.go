package netstack

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// The fast path's own tests; every policy rule is also run through it
// (runSteps's modes).

var worldHTTP = netip.MustParseAddrPort("203.0.113.1:80")

// socket4 is a new TCP/IPv4 socket of the calling thread's namespace.
func socket4(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// socket6 is a TCP socket over IPv6; v6only sets IPV6_V6ONLY.
func socket6(t *testing.T, v6only bool) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v6only {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			t.Fatal(err)
		}
	}
	return fd
}

// TestFastPathRefusesAForeignSocket: the deputy problem. Connect acts on a
// socket the sandbox hands it; one from the host's namespace (passed in
// over a unix socket, say) would be connected to whatever listens at the
// relay's port on the host's loopback, with rootfs's rights. Connect
// declines it. Negative control: the same socket connected as Connect
// would connect it reaches a host service at that port.
func TestFastPathRefusesAForeignSocket(t *testing.T) {
	sb := newSandboxMode(t, netpolicy.Options{}, viaFast)
	relay := sb.eng.fast.Load().addr
	type got struct {
		ok     bool
		errno  unix.Errno
		reach  string
		listen error
	}
	g := inNS(t, hostPID, func() got {
		// A host service on the relay's port number.
		l, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(relay.Port))
		if err != nil {
			return got{listen: err}
		}
		defer l.Close()
		go serveLine(l, "host service at the relay's port")
		fd := socket4(t)
		f := os.NewFile(uintptr(fd), "socket") // closes fd, once
		defer f.Close()
		errno, ok := sb.eng.Connect(fd, worldHTTP)
		r := got{ok: ok, errno: errno}
		// The control: what Connect would have done with it.
		if err := unix.Connect(fd, &relay); err == nil {
			c, err := net.FileConn(f)
			if err == nil {
				r.reach = readResult(c).line
				c.Close()
			}
		}
		return r
	})
	if g.listen != nil {
		t.Skipf("the relay's port is taken on the host: %v", g.listen)
	}
	if g.ok {
		t.Errorf("Connect took a socket of the host's namespace (errno %v)", g.errno)
	}
	if g.reach != "host service at the relay's port" {
		t.Errorf("negative control: the host socket connected to the relay's port got %q", g.reach)
	}
}

// TestFastPathDeclines: what the fast path does not take runs as made and
// meets the stack: a bound socket, a UDP socket, a connected one, the
// gateway, an IPv4 destination the policy refuses. None is counted.
func TestFastPathDeclines(t *testing.T) {
	sb := newSandboxMode(t, netpolicy.Options{}, viaFast)
	type c struct {
		name string
		sock func() int
		dst  netip.AddrPort
	}
	cases := []c{
		// The kernel would send from the loopback address: no route.
		{"bound to the loopback", func() int {
			fd := socket4(t)
			if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
				t.Fatal(err)
			}
			return fd
		}, worldHTTP},
		// No port until it connects: the relay could not know it.
		{"bound to the sandbox's address, IP_BIND_ADDRESS_NO_PORT", func() int {
			fd := socket4(t)
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1); err != nil {
				t.Fatal(err)
			}
			if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: SandboxAddr.Addr().As4()}); err != nil {
				t.Fatal(err)
			}
			return fd
		}, worldHTTP},
		// Bound, the option can no longer be cleared.
		{"ipv6-only socket, bound", func() int {
			fd := socket6(t, true)
			if err := unix.Bind(fd, &unix.SockaddrInet6{}); err != nil {
				t.Fatal(err)
			}
			return fd
		}, netip.MustParseAddrPort("[2001:db8:113::1]:80")},
		{"udp", func() int {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			return fd
		}, worldHTTP},
		{"connected", func() int {
			fd := socket4(t)
			if err := unix.Connect(fd, &unix.SockaddrInet4{Port: 80, Addr: worldHTTP.Addr().As4()}); err != nil {
				t.Fatal(err)
			}
			return fd
		}, worldHTTP},
		{"gateway", func() int { return socket4(t) }, netip.AddrPortFrom(Gateway, 53)},
		{"refused by the policy", func() int { return socket4(t) }, netip.MustParseAddrPort("192.168.77.1:80")},
		{"loopback", func() int { return socket4(t) }, netip.MustParseAddrPort("127.0.0.1:80")},
		// The relay is reached at an IPv4 address, which such a socket
		// cannot connect to.
		{"ipv6-only socket, v4-mapped destination", func() int { return socket6(t, true) }, mapped(worldHTTP)},
		{"ipv6 socket, refused by the policy", func() int { return socket6(t, false) }, netip.MustParseAddrPort("[fd00:77::1]:80")},
		{"ipv6 socket, mapped loopback", func() int { return socket6(t, false) }, netip.MustParseAddrPort("[::ffff:127.0.0.1]:5432")},
		{"ipv6 socket, bound", func() int {
			fd := socket6(t, false)
			if err := unix.Bind(fd, &unix.SockaddrInet6{Addr: SandboxAddr6.Addr().As16()}); err != nil {
				t.Fatal(err)
			}
			return fd
		}, netip.MustParseAddrPort("[2001:db8:113::1]:80")},
		{"ipv4 socket, ipv6 destination", func() int { return socket4(t) }, netip.MustParseAddrPort("[2001:db8:113::1]:80")},
		// A sockaddr_in given to an IPv6 socket: the kernel refuses it.
		{"ipv6 socket, ipv4 destination", func() int { return socket6(t, false) }, worldHTTP},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok := inNS(t, sb.pid, func() bool {
				fd := tc.sock()
				defer unix.Close(fd)
				_, ok := sb.eng.Connect(fd, tc.dst)
				return ok
			})
			if ok {
				t.Errorf("the fast path took it")
			}
		})
	}
	if n := sb.eng.Stats().TCPFast; n != 0 {
		t.Errorf("%d connections counted as the fast path's", n)
	}
	// Without the engine's IPv6 (the host routes none), an IPv6
	// destination is not the fast path's either; an IPv4 one still is,
	// from either family.
	sb4 := newSandboxFamilies(t, netpolicy.Options{}, viaFast, false)
	for _, tc := range []struct {
		name string
		six  bool
		dst  netip.AddrPort
		want bool
	}{
		{"ipv6 destination", true, netip.MustParseAddrPort("[2001:db8:113::1]:80"), false},
		{"v4-mapped destination", true, mapped(worldHTTP), true},
		{"ipv4 destination", false, worldHTTP, true},
	} {
		t.Run("no IPv6/"+tc.name, func(t *testing.T) {
			ok := inNS(t, sb4.pid, func() bool {
				fd := socket4(t)
				if tc.six {
					unix.Close(fd)
					fd = socket6(t, false)
				}
				defer unix.Close(fd)
				_, ok := sb4.eng.Connect(fd, tc.dst)
				return ok
			})
			if ok != tc.want {
				t.Errorf("the fast path took it: %v, want %v", ok, tc.want)
			}
		})
	}
}

func mapped(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16(ap.Addr().As16()), ap.Port())
}

func TestParseSockaddr(t *testing.T) {
	in4 := func(port uint16, a [4]byte) []byte {
		b := make([]byte, unix.SizeofSockaddrInet4)
		binary.NativeEndian.PutUint16(b, unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:], port)
		copy(b[4:], a[:])
		return b
	}
	in6 := func(port uint16, a string, scope uint32, n int) []byte {
		b := make([]byte, unix.SizeofSockaddrInet6)
		binary.NativeEndian.PutUint16(b, unix.AF_INET6)
		binary.BigEndian.PutUint16(b[2:], port)
		ip := netip.MustParseAddr(a).As16()
		copy(b[8:], ip[:])
		binary.NativeEndian.PutUint32(b[24:], scope)
		return b[:n]
	}
	for _, tc := range []struct {
		name string
		sa   []byte
		want string // "" when not parsed
	}{
		{"ipv4", in4(443, [4]byte{203, 0, 113, 1}), "203.0.113.1:443"},
		{"ipv4, short", in4(443, [4]byte{203, 0, 113, 1})[:8], ""},
		{"ipv6", in6(80, "2001:db8::1", 0, 28), "[2001:db8::1]:80"},
		{"ipv6, without its scope field (24 bytes, as the kernel takes)", in6(80, "2001:db8::1", 0, 24), "[2001:db8::1]:80"},
		{"ipv6, v4-mapped", in6(80, "::ffff:203.0.113.1", 0, 28), "[::ffff:203.0.113.1]:80"},
		{"ipv6, with a scope", in6(80, "fe80::1", 2, 28), ""},
		{"ipv6, short", in6(80, "2001:db8::1", 0, 20), ""},
		{"unix", []byte{1, 0, '/', 't', 'm', 'p', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ""},
	} {
		got, ok := parseSockaddr(tc.sa)
		if s := got.String(); !ok && tc.want != "" || ok && s != tc.want {
			t.Errorf("%s: %v %v, want %q", tc.name, got, ok, tc.want)
		}
	}
}

// TestFastPathRelayDialledDirectly: the relay listener is on the
// sandbox's own loopback; a connection the sandbox makes to it itself is
// no flow Connect noted, and is reset with nothing relayed.
func TestFastPathRelayDialledDirectly(t *testing.T) {
	sb := newSandboxMode(t, netpolicy.Options{}, viaStack)
	relay := sb.eng.fast.Load().addr
	err := inNS(t, sb.pid, func() error {
		c, err := net.DialTimeout("tcp4", "127.0.0.1:"+strconv.Itoa(relay.Port), 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		_, _ = c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
		_, err = c.Read(make([]byte, 1))
		return err
	})
	if !errors.Is(err, unix.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Errorf("a connection straight to the relay: %v, want a reset", err)
	}
	if st := sb.eng.Stats(); st.TCPAllowed != 0 {
		t.Errorf("%d connections relayed", st.TCPAllowed)
	}
}

// TestFastPathDestinationRefuses: an allowed destination with nothing
// listening. A blocking connect gets the destination's answer
// (ECONNREFUSED), as through the stack; a non-blocking one connects and
// is then reset. Negative control: the same port through the stack is
// refused at connect.
func TestFastPathDestinationRefuses(t *testing.T) {
	closed := netip.MustParseAddrPort("203.0.113.1:9")
	for _, mode := range dialModes {
		t.Run(mode.String(), func(t *testing.T) {
			sb := newSandboxMode(t, netpolicy.Options{}, mode)
			err := inNS(t, sb.pid, func() error {
				c, err := sb.dial(closed.String())
				if err != nil {
					return err
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(3 * time.Second))
				_, err = c.Read(make([]byte, 1))
				return err
			})
			want := unix.ECONNREFUSED
			if mode == viaFastNonblocking {
				want = unix.ECONNRESET
			}
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", closed, err, want)
			}
		})
	}
}
