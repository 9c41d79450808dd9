package netstack

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
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
	t.Run("ipv6-only socket", func(t *testing.T) {
		// An IPV6_V6ONLY socket cannot reach the relay (at an IPv4
		// address): it is not the fast path's, and without a device meets
		// no route. The world's IPv6 address, which the default policy
		// allows.
		dst := netip.MustParseAddrPort("[2001:db8:113::1]:80")
		dial := func(sb *sandbox) error {
			return inNS(t, sb.pid, func() error {
				fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return err
				}
				defer unix.Close(fd)
				if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
					return err
				}
				return offerFast(sb, fd, dst)
			})
		}
		if err := dial(notun); !errors.Is(err, unix.ENETUNREACH) {
			t.Errorf("an IPv6-only socket without a device: %v, want ENETUNREACH", err)
		}
		if err := dial(tun); err != nil {
			t.Errorf("negative control (with the device): %v", err)
		}
	})
	t.Run("bound socket", func(t *testing.T) {
		// A socket bound before its connect is not the fast path's: it
		// runs as made, and without a device has no route.
		dial := func(sb *sandbox) error {
			return inNS(t, sb.pid, func() error {
				fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return err
				}
				defer unix.Close(fd)
				if err := unix.Bind(fd, &unix.SockaddrInet4{}); err != nil {
					return err
				}
				return offerFast(sb, fd, netip.MustParseAddrPort("203.0.113.1:80"))
			})
		}
		if err := dial(notun); !errors.Is(err, unix.ENETUNREACH) {
			t.Errorf("a bound socket without a device: %v, want ENETUNREACH", err)
		}
		if err := dial(tun); err != nil {
			t.Errorf("negative control (with the device): %v", err)
		}
	})
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
	if st := sb.eng.Stats(); st.Refused != 1 {
		t.Errorf("%d refusals counted, want 1", st.Refused)
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
