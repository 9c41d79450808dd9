package netstack

// Attacks on the IPv6 side of the boundary, from an outside review of the
// change that gave the sandbox IPv6 (fd72:6f6f:7466::100 on rfs0, IPv6
// through the stack). Each has a negative control where one means
// something: the same attempt from the host's namespace (hostPID), or the
// IPv4 counterpart the policy already refuses, shows that what is
// refused is the protection's work. Three holes the review found are
// closed since: the on-link neighbour, the address the host gains later
// and the other IPv4 embeddings.

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

func init() {
	// Answers an attacker who controls an allowed name's DNS could give.
	records6["rebind6-unspec.test."] = []string{"::"}
	records6["rebind6-compat-lo.test."] = []string{"::127.0.0.1"}
	records["rebind-zero.test."] = []string{"0.0.0.0"}
}

// TestAttack6MetadataByAllowedName: a name allowed by --allow-net whose
// AAAA answer is AWS's IPv6 metadata address (fd00:ec2::254). The policy
// keeps a name from allowing 169.254.169.254 (whoever answers for an
// allowed name could point it there, nameProof); the IPv6 address of the
// same service must be kept the same way. Controls: the IPv4 rebinding
// under the same kind of rule is refused; the metadata service answers
// from the host's namespace.
func TestAttack6MetadataByAllowedName(t *testing.T) {
	sb := newSandbox(t, netpolicy.Options{Allow: []string{"rebind6-meta.test", "rebind-meta.test"}})
	if r := attemptFamily(t, sb, "rebind6-meta.test:80", "", true); r.reached() {
		t.Errorf("BROKEN: an allowed name rebound to the IPv6 metadata address reached it: %v", r)
	}
	if r := attempt(t, sb, "rebind-meta.test:80", ""); r.reached() {
		t.Errorf("control: the IPv4 rebinding to the metadata address under an allowed name reached it: %v", r)
	}
	if r := attemptFamily(t, nil, "rebind6-meta.test:80", "", true); !r.reached() {
		t.Errorf("negative control (host network): %v", r)
	}
}

// TestAttack6OnLinkNeighbour: with IPv6 a LAN's machines have global
// addresses of the host's on-link prefix (2001:db8:51::/64 here, the
// world's w0 2001:db8:51::1 standing for the LAN's router, printer, NAS),
// which no class of the default policy names: the default, which refuses
// the LAN over IPv4 (RFC 1918), reaches it over IPv6. Control: the LAN's
// IPv4 address is refused.
func TestAttack6OnLinkNeighbour(t *testing.T) {
	sb := newSandbox(t, netpolicy.Options{})
	if r := attempt(t, sb, "192.168.77.1:80", ""); r.reached() {
		t.Fatalf("control: the LAN's IPv4 address reached: %v", r)
	}
	if r := attempt(t, nil, "[2001:db8:51::1]:80", ""); !r.reached() {
		t.Fatalf("negative control (host network): %v", r)
	}
	if r := attempt(t, sb, "[2001:db8:51::1]:80", ""); r.reached() {
		t.Errorf("a neighbour on the host's on-link IPv6 prefix is reached by default: %v", r)
	}
}

// TestOnLinkRoute: a network the host reaches directly by a route with
// no gateway (a VPN's, a second LAN's), though no address of the host's
// is in it, is the host's side, refused by default and allowed by an
// address rule. Negative control: the host's namespace reaches it.
func TestOnLinkRoute(t *testing.T) {
	setupWorld(t)
	dst := onLinkNet.String() + ":80"
	if r := attempt(t, nil, dst, ""); !r.reached() {
		t.Fatalf("negative control (host network): %v", r)
	}
	sb := newSandbox(t, netpolicy.Options{})
	if r := attempt(t, sb, dst, ""); r.reached() {
		t.Errorf("the host's on-link route's network reached by default: %v", r)
	}
	if _, refused := sb.eng.pol.Classify(onLinkNet); !refused {
		t.Errorf("%v is not classed as the host's", onLinkNet)
	}
	allowed := newSandbox(t, netpolicy.Options{Allow: []string{"192.0.2.0/24:80"}})
	if r := attempt(t, allowed, dst, ""); !r.reached() {
		t.Errorf("allowed by address: %v", r)
	}
}

