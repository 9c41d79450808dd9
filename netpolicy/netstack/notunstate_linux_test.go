package netstack

// The fast path and the resolver at their edges, most visible without a
// TUN (where nothing else carries what they leave): sockets mid-connect,
// MPTCP against the relay, DNS flows, a full listener. From the second
// outside review of the TUN-less network.

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

func init() {
	attacks["connecting"] = connecting
	attacks["mptcp-state"] = mptcpState
}

// connecting: connect(2) calls on sockets the kernel answers without
// trying the address given, though getpeername says ENOTCONN and they
// are neither bound by the program nor listening: one whose connect is
// in progress (SYN_SENT: EALREADY), and one whose connect failed after
// it was let run (the kernel answers the pending error, and resets the
// socket, so that the next connect runs). addr is an address the policy
// refuses; the destination the first connect is let run to is a listener
// of the namespace's own loopback.
func connecting(addr string) map[string]string {
	steps := map[string]string{}
	lfd, local := loopbackListener(0)
	defer unix.Close(lfd)
	nb := func() int {
		fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		return fd
	}
	// The accept queue full (backlog 0 holds one), so the next SYN is
	// dropped and its connect stays in progress.
	first := nb()
	defer unix.Close(first)
	unix.Connect(first, local)
	time.Sleep(100 * time.Millisecond)
	fd := nb()
	defer unix.Close(fd)
	steps["in progress: connect to loopback"] = errName(unix.Connect(fd, local))
	time.Sleep(50 * time.Millisecond)
	steps["in progress: then to the refused address"] = errName(unix.Connect(fd, sa4(addr)))

	// A non-blocking connect refused by the loopback (RST), then a
	// connect to the refused address, then one to the listener (after
	// its queue is emptied).
	closed, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	unix.Bind(closed, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	csa, _ := unix.Getsockname(closed)
	unix.Close(closed) // a port nothing listens at
	if nfd, _, err := unix.Accept(lfd); err == nil {
		unix.Close(nfd)
	}
	unix.Close(fd)
	fd2 := nb()
	defer unix.Close(fd2)
	steps["failed: connect to a closed port"] = errName(unix.Connect(fd2, csa))
	time.Sleep(100 * time.Millisecond)
	steps["failed: then to the refused address"] = errName(unix.Connect(fd2, sa4(addr)))
	r := errName(unix.Connect(fd2, local))
	if r == "EINPROGRESS" {
		r = "ok" // as fast as the loopback answers
	}
	steps["failed: then to the listener"] = r
	return steps
}

// TestConnectingSocketAsTheKernel: without a TUN, a connect(2) to a
// refused address on a socket whose connect is in progress, or failed,
// is answered as the kernel answers it (EALREADY; the pending error,
// after which the socket connects again), not with the fast path's own
// ECONNREFUSED, which leaves the socket as it was.
func TestConnectingSocketAsTheKernel(t *testing.T) {
	asTheKernel(t, newSandboxMode(t, netpolicy.Options{}, viaNoTUN), "connecting", "192.168.77.1:80")
}

// mptcpState: an MPTCP socket connected to addr (as curl --mptcp): is it
// still MPTCP (TCP_IS_MPTCP), or did it fall back to TCP?
func mptcpState(addr string) map[string]string {
	steps := map[string]string{}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP)
	if err != nil {
		steps["socket"] = errName(err)
		return steps
	}
	defer unix.Close(fd)
	steps["connect"] = errName(unix.Connect(fd, sa4(addr)))
	l := readLine(fd, "GET / HTTP/1.0\r\n\r\n")
	if strings.HasPrefix(l, "HTTP/") {
		l = "HTTP"
	}
	steps["read"] = l
	const tcpIsMPTCP = 43 // TCP_IS_MPTCP
	v, err := unix.GetsockoptInt(fd, unix.SOL_TCP, tcpIsMPTCP)
	steps["still mptcp"] = errName(err)
	if err == nil {
		steps["still mptcp"] = map[bool]string{true: "yes", false: "no (fell back to TCP)"}[v != 0]
	}
	return steps
}

