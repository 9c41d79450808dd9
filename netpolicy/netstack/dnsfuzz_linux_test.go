package netstack

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// FuzzDNSAnswer: whatever the upstream answers for a question, what the
// sandbox is told holds no address the policy refuses for the name: every
// A and AAAA record and every service binding hint left is on the CNAME
// chain from the question and allowed; none is a loopback, unspecified,
// link-local, metadata or host address (which no name rule allows,
// whatever the rules); there is no AAAA or ipv6hint without IPv6, and the
// additional section carries no address and, for a client that sent no
// EDNS0, no OPT. The policy allows the question's name by rule, so that
// name rules are in play.
func FuzzDNSAnswer(f *testing.F) {
	hdr := func(name string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 60}
	}
	seed := func(ipv6 bool, answer []dns.RR, extra ...dns.RR) {
		m := new(dns.Msg).SetQuestion("q.test.", dns.TypeA)
		m.Response, m.Answer, m.Extra = true, answer, extra
		m.SetEdns0(1232, false)
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, ipv6)
	}
	a := func(name, ip string) dns.RR { return &dns.A{Hdr: hdr(name, dns.TypeA), A: net.ParseIP(ip)} }
	aaaa := func(name, ip string) dns.RR { return &dns.AAAA{Hdr: hdr(name, dns.TypeAAAA), AAAA: net.ParseIP(ip)} }
	https := func(name string, v4, v6 []net.IP) dns.RR {
		return &dns.HTTPS{SVCB: dns.SVCB{Hdr: hdr(name, dns.TypeHTTPS), Priority: 1, Target: ".",
			Value: []dns.SVCBKeyValue{&dns.SVCBIPv4Hint{Hint: v4}, &dns.SVCBIPv6Hint{Hint: v6}}}}
	}
	seed(false, []dns.RR{a("q.test.", "203.0.113.1"), a("q.test.", "127.0.0.1"), a("q.test.", "192.168.1.5")})
	seed(true, []dns.RR{aaaa("q.test.", "::1"), aaaa("q.test.", "fd00:ec2::254"), aaaa("q.test.", "::ffff:127.0.0.1"), aaaa("q.test.", "2001:db8::1")})
	seed(true, []dns.RR{&dns.CNAME{Hdr: hdr("q.test.", dns.TypeCNAME), Target: "c.test."}, a("c.test.", "203.0.113.1"), a("x.test.", "203.0.113.9"),
		&dns.CNAME{Hdr: hdr("y.test.", dns.TypeCNAME), Target: "q.test."}})
	seed(true, []dns.RR{https("q.test.", []net.IP{net.ParseIP("203.0.113.1"), net.ParseIP("169.254.169.254")}, []net.IP{net.ParseIP("::1"), net.ParseIP("2001:db8::1")}),
		https("other.test.", []net.IP{net.ParseIP("203.0.113.7")}, nil)}, a("q.test.", "127.0.0.1"))
	seed(false, []dns.RR{a("Q.TEST.", "198.51.100.2"), a("q.test.", "0.0.0.0"), a("q.test.", "100.100.100.200")})

	host := netip.MustParseAddr("198.51.100.2")
	pol, err := netpolicy.New(netpolicy.Options{Allow: []string{"q.test", "c.test"}, HostAddrs: []netip.Addr{host}})
	if err != nil {
		f.Fatal(err)
	}
	neverByName := func(a netip.Addr) bool {
		a = a.Unmap()
		return a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a == host ||
			slices.Contains([]netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("100.100.100.200"), netip.MustParseAddr("fd00:ec2::254")}, a)
	}
	f.Fuzz(func(t *testing.T, b []byte, ipv6 bool) {
		var resp dns.Msg
		if resp.Unpack(b) != nil {
			return
		}
		e := &Engine{pol: pol, ipv6: ipv6}
		keep, chain, d := e.filterAnswer("q.test", false, &resp)
		if !d.Allow {
			return // the sandbox gets an empty answer
		}
		allowed := func(what string, a netip.Addr) {
			if neverByName(a) {
				t.Fatalf("%s %v reached the sandbox", what, a)
			}
			if k, _ := pol.DecideName("q.test", []netip.Addr{a.Unmap()}); len(k) == 0 {
				t.Fatalf("%s %v reached the sandbox, which the policy refuses for q.test", what, a)
			}
		}
		for _, a := range keep {
			allowed("a kept address", a)
		}
		for _, rr := range resp.Answer {
			owner := netpolicy.CanonName(rr.Header().Name)
			if !slices.Contains(chain, owner) {
				t.Fatalf("a record of %q, off the chain %v, reached the sandbox: %v", owner, chain, rr)
			}
			var kvs []dns.SVCBKeyValue
			switch rr := rr.(type) {
			case *dns.A:
				ip, _ := netip.AddrFromSlice(rr.A)
				allowed("A", ip)
			case *dns.AAAA:
				if !ipv6 {
					t.Fatalf("an AAAA record without IPv6: %v", rr)
				}
				ip, _ := netip.AddrFromSlice(rr.AAAA)
				allowed("AAAA", ip)
			case *dns.SVCB:
				kvs = rr.Value
			case *dns.HTTPS:
				kvs = rr.Value
			}
			for _, kv := range kvs {
				var hints []net.IP
				switch kv := kv.(type) {
				case *dns.SVCBIPv4Hint:
					hints = kv.Hint
				case *dns.SVCBIPv6Hint:
					if !ipv6 {
						t.Fatalf("an ipv6hint without IPv6: %v", rr)
					}
					hints = kv.Hint
				}
				for _, h := range hints {
					ip, _ := netip.AddrFromSlice(h)
					allowed("a hint", ip)
				}
			}
		}
		for _, rr := range resp.Extra {
			switch rr.(type) {
			case *dns.A, *dns.AAAA, *dns.SVCB, *dns.HTTPS, *dns.OPT:
				t.Fatalf("the additional section carries %v", rr)
			}
		}
	})
}