// TestAttack6HostAddressAddedLater: the host's own addresses are
// taken once, at start (session.hostAddrs); an IPv6 host gains addresses
// while it runs (a new temporary address each day, RFC 8981, a new
// prefix on renumbering), and a service listening on [::] answers on each.
// Control: the address known at start is refused.
func TestAttack6HostAddressAddedLater(t *testing.T) {
	sb := newSandbox(t, netpolicy.Options{})
	const later = "2001:db8:51::99"
	run(t, "ip", "-6", "addr", "add", later+"/64", "dev", "h0", "nodad")
	t.Cleanup(func() { exec.Command("ip", "-6", "addr", "del", later+"/64", "dev", "h0").Run() })
	if r := attempt(t, sb, "[2001:db8:51::2]:8080", ""); r.reached() {
		t.Fatalf("control: the host's address known at start reached: %v", r)
	}
	// The control may be tried again: on a loaded machine the new
	// address's first connection can outlast attempt's 3 s.
	r := attempt(t, nil, "["+later+"]:8080", "")
	for i := 0; i < 3 && !r.reached(); i++ {
		r = attempt(t, nil, "["+later+"]:8080", "")
	}
	if !r.reached() {
		t.Fatalf("negative control (host network): %v", r)
	}
	// The policy learns of the address from the kernel's notification,
	// which the watcher may not have read yet.
	for i := 0; i < 100; i++ {
		if _, refused := sb.eng.pol.Classify(netip.MustParseAddr(later)); refused {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := attempt(t, sb, "["+later+"]:8080", ""); r.reached() {
		t.Errorf("an address the host gained after start reaches its services: %v", r)
	}
}

// rawLink is an AF_PACKET socket on the sandbox's rfs0, opened inside the
// sandbox (the test is root there): what it sends reaches the engine as
// if the sandbox's kernel had sent it, whatever its addresses, and it
// reads what the engine writes back. rootfs's server has no CAP_NET_RAW
// and its seccomp filter refuses AF_PACKET: these are the engine's
// defences in depth, for a sandbox that could write any packet.
type rawLink struct{ fd, idx int }

func openRaw() (*rawLink, error) {
	ifc, err := net.InterfaceByName(DeviceName)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	tv := unix.NsecToTimeval(int64(2 * time.Second))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return &rawLink{fd: fd, idx: ifc.Index}, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (r *rawLink) Close() { unix.Close(r.fd) }

func (r *rawLink) send(pkt []byte) error {
	proto := uint16(unix.ETH_P_IP)
	if pkt[0]>>4 == 6 {
		proto = unix.ETH_P_IPV6
	}
	return unix.Sendto(r.fd, pkt, 0, &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: r.idx})
}

// recvTCP returns the next TCP segment the engine sends to dst:dport,
// or an error when none comes within the socket's timeout.
func (r *rawLink) recvTCP(dst netip.Addr, dport uint16) (seg tcpSegment, err error) {
	b := make([]byte, 1<<16)
	for {
		n, from, err := unix.Recvfrom(r.fd, b, 0)
		if err != nil {
			return seg, err
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue // ours
		}
		if s, ok := parseTCP(b[:n]); ok && s.dst == dst && s.dport == dport {
			return s, nil
		}
	}
}

type tcpSegment struct {
	src, dst     netip.Addr
	sport, dport uint16
	seq, ack     uint32
	flags        byte
	payload      []byte
}

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
)

func parseTCP(b []byte) (s tcpSegment, ok bool) {
	var th []byte
	switch {
	case len(b) >= 40 && b[0]>>4 == 6 && b[6] == unix.IPPROTO_TCP:
		s.src, _ = netip.AddrFromSlice(b[8:24])
		s.dst, _ = netip.AddrFromSlice(b[24:40])
		th = b[40:]
	case len(b) >= 20 && b[0]>>4 == 4 && b[9] == unix.IPPROTO_TCP:
		s.src, _ = netip.AddrFromSlice(b[12:16])
		s.dst, _ = netip.AddrFromSlice(b[16:20])
		th = b[int(b[0]&0xf)*4:]
	default:
		return s, false
	}
	if len(th) < 20 || len(th) < int(th[12]>>4)*4 {
		return s, false
	}
	s.sport, s.dport = binary.BigEndian.Uint16(th[0:]), binary.BigEndian.Uint16(th[2:])
	s.seq, s.ack = binary.BigEndian.Uint32(th[4:]), binary.BigEndian.Uint32(th[8:])
	s.flags = th[13]
	s.payload = th[int(th[12]>>4)*4:]
	return s, true
}

// packet is the IP packet (v4 or v6 as the addresses are) carrying
// transport header and payload th of protocol proto, th's checksum at
// csumAt (-1: none) filled in.
func packet(src, dst netip.Addr, proto byte, th []byte, csumAt int) []byte {
	var pseudo, ip []byte
	if src.Is4() {
		s4, d4 := src.As4(), dst.As4()
		ip = make([]byte, 20)
		ip[0], ip[8], ip[9] = 0x45, 64, proto
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(th)))
		copy(ip[12:], s4[:])
		copy(ip[16:], d4[:])
		binary.BigEndian.PutUint16(ip[10:], ^csum(0, ip))
		pseudo = append(append(append([]byte{}, s4[:]...), d4[:]...), 0, proto, byte(len(th)>>8), byte(len(th)))
	} else {
		s6, d6 := src.As16(), dst.As16()
		ip = make([]byte, 40)
		ip[0], ip[6], ip[7] = 0x60, proto, 64
		binary.BigEndian.PutUint16(ip[4:], uint16(len(th)))
		copy(ip[8:], s6[:])
		copy(ip[24:], d6[:])
		pseudo = append(append(append([]byte{}, s6[:]...), d6[:]...), 0, 0, byte(len(th)>>8), byte(len(th)), 0, 0, 0, proto)
	}
	if csumAt >= 0 {
		binary.BigEndian.PutUint16(th[csumAt:], ^csum(uint32(csum(0, pseudo)), th))
	}
	return append(ip, th...)
}