// TestMPTCPFallsBackAtTheRelay: the harness's relay listener is made by
// net.ListenTCP, which since Go 1.24 listens with MPTCP; rootfs's (P2's
// listenAt) is a plain TCP socket. The sandbox's MPTCP socket then stays
// MPTCP against the harness's relay, and never falls back as c717ad9 and
// f47a83f say it does in rootfs.
func TestMPTCPFallsBackAtTheRelay(t *testing.T) {
	sb := newSandboxMode(t, netpolicy.Options{}, viaNoTUN)
	got := runClient(t, sb, "mptcp-state", "203.0.113.1:80", 1, nil).Steps
	logSteps(t, got)
	if got["still mptcp"] == "yes" {
		t.Errorf("the sandbox's MPTCP socket did not fall back against the harness's relay (MPTCP listener), as it would against rootfs's: %v", got)
	}
}

// TestDNSFlowsLeaveRoom: with the TUN, each DNS client flow
// over UDP (a source port: glibc and Go open a socket per lookup) holds
// one of maxDNS's places until it idles (dnsIdle, 10 s), so 64 lookups
// within 10 s leave the next one unanswered, over UDP and (since
// c717ad9, which makes a TCP question wait for a place) over TCP too.
// Without the TUN a datagram holds its place only while answered.
func TestDNSFlowsLeaveRoom(t *testing.T) {
	for _, mode := range []dialMode{viaStack, viaNoTUN} {
		sb := newSandboxMode(t, netpolicy.Options{}, mode)
		type res struct {
			failed   int
			udp, tcp error
			tcpTook  time.Duration
		}
		r := inNS(t, sb.pid, func() res {
			var r res
			for range maxDNS {
				if _, err := resolve("www.internet.test"); err != nil {
					r.failed++
				}
			}
			_, r.udp = resolve("www.internet.test")
			c := &dns.Client{Net: "tcp", Timeout: 15 * time.Second}
			m := new(dns.Msg)
			m.SetQuestion("www.internet.test.", dns.TypeA)
			t0 := time.Now()
			_, _, r.tcp = c.Exchange(m, Gateway.String()+":53")
			r.tcpTook = time.Since(t0)
			return r
		})
		t.Logf("%s: %d of the first %d failed; then over UDP: %v; over TCP: %v in %v", mode, r.failed, maxDNS, r.udp, r.tcp, r.tcpTook)
		if r.udp != nil || r.tcp != nil || r.tcpTook > 2*time.Second {
			t.Errorf("%s: after %d lookups, one more over UDP: %v; over TCP: %v after %v", mode, maxDNS, r.udp, r.tcp, r.tcpTook)
		}
	}
}

func init() { attacks["busy-local"] = busyLocal }

// busyLocal: 300 blocking connects to addr (black-holed) at once, which
// fill the listener's 256 places, then connects the kernel answers
// itself whatever the engine: to a listener on the sandbox's loopback,
// and to the resolver over TCP (Gateway:53).
func busyLocal(addr string) map[string]string {
	steps := map[string]string{}
	lfd, lsa := loopbackListener(16)
	defer unix.Close(lfd)
	connectMany(addr, 300)
	time.Sleep(500 * time.Millisecond)
	try := func(sa unix.Sockaddr) string {
		fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		defer unix.Close(fd)
		return errName(unix.Connect(fd, sa))
	}
	steps["loopback listener"] = try(lsa)
	steps["resolver over TCP"] = try(&unix.SockaddrInet4{Port: 53, Addr: Gateway.As4()})
	return steps
}

// loopbackListener listens on 127.0.0.1, any port, with backlog, and
// returns the socket and its address.
func loopbackListener(backlog int) (int, *unix.SockaddrInet4) {
	fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	unix.Listen(fd, backlog)
	sa, _ := unix.Getsockname(fd)
	in4, _ := sa.(*unix.SockaddrInet4)
	return fd, in4
}

// TestListenerFullLeavesLocal: with the listener's 256 places taken,
// SeccompBusy refuses connects that Connect itself never takes (the
// sandbox's loopback, its resolver at Gateway:53), which the kernel
// would connect.
func TestListenerFullLeavesLocal(t *testing.T) {
	blackhole(t)
	sb := newSandboxEngine(t, netpolicy.Options{}, viaNoTUN, Options{Dial: shortDial})
	got := runClient(t, sb, "busy-local", "203.0.113.77:80", 1, nil).Steps
	logSteps(t, got)
	for k, v := range got {
		if v != "ok" {
			t.Errorf("%s, with the listener's places taken: %s, want ok (the kernel's)", k, v)
		}
	}
}