func csum(sum uint32, b []byte) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

func tcpPacket(src, dst netip.Addr, sport, dport uint16, seq, ack uint32, flags byte, payload []byte) []byte {
	th := make([]byte, 20, 20+len(payload))
	binary.BigEndian.PutUint16(th[0:], sport)
	binary.BigEndian.PutUint16(th[2:], dport)
	binary.BigEndian.PutUint32(th[4:], seq)
	binary.BigEndian.PutUint32(th[8:], ack)
	th[12], th[13] = 5<<4, flags
	binary.BigEndian.PutUint16(th[14:], 65535)
	th = append(th, payload...)
	return packet(src, dst, unix.IPPROTO_TCP, th, 16)
}

// rawHandshake connects from src (an address of the sandbox's link that
// is not its kernel's, so the kernel leaves the engine's answers alone)
// to dst with hand-made segments, and returns what the engine answered:
// "reset", "nothing", or "data: ..." with the first bytes relayed.
func rawHandshake(src netip.Addr, dst netip.AddrPort) string {
	r, err := openRaw()
	if err != nil {
		return "raw: " + err.Error()
	}
	defer r.Close()
	const sport, iss = 40123, 1000
	if err := r.send(tcpPacket(src, dst.Addr(), sport, dst.Port(), iss, 0, tcpSYN, nil)); err != nil {
		return "send: " + err.Error()
	}
	s, err := r.recvTCP(src, sport)
	switch {
	case err != nil:
		return "nothing"
	case s.flags&tcpRST != 0:
		return "reset"
	case s.flags&(tcpSYN|tcpACK) != tcpSYN|tcpACK:
		return fmt.Sprintf("flags %#x", s.flags)
	}
	r.send(tcpPacket(src, dst.Addr(), sport, dst.Port(), iss+1, s.seq+1, tcpACK, nil))
	for {
		d, err := r.recvTCP(src, sport)
		if err != nil {
			return "handshake, then nothing"
		}
		if d.flags&tcpRST != 0 {
			return "handshake, then reset"
		}
		if len(d.payload) > 0 {
			r.send(tcpPacket(src, dst.Addr(), sport, dst.Port(), iss+1, d.seq+uint32(len(d.payload)), tcpACK|tcpRST, nil))
			return "data: " + strings.TrimSpace(string(d.payload))
		}
	}
}

// loopbackService listens at addr (the host's loopback) and reports each
// connection accepted; it writes a line the attacker wants.
func loopbackService(t *testing.T, network, addr string) (port uint16, accepted <-chan struct{}) {
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ch := make(chan struct{}, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "host loopback secret")
			c.Close()
			ch <- struct{}{}
		}
	}()
	return uint16(l.Addr().(*net.TCPAddr).Port), ch
}

func drained(ch <-chan struct{}) int {
	n := 0
	for {
		select {
		case <-ch:
			n++
		default:
			return n
		}
	}
}

// TestAttack6UnspecifiedByAllowedName: an allowed name whose AAAA answer
// is "::" (or whose A answer is 0.0.0.0). A name may not allow the
// host's loopback (nameProof), but the unspecified address is the host's
// loopback to the engine's dial (Go and Linux connect to :: as to ::1, to
// 0.0.0.0 as to 127.0.0.1), and the policy lets the name allow it: the
// answer reaches the sandbox and the table records the name for it. The
// sandbox's kernel never sends to :: (it is its own), so the SYN is
// hand-made on rfs0 (AF_PACKET, root in the sandbox). It held: gVisor
// drops a packet to an unspecified (or loopback) destination before TCP,
// so nothing is dialled. Controls: a hand-made SYN to an allowed public
// address is answered (the raw path works); from the host's namespace,
// dialling the unspecified address reaches the loopback service.
func TestAttack6UnspecifiedByAllowedName(t *testing.T) {
	for _, tc := range []struct {
		family, name, control, lo string
		src                       netip.Addr
		qtype                     uint16
	}{
		{"tcp6", "rebind6-unspec.test", "rebind6-lo.test", "[::1]:0", netip.MustParseAddr("fd72:6f6f:7466::200"), dns.TypeAAAA},
		{"tcp4", "rebind-zero.test", "rebind-lo.test", "127.0.0.1:0", netip.MustParseAddr("10.0.2.200"), dns.TypeA},
	} {
		t.Run(tc.family, func(t *testing.T) {
			sb := newSandbox(t, netpolicy.Options{Allow: []string{tc.name, tc.control}})
			port, accepted := loopbackService(t, tc.family, tc.lo)
			unspec := netip.IPv4Unspecified()
			if tc.family == "tcp6" {
				unspec = netip.IPv6Unspecified()
			}
			// The negative control: the engine's kind of dial reaches it.
			c, err := net.Dial("tcp", netip.AddrPortFrom(unspec, port).String())
			if err != nil {
				t.Fatalf("negative control (host network): %v", err)
			}
			c.Close()
			<-accepted

			got := inNS(t, sb.pid, func() string {
				ctl, err := resolveType(tc.control, tc.qtype)
				a, err2 := resolveType(tc.name, tc.qtype)
				return fmt.Sprintf("%s: %v %v; %s: %v %v", tc.control, ctl, err, tc.name, a, err2)
			})
			t.Logf("the sandbox resolved %s", got)
			pub := netip.AddrPortFrom(internet, 80)
			if tc.family == "tcp6" {
				pub = netip.AddrPortFrom(internet6, 80)
			}
			if ctl := inNS(t, sb.pid, func() string { return rawHandshake(tc.src, pub) }); !strings.HasPrefix(ctl, "handshake") {
				t.Fatalf("control: a hand-made SYN to %s: %s, want a handshake", pub, ctl)
			}
			dsts := []netip.Addr{unspec, netip.MustParseAddr("127.0.0.1")}
			if tc.family == "tcp6" {
				dsts = []netip.Addr{unspec, netip.IPv6Loopback(), netip.MustParseAddr("::ffff:0.0.0.0")}
			}
			for _, dst := range dsts {
				got := inNS(t, sb.pid, func() string { return rawHandshake(tc.src, netip.AddrPortFrom(dst, port)) })
				if n := drained(accepted); n != 0 || strings.Contains(got, "secret") {
					t.Errorf("BROKEN: a SYN to %s:%d (names %v) made the engine connect to the host's loopback (%d accepted); the sandbox got %q",
						dst, port, sb.eng.table.Names(dst), n, got)
				} else {
					t.Logf("a SYN to %s (names %v): %s", dst, sb.eng.table.Names(dst), got)
				}
			}
		})
	}
}

// udpPacket is a UDP datagram from src to dst.
func udpPacket(src, dst netip.AddrPort, payload []byte) []byte {
	th := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(th[0:], src.Port())
	binary.BigEndian.PutUint16(th[2:], dst.Port())
	binary.BigEndian.PutUint16(th[4:], uint16(8+len(payload)))
	th = append(th, payload...)
	return packet(src.Addr(), dst.Addr(), unix.IPPROTO_UDP, th, 6)
}

// icmp6Packet is an ICMPv6 message of type typ, code, body after the
// checksum, from src to dst (hop limit 255, as NDP wants).
func icmp6Packet(src, dst netip.Addr, typ, code byte, body []byte) []byte {
	th := append([]byte{typ, code, 0, 0}, body...)
	p := packet(src, dst, 58, th, 2)
	p[7] = 255
	return p
}

// ext6 is an IPv6 packet from src to dst whose payload is hdrs (raw
// extension headers, each's next header already set) then proto's
// payload; first is the next header of the fixed header.
func ext6(src, dst netip.Addr, first byte, hdrs []byte, payload []byte) []byte {
	p := packet(src, dst, first, append(append([]byte{}, hdrs...), payload...), -1)
	return p
}

// fragment6 is one fragment (offset in bytes, a multiple of 8) of a
// packet of next header nh with identification id.
func fragment6(src, dst netip.Addr, nh byte, id uint32, offset int, more bool, data []byte) []byte {
	fh := make([]byte, 8)
	fh[0] = nh
	off := uint16(offset/8) << 3
	if more {
		off |= 1
	}
	binary.BigEndian.PutUint16(fh[2:], off)
	binary.BigEndian.PutUint32(fh[4:], id)
	return ext6(src, dst, 44, fh, data)
}

// TestAttack6RawPacketsEngineSurvives: the sandbox writes malformed and
// hostile IPv6 (and ICMPv6) straight onto its link: fragments (many
// unfinished reassemblies, overlapping, past 64 KiB, atomic), long and
// bad extension header chains, a jumbogram, routing headers, NDP (router
// advertisements with prefixes and routes, redirects, neighbour
// solicitations), MLD queries, packet-too-big for a flow, echo requests
// and UDP to many addresses. The engine must neither panic (the test
// process would die: the engine runs in it) nor leak goroutines, and must
// then still judge and carry IPv6 and IPv4 as before.
func TestAttack6RawPacketsEngineSurvives(t *testing.T) {
	sb := newSandbox(t, netpolicy.Options{})
	src := netip.MustParseAddr("fd72:6f6f:7466::100")
	pub := internet6
	if r := attempt(t, sb, "[2001:db8:113::1]:80", ""); !r.reached() {
		t.Fatalf("before: %v", r)
	}
	base := runtime.NumGoroutine()
	syn := func(sport uint16) []byte {
		return tcpPacket(src, pub, sport, 80, 1, 0, tcpSYN, nil)[40:]
	}
	sent := inNS(t, sb.pid, func() string {
		r, err := openRaw()
		if err != nil {
			return err.Error()
		}
		defer r.Close()
		n := 0
		send := func(p []byte) {
			if r.send(p) == nil {
				n++
			}
		}
		big := make([]byte, 1232)
		// Unfinished reassemblies: first fragments of 3000 packets.
		for id := range uint32(3000) {
			send(fragment6(src, pub, unix.IPPROTO_UDP, id, 0, true, big))
		}
		// Overlapping fragments, a fragment past 65535, a tiny one, an
		// atomic fragment carrying a SYN.
		send(fragment6(src, pub, unix.IPPROTO_TCP, 9001, 0, true, syn(41000)[:16]))
		send(fragment6(src, pub, unix.IPPROTO_TCP, 9001, 8, false, syn(41000)[8:]))
		send(fragment6(src, pub, unix.IPPROTO_UDP, 9002, 65528, false, big[:64]))
		send(fragment6(src, pub, unix.IPPROTO_UDP, 9003, 0, true, big[:8]))
		send(fragment6(src, pub, unix.IPPROTO_TCP, 9004, 0, false, syn(41001)))
		// A fragment whose first piece holds no transport header (the
		// header chain continues in the second fragment).
		dst := append([]byte{unix.IPPROTO_TCP, 0}, make([]byte, 6)...)
		send(fragment6(src, pub, 60, 9005, 0, true, dst))
		send(fragment6(src, pub, 60, 9005, 8, false, syn(41002)))
		// 200 destination options headers, then a SYN; an unknown next
		// header; a hop-by-hop not first; a bad option length.
		var chain []byte
		for range 200 {
			chain = append(chain, 60, 0, 1, 4, 0, 0, 0, 0)
		}
		chain[len(chain)-8] = unix.IPPROTO_TCP
		send(ext6(src, pub, 60, chain, syn(41003)))
		send(ext6(src, pub, 253, []byte{59, 0, 0, 0, 0, 0, 0, 0}, nil))
		send(ext6(src, pub, 60, []byte{0, 0, 1, 4, 0, 0, 0, 0, unix.IPPROTO_TCP, 0, 1, 4, 0, 0, 0, 0}, syn(41004)))
		send(ext6(src, pub, 0, []byte{unix.IPPROTO_TCP, 0, 1, 200, 0, 0, 0, 0}, syn(41005)))
		// A jumbogram: payload length 0 and a jumbo payload option.
		j := ext6(src, pub, 0, []byte{unix.IPPROTO_TCP, 0, 0xc2, 4, 0, 1, 0, 0}, syn(41006))
		binary.BigEndian.PutUint16(j[4:], 0)
		send(j)
		// Routing headers: type 0 (deprecated) and segment routing, to
		// the metadata address by way of the internet.
		m := metadata6.As16()
		rh0 := append([]byte{unix.IPPROTO_TCP, 2, 0, 1, 0, 0, 0, 0}, m[:]...)
		send(ext6(src, pub, 43, rh0, syn(41007)))
		srh := append([]byte{unix.IPPROTO_TCP, 4, 4, 1, 1, 0, 0, 0}, append(m[:], pub.AsSlice()...)...)
		send(ext6(src, pub, 43, srh, syn(41008)))
		// NDP and MLD from a link-local source: router advertisements
		// with 64 prefixes each (on-link, autonomous) and route
		// information, redirects, neighbour solicitations, MLD queries.
		ll := netip.MustParseAddr("fe80::1")
		allNodes := netip.MustParseAddr("ff02::1")
		for i := range 64 {
			var opts []byte
			for k := range 64 {
				pfx := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i), byte(k)}).As16()
				opts = append(opts, 3, 4, 64, 0xc0, 0, 0, 0x0e, 0x10, 0, 0, 0x0e, 0x10, 0, 0, 0, 0)
				opts = append(opts, pfx[:]...)
				opts = append(opts, 24, 3, 48, 0x08, 0, 0, 0x0e, 0x10)
				opts = append(opts, pfx[:16]...)
			}
			send(icmp6Packet(ll, allNodes, 134, 0, append([]byte{64, 0, 0x0e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0}, opts...)))
			tgt, d := netip.AddrFrom16([16]byte{0xfe, 0x80, 15: byte(i)}).As16(), pub.As16()
			send(icmp6Packet(ll, src, 137, 0, append(append(make([]byte, 4), tgt[:]...), d[:]...)))
			send(icmp6Packet(src, pub, 135, 0, append(make([]byte, 4), d[:]...)))
			send(icmp6Packet(ll, allNodes, 130, 0, make([]byte, 20)))
			// Echo requests to the host's loopback, the metadata address, the LAN.
			for _, a := range []netip.Addr{lan6, metadata6, hostAddr6} {
				send(icmp6Packet(src, a, 128, 0, []byte{0, 1, 0, byte(i)}))
			}
			// UDP to a few addresses (refused: other than DNS).
			if i < 4 {
				send(udpPacket(netip.AddrPortFrom(src, 40000), netip.AddrPortFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 1, 0x13, 15: byte(i)}), 4433), []byte("x")))
			}
		}
		// Packet too big for a flow, with an MTU of 0 and of 1280.
		for _, mtu := range []uint32{0, 1280} {
			inner := tcpPacket(pub, src, 80, 41003, 1, 2, tcpACK, nil)
			body := binary.BigEndian.AppendUint32(nil, mtu)
			send(icmp6Packet(src, pub, 2, 0, append(body, inner...)))
		}
		return fmt.Sprint(n, " packets sent")
	})
	t.Log(sent)
	// Still the engine it was: IPv6 and IPv4 carried, the LAN refused.
	for _, c := range []struct {
		dst   string
		reach bool
	}{{"[2001:db8:113::1]:80", true}, {"203.0.113.1:80", true}, {"[fd12:3456:789a::1]:80", false}, {"[fd00:ec2::254]:80", false}} {
		if r := attempt(t, sb, c.dst, ""); r.reached() != c.reach {
			t.Errorf("after the barrage, %s: %v, want reached=%v", c.dst, r, c.reach)
		}
	}
	// No goroutine left behind (the SYNs' handshakes end when the
	// sandbox does not answer; the world's are its own).
	deadline := time.Now().Add(60 * time.Second)
	for runtime.NumGoroutine() > base+5 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+5 {
		t.Errorf("%d goroutines after the barrage, %d before", n, base)
	}
}

// TestAttack6NameProofAnswers: answers an allowed name's DNS could give
// that stand for the host itself to the engine's dial or to the host's
// kernel: "::" and 0.0.0.0 (Go and Linux connect to them as to the
// loopback) and ::127.0.0.1 (IPv4-compatible: on a host with a sit0
// device every IPv4 address of the host is its own as ::a.b.c.d, the
// loopback's with host scope). A name never allows the loopback
// (nameProof), so it must not allow these either: the sandbox must not be
// told them, nor the table record the name for them. Control: the same
// kind of rule with an answer of ::1 is refused already.
func TestAttack6NameProofAnswers(t *testing.T) {
	names := map[string]uint16{"rebind6-lo.test": dns.TypeAAAA, "rebind6-unspec.test": dns.TypeAAAA,
		"rebind6-compat-lo.test": dns.TypeAAAA, "rebind-zero.test": dns.TypeA}
	var allow []string
	for n := range names {
		allow = append(allow, n)
	}
	sb := newSandbox(t, netpolicy.Options{Allow: allow})
	for n, qt := range names {
		got := inNS(t, sb.pid, func() []string { a, _ := resolveType(n, qt); return a })
		if len(got) != 0 {
			t.Errorf("BROKEN? the allowed name %s rebound to %v: the sandbox is told it (the engine would dial the host for it)", n, got)
		}
	}
}

// TestAttack6MappedThroughEveryPath: an AF_INET6 socket connecting to
// IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64 and
// 6to4 forms of refused IPv4 addresses, on every path (the stack, and
// offered to the fast path as rootfs's seccomp listener offers it, with
// the mapped address Engine.Connect unmaps): each is refused, and a
// mapped public address is still carried (through the stack: the fast
// path takes AF_INET sockets only). Negative control: the mapped forms
// reach from the host's namespace.
func TestAttack6MappedThroughEveryPath(t *testing.T) {
	runSteps(t, netpolicy.Options{}, []step{
		{name: "mapped lan", dst: "[::ffff:192.168.77.1]:80", want: "connection refused", control: true},
		{name: "mapped metadata", dst: "[::ffff:169.254.169.254]:80", want: "connection refused", control: true},
		{name: "mapped host's own", dst: "[::ffff:198.51.100.2]:8080", want: "connection refused", control: true},
		{name: "mapped loopback (the sandbox's own)", dst: "[::ffff:127.0.0.1]:5432", want: "connection refused", control: true},
		{name: "ipv4-compatible lan", dst: "[::192.168.77.1]:80", want: "connection refused"},
		{name: "nat64 lan", dst: "[64:ff9b::192.168.77.1]:80", want: "connection refused"},
		{name: "6to4 lan", dst: "[2002:c0a8:4d01::1]:80", want: "connection refused"},
		{name: "6to4 host's own", dst: "[2002:c633:6402::1]:8080", want: "connection refused"},
		{name: "mapped public", dst: "[::ffff:203.0.113.1]:80", reach: true, want: "world 203.0.113.1:80"},
	})
}

// TestAttack6OtherEmbeddings: IPv6 forms that carry an IPv4 address
// the policy does not look into, judged as the public internet. Each
// matters only on a host (or network) that translates or tunnels it:
// NAT64's local-use prefix 64:ff9b:1::/48 (RFC 8215; the address after
// the prefix, here a /96), SIIT's IPv4-translated ::ffff:0:a.b.c.d, and
// Teredo (2001::/32), whose client address (the last 32 bits, inverted) a
// Teredo host sends to directly. Control: the well-known NAT64 prefix of
// the same address is refused.
func TestAttack6OtherEmbeddings(t *testing.T) {
	p, err := netpolicy.New(netpolicy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Decide(netpolicy.Query{Addr: netip.MustParseAddr("64:ff9b::a9fe:a9fe"), Port: 80}); d.Allow {
		t.Fatalf("control: NAT64 metadata allowed: %+v", d)
	}
	var open []string
	for _, s := range []string{"64:ff9b:1::a9fe:a9fe", "::ffff:0:a9fe:a9fe", "2001:0:cb00:710a:0:0:3f57:fefe"} {
		if d := p.Decide(netpolicy.Query{Addr: netip.MustParseAddr(s), Port: 80}); d.Allow {
			open = append(open, s+" ("+d.Reason+")")
		}
	}
	if len(open) > 0 {
		t.Errorf("allowed, though they carry 169.254.169.254 / 192.168.1.1: %s", strings.Join(open, ", "))
	}
}
