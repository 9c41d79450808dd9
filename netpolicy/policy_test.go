package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func mustPolicy(t *testing.T, o Options) *Policy {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecide(t *testing.T) {
	a := netip.MustParseAddr
	host := []netip.Addr{a("198.51.100.2")}
	tests := []struct {
		name   string
		opts   Options
		q      Query
		allow  bool
		reason string // a piece of Decision.Reason
		hint   string // Decision.Hint exactly, refusals only
	}{
		// The default.
		{name: "public", q: Query{Addr: a("203.0.113.10"), Port: 443}, allow: true, reason: "public internet"},
		{name: "public v6", q: Query{Addr: a("2001:4860::8888"), Port: 443}, allow: true},
		{name: "metadata", q: Query{Addr: a("169.254.169.254"), Port: 80}, reason: "metadata", hint: "--allow-net 169.254.169.254:80"},
		{name: "link-local", q: Query{Addr: a("169.254.1.1"), Port: 80}, reason: "link-local"},
		{name: "rfc1918 10", q: Query{Addr: a("10.1.2.3"), Port: 22}, reason: "RFC 1918", hint: "--allow-net 10.1.2.3:22"},
		{name: "rfc1918 172", q: Query{Addr: a("172.20.0.1"), Port: 22}, reason: "RFC 1918"},
		{name: "rfc1918 192", q: Query{Addr: a("192.168.77.1"), Port: 80}, reason: "RFC 1918"},
		{name: "cgnat", q: Query{Addr: a("100.100.100.100"), Port: 80}, reason: "CGNAT"},
		{name: "alibaba metadata", q: Query{Addr: a("100.100.100.200"), Port: 80}, reason: "Alibaba"},
		{name: "alibaba metadata by an allowed name", opts: Options{Allow: []string{"evil.test"}}, q: Query{Addr: a("100.100.100.200"), Port: 80, Names: []string{"evil.test"}}, reason: "Alibaba", hint: "--allow-net 100.100.100.200:80"},
		{name: "siit metadata", q: Query{Addr: a("::ffff:0:a9fe:a9fe"), Port: 80}, reason: "through SIIT"},
		// Azure's WireServer, at a public address (attack31).
		{name: "azure wireserver", q: Query{Addr: a("168.63.129.16"), Port: 80}, reason: "Azure's WireServer", hint: "--allow-net 168.63.129.16:80"},
		{name: "azure hostgaplugin by an allowed name", opts: Options{Allow: []string{"evil.test"}}, q: Query{Addr: a("168.63.129.16"), Port: 32526, Names: []string{"evil.test"}}, reason: "Azure's WireServer", hint: "--allow-net 168.63.129.16:32526"},
		{name: "azure wireserver through nat64", q: Query{Addr: a("64:ff9b::a83f:8110"), Port: 80}, reason: "Azure's WireServer) (through NAT64)"},
		{name: "azure's neighbour is public", q: Query{Addr: a("168.63.129.17"), Port: 80}, allow: true},
		{name: "local-use nat64", q: Query{Addr: a("64:ff9b:1::a9fe:a9fe"), Port: 80}, reason: "RFC 8215"},
		{name: "teredo", q: Query{Addr: a("2001:0:cb00:710a::3f57:fefe"), Port: 80}, reason: "Teredo"},
		{name: "documentation v6 is not teredo", q: Query{Addr: a("2001:db8::1"), Port: 80}, allow: true},
		{name: "host's network", opts: Options{HostNets: []netip.Prefix{netip.MustParsePrefix("2001:db8:51::/64")}}, q: Query{Addr: a("2001:db8:51::7"), Port: 80}, reason: "host's own network (2001:db8:51::/64, on-link)", hint: "--allow-net [2001:db8:51::7]:80"},
		{name: "host's network, allowed by name", opts: Options{Allow: []string{"nas.lan"}, HostNets: []netip.Prefix{netip.MustParsePrefix("2001:db8:51::/64")}}, q: Query{Addr: a("2001:db8:51::7"), Port: 80, Names: []string{"nas.lan"}}, allow: true},
		{name: "a wide on-link route is not the host's network", opts: Options{HostNets: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/1"), netip.MustParsePrefix("2000::/3")}}, q: Query{Addr: a("2001:db8:51::7"), Port: 80}, allow: true},
		{name: "host's own address by an allowed name", opts: Options{Allow: []string{"me.lan"}, HostAddrs: host}, q: Query{Addr: a("198.51.100.2"), Port: 8080, Names: []string{"me.lan"}}, reason: "host's own", hint: "--allow-net 198.51.100.2:8080"},
		{name: "ula", q: Query{Addr: a("fd00:ec2::254"), Port: 80}, reason: "ULA", hint: "--allow-net [fd00:ec2::254]:80"},
		{name: "fe80", q: Query{Addr: a("fe80::1"), Port: 80}, reason: "link-local"},
		{name: "loopback", q: Query{Addr: a("127.0.0.1"), Port: 5432}, reason: "loopback", hint: "--allow-net localhost:5432"},
		{name: "this network", q: Query{Addr: a("0.0.0.0"), Port: 80}, reason: "this network"},
		{name: "mapped loopback", q: Query{Addr: a("::ffff:127.0.0.1"), Port: 80}, reason: "loopback"},
		{name: "nat64 metadata", q: Query{Addr: a("64:ff9b::a9fe:a9fe"), Port: 80}, reason: "NAT64"},
		{name: "nat64 public", q: Query{Addr: a("64:ff9b::cb00:710a"), Port: 80}, allow: true},
		{name: "6to4 lan", q: Query{Addr: a("2002:c0a8:4d01::1"), Port: 80}, reason: "(RFC 1918) (through 6to4)", hint: "--allow-net [2002:c0a8:4d01::1]:80"},
		{name: "6to4 loopback by name", opts: Options{Allow: []string{"evil.test"}}, q: Query{Addr: a("2002:7f00:1::1"), Port: 80, Names: []string{"evil.test"}}, reason: "loopback (through 6to4)"},
		{name: "6to4 public", q: Query{Addr: a("2002:cb00:710a::1"), Port: 80}, allow: true},
		{name: "aws metadata v6 by name", opts: Options{Allow: []string{"evil.test"}}, q: Query{Addr: a("fd00:ec2::254"), Port: 80, Names: []string{"evil.test"}}, reason: "cloud metadata address (AWS, IPv6 ULA)", hint: "--allow-net [fd00:ec2::254]:80"},
		{name: "unspecified v6 by name", opts: Options{Allow: []string{"evil.test"}}, q: Query{Addr: a("::"), Port: 5432, Names: []string{"evil.test"}}, reason: "unspecified"},
		{name: "unspecified v4 by name", opts: Options{Allow: []string{"evil.test"}}, q: Query{Addr: a("0.0.0.0"), Port: 5432, Names: []string{"evil.test"}}, reason: "this network"},
		{name: "ipv4-compatible loopback by name", opts: Options{Allow: []string{"evil.test"}}, q: Query{Addr: a("::7f00:1"), Port: 5432, Names: []string{"evil.test"}}, reason: "IPv4-compatible"},
		{name: "ipv4-compatible", q: Query{Addr: a("::7f00:1"), Port: 80}, reason: "IPv4-compatible"},
		{name: "site-local", q: Query{Addr: a("fec0::1"), Port: 80}, reason: "site-local"},
		{name: "multicast", q: Query{Addr: a("239.1.1.1"), Port: 5353}, reason: "multicast"},
		{name: "broadcast", q: Query{Addr: a("255.255.255.255"), Port: 67}, reason: "broadcast"},
		{name: "host own", opts: Options{HostAddrs: host}, q: Query{Addr: a("198.51.100.2"), Port: 8080}, reason: "host's own"},
		{name: "udp public refused", q: Query{Addr: a("203.0.113.10"), Port: 443, UDP: true}, reason: "UDP", hint: "--allow-net 203.0.113.10:443"},
		{name: "rebinding by name", q: Query{Addr: a("169.254.169.254"), Port: 80, Names: []string{"evil.test"}}, reason: "metadata", hint: "--allow-net 169.254.169.254:80"},
		{name: "an allowed name rebound to the metadata address", opts: Options{Allow: []string{"evil.test"}}, q: Query{Addr: a("169.254.169.254"), Port: 80, Names: []string{"evil.test"}}, reason: "metadata", hint: "--allow-net 169.254.169.254:80"},
		{name: "an allowed name rebound to loopback", opts: Options{Only: []string{"evil.test"}}, q: Query{Addr: a("127.0.0.1"), Port: 6379, Names: []string{"evil.test"}}, reason: "not in --net-only", hint: "--allow-net localhost:6379"},
		{name: "an allowed name on the LAN", opts: Options{Allow: []string{"db.lan"}}, q: Query{Addr: a("192.168.1.5"), Port: 5432, Names: []string{"db.lan"}}, allow: true},

		// --allow-net.
		{name: "allow addr", opts: Options{Allow: []string{"192.168.77.1"}}, q: Query{Addr: a("192.168.77.1"), Port: 80}, allow: true, reason: "--allow-net 192.168.77.1"},
		{name: "allow addr other port", opts: Options{Allow: []string{"192.168.77.1:81"}}, q: Query{Addr: a("192.168.77.1"), Port: 80}, reason: "RFC 1918"},
		{name: "allow cidr", opts: Options{Allow: []string{"192.168.0.0/16:80"}}, q: Query{Addr: a("192.168.77.1"), Port: 80}, allow: true},
		{name: "allow name", opts: Options{Allow: []string{"db.lan"}}, q: Query{Addr: a("192.168.77.1"), Port: 5432, Names: []string{"db.lan"}}, allow: true, reason: "--allow-net db.lan"},
		{name: "allow name, other name", opts: Options{Allow: []string{"db.lan"}}, q: Query{Addr: a("192.168.77.1"), Port: 5432, Names: []string{"x.lan"}}, reason: "RFC 1918"},
		{name: "allow name, hard-coded ip", opts: Options{Allow: []string{"db.lan"}}, q: Query{Addr: a("192.168.77.1"), Port: 5432}, reason: "RFC 1918"},
		{name: "allow wildcard", opts: Options{Allow: []string{"*.corp.lan:443"}}, q: Query{Addr: a("192.168.77.1"), Port: 443, Names: []string{"a.corp.lan"}, ServerName: "a.corp.lan"}, allow: true},
		{name: "sni disagrees", opts: Options{Allow: []string{"db.lan"}}, q: Query{Addr: a("192.168.77.1"), Port: 443, Names: []string{"db.lan"}, ServerName: "other.test"}, reason: "is not a name that resolved", hint: "--allow-net other.test:443"},
		{name: "sni agrees, one of several", opts: Options{Allow: []string{"db.lan"}}, q: Query{Addr: a("192.168.77.1"), Port: 443, Names: []string{"x.lan", "db.lan"}, ServerName: "DB.lan."}, allow: true},
		{name: "sni alone does not allow", opts: Options{Allow: []string{"db.lan"}}, q: Query{Addr: a("192.168.77.1"), Port: 443, ServerName: "db.lan"}, reason: "RFC 1918"},
		{name: "udp allowed explicitly", opts: Options{Allow: []string{"203.0.113.10:443"}}, q: Query{Addr: a("203.0.113.10"), Port: 443, UDP: true}, allow: true},
		{name: "metadata allowed explicitly", opts: Options{Allow: []string{"169.254.169.254:80"}}, q: Query{Addr: a("169.254.169.254"), Port: 80}, allow: true},

		// --deny-net.
		{name: "deny name", opts: Options{Deny: []string{"*.example.com"}}, q: Query{Addr: a("203.0.113.10"), Port: 443, Names: []string{"a.example.com"}}, reason: "--deny-net *.example.com"},
		{name: "deny sni", opts: Options{Deny: []string{"evil.test"}}, q: Query{Addr: a("203.0.113.10"), Port: 443, ServerName: "evil.test"}, reason: "--deny-net evil.test"},
		{name: "deny sni, other names", opts: Options{Deny: []string{"evil.test"}}, q: Query{Addr: a("203.0.113.10"), Port: 443, Names: []string{"good.test"}, ServerName: "evil.test"}, reason: "--deny-net evil.test"},
		{name: "deny cidr", opts: Options{Deny: []string{"203.0.113.0/24"}}, q: Query{Addr: a("203.0.113.10"), Port: 443}, reason: "--deny-net"},
		{name: "deny port only", opts: Options{Deny: []string{"203.0.113.0/24:25"}}, q: Query{Addr: a("203.0.113.10"), Port: 443}, allow: true},
		{name: "deny wins over allow", opts: Options{Allow: []string{"db.lan"}, Deny: []string{"192.168.77.1"}}, q: Query{Addr: a("192.168.77.1"), Port: 5432, Names: []string{"db.lan"}}, reason: "--deny-net"},

		// --net-only.
		{name: "only listed", opts: Options{Only: []string{"api.example.com"}}, q: Query{Addr: a("203.0.113.10"), Port: 443, Names: []string{"api.example.com"}}, allow: true},
		{name: "only unlisted public", opts: Options{Only: []string{"api.example.com"}}, q: Query{Addr: a("203.0.113.11"), Port: 443, Names: []string{"other.example.com"}}, reason: "not in --net-only", hint: "--allow-net other.example.com:443"},
		{name: "only hard-coded ip", opts: Options{Only: []string{"api.example.com"}}, q: Query{Addr: a("203.0.113.10"), Port: 443}, reason: "not in --net-only"},
		{name: "only with allow", opts: Options{Only: []string{"api.example.com"}, Allow: []string{"203.0.113.0/24"}}, q: Query{Addr: a("203.0.113.11"), Port: 443}, allow: true},
		{name: "only sni fronting", opts: Options{Only: []string{"api.example.com"}}, q: Query{Addr: a("203.0.113.10"), Port: 443, Names: []string{"api.example.com"}, ServerName: "evil.test"}, reason: "not in --net-only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPolicy(t, tt.opts)
			d := p.Decide(tt.q)
			if d.Allow != tt.allow || !strings.Contains(d.Reason, tt.reason) {
				t.Fatalf("Decide(%+v) = %+v; want allow %v, reason with %q", tt.q, d, tt.allow, tt.reason)
			}
			if !d.Allow && tt.hint != "" && d.Hint != tt.hint {
				t.Errorf("hint %q, want %q", d.Hint, tt.hint)
			}
			if !d.Allow && !strings.Contains(d.Reason, "--deny-net") && d.Hint == "" {
				t.Errorf("refusal without hint: %+v", d)
			}
			// The hint, added, allows (unless a --deny-net refused).
			if !d.Allow && d.Hint != "" {
				o := tt.opts
				o.Allow = append(slices.Clone(o.Allow), strings.TrimPrefix(d.Hint, "--allow-net "))
				q := tt.q
				if q.ServerName != "" && !slices.Contains(q.Names, CanonName(q.ServerName)) {
					q.Names = append(slices.Clone(q.Names), CanonName(q.ServerName)) // the hint's name, resolved
				}
				if d2 := mustPolicy(t, o).Decide(q); !d2.Allow {
					t.Errorf("with %s: still refused: %+v", d.Hint, d2)
				}
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{Allow: []string{"ok.example", "bad:99999"}}, `--allow-net: bad network rule "bad:99999": port 99999 out of range 1-65535`},
		{Options{Deny: []string{"localhost:80"}}, "--deny-net"},
		{Options{Only: []string{"0.0.0.0/0"}}, "--net-only"},
	} {
		_, err := New(tt.o)
		if err == nil || !errors.Is(err, ErrBadRule) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want %q", tt.o, err, tt.want)
		}
	}
}

func TestDecideName(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name   string
		opts   Options
		q      string
		addrs  []netip.Addr
		keep   []netip.Addr
		allow  bool
		reason string
	}{
		{name: "public", q: "www.example.com", addrs: []netip.Addr{a("203.0.113.10")}, keep: []netip.Addr{a("203.0.113.10")}, allow: true},
		{name: "rebind loopback", q: "evil.test", addrs: []netip.Addr{a("127.0.0.1")}, reason: "resolves only to refused addresses (127.0.0.1: host loopback)"},
		{name: "rebind metadata", q: "evil.test", addrs: []netip.Addr{a("169.254.169.254")}, reason: "metadata"},
		{name: "mixed filtered", q: "mixed.test", addrs: []netip.Addr{a("10.0.0.1"), a("203.0.113.10")}, keep: []netip.Addr{a("203.0.113.10")}, allow: true},
		{name: "empty answer passes", q: "nx.test", allow: true},
		{name: "lan name allowed", opts: Options{Allow: []string{"db.lan:5432"}}, q: "db.lan", addrs: []netip.Addr{a("192.168.77.1")}, keep: []netip.Addr{a("192.168.77.1")}, allow: true},
		{name: "denied name", opts: Options{Deny: []string{"*.example.com"}}, q: "www.example.com", addrs: []netip.Addr{a("203.0.113.10")}, reason: "--deny-net"},
		{name: "port deny keeps name", opts: Options{Deny: []string{"www.example.com:25"}}, q: "www.example.com", addrs: []netip.Addr{a("203.0.113.10")}, keep: []netip.Addr{a("203.0.113.10")}, allow: true},
		{name: "only unlisted", opts: Options{Only: []string{"api.example.com"}}, q: "other.example.com", addrs: []netip.Addr{a("203.0.113.10")}, reason: "not in --net-only"},
		{name: "only listed", opts: Options{Only: []string{"*.example.com"}}, q: "api.example.com", addrs: []netip.Addr{a("203.0.113.10")}, keep: []netip.Addr{a("203.0.113.10")}, allow: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keep, d := mustPolicy(t, tt.opts).DecideName(tt.q, tt.addrs)
			if d.Allow != tt.allow || !strings.Contains(d.Reason, tt.reason) || !slices.Equal(keep, tt.keep) {
				t.Fatalf("DecideName(%q, %v) = %v, %+v; want %v, allow %v, reason with %q", tt.q, tt.addrs, keep, d, tt.keep, tt.allow, tt.reason)
			}
		})
	}
}

func TestMayResolve(t *testing.T) {
	p := mustPolicy(t, Options{Only: []string{"*.example.com"}})
	if !p.MayResolve("a.example.com.").Allow || p.MayResolve("exfil-data.attacker.test").Allow {
		t.Error("--net-only: only listed names are asked upstream")
	}
	p = mustPolicy(t, Options{Only: []string{"*.example.com"}, Allow: []string{"203.0.113.0/24"}})
	if !p.MayResolve("other.test").Allow {
		t.Error("an address rule can allow any name's answer")
	}
}

func TestLocalPorts(t *testing.T) {
	p := mustPolicy(t, Options{Allow: []string{"localhost:6379", "127.0.0.1:5432", "[::1]:5432", "example.com"}})
	if got := p.LocalPorts(); !slices.Equal(got, []uint16{5432, 6379}) {
		t.Errorf("LocalPorts = %v", got)
	}
	if got := fmt.Sprint(p.NameRules()); !strings.Contains(got, "example.com") {
		t.Errorf("NameRules = %s", got)
	}
}

func TestTableBounds(t *testing.T) {
	tb := NewTable(3)
	for i := range 10 {
		tb.Add(fmt.Sprintf("n%d.test", i), []netip.Addr{netip.AddrFrom4([4]byte{203, 0, 113, byte(i)})})
	}
	if tb.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tb.Len())
	}
	if tb.Names(netip.AddrFrom4([4]byte{203, 0, 113, 0})) != nil {
		t.Error("oldest address kept")
	}
	if got := tb.Names(netip.AddrFrom4([4]byte{203, 0, 113, 9})); !slices.Equal(got, []string{"n9.test"}) {
		t.Errorf("newest: %v", got)
	}
	cdn := netip.MustParseAddr("203.0.113.200")
	for i := range 20 {
		tb.Add(fmt.Sprintf("Site%d.Test.", i), []netip.Addr{cdn})
	}
	got := tb.Names(netip.MustParseAddr("::ffff:203.0.113.200"))
	if len(got) != MaxNamesPerAddr || got[0] != "site19.test" {
		t.Errorf("names of a shared address: %v", got)
	}
	tb.Add("site12.test", []netip.Addr{cdn}) // again: most recent, not twice
	if got := tb.Names(cdn); got[0] != "site12.test" || len(got) != MaxNamesPerAddr {
		t.Errorf("after re-add: %v", got)
	}
}

// TestSetHost: the policy's view of the host changes while it is in use:
// an address the host gains is refused from then on, and one it lost is
// no longer the host's.
func TestSetHost(t *testing.T) {
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Addr: netip.MustParseAddr("2001:db8:51::99"), Port: 8080}
	if d := p.Decide(q); !d.Allow {
		t.Fatalf("before: %+v", d)
	}
	p.SetHost(Host{Addrs: []netip.Addr{q.Addr}})
	if d := p.Decide(q); d.Allow || !strings.Contains(d.Reason, "host's own") {
		t.Errorf("after the host gained it: %+v", d)
	}
	p.SetHost(Host{Nets: []netip.Prefix{netip.MustParsePrefix("2001:db8:51::1/64")}})
	if d := p.Decide(q); d.Allow || !strings.Contains(d.Reason, "2001:db8:51::/64, on-link") {
		t.Errorf("on the host's network: %+v", d)
	}
	p.SetHost(Host{})
	if d := p.Decide(q); !d.Allow {
		t.Errorf("after the host lost it: %+v", d)
	}
}

// TestNAT64Prefixes: a DNS64's AAAA answers for ipv4only.arpa give the
// network's NAT64 prefix at every length RFC 6052 allows (192.0.0.170
// or .171 after it, around bits 64-71), the well-known prefix and other
// answers none; with SetNAT64 an address under the prefix is judged as
// the IPv4 address it carries. Negative control: without it, the same
// address is allowed as public IPv6.
func TestNAT64Prefixes(t *testing.T) {
	embed := func(prefix string, v4 string) netip.Addr {
		pf := netip.MustParsePrefix(prefix)
		b := pf.Addr().As16()
		v := netip.MustParseAddr(v4).As4()
		j := 0
		for i := pf.Bits() / 8; j < 4; i++ {
			if i != 8 {
				b[i] = v[j]
				j++
			}
		}
		return netip.AddrFrom16(b)
	}
	for _, prefix := range []string{"2001:db8:64::/96", "2001:db8:64::/64", "2001:db8:64::/56", "2001:db8:64::/48", "2001:db8:6400::/40", "2001:db8::/32"} {
		got := NAT64Prefixes([]netip.Addr{embed(prefix, "192.0.0.170"), embed(prefix, "192.0.0.171"), netip.MustParseAddr("64:ff9b::c000:aa"), netip.MustParseAddr("2001:db8:1::1")})
		if len(got) != 1 || got[0] != netip.MustParsePrefix(prefix) {
			t.Errorf("%s: found %v", prefix, got)
			continue
		}
		lan := embed(prefix, "192.168.77.1")
		p, _ := New(Options{})
		if d := p.Decide(Query{Addr: lan, Port: 80}); !d.Allow {
			t.Errorf("control: %s (%s) refused without the prefix: %+v", lan, prefix, d)
		}
		p.SetNAT64(got)
		if d := p.Decide(Query{Addr: lan, Port: 80}); d.Allow || !strings.Contains(d.Reason, "RFC 1918") || !strings.Contains(d.Reason, "NAT64") {
			t.Errorf("%s (%s): %+v, want refused as RFC 1918 through the network's NAT64", lan, prefix, d)
		}
		if d := p.Decide(Query{Addr: embed(prefix, "203.0.113.1"), Port: 80}); !d.Allow {
			t.Errorf("%s: a public IPv4 address through it is refused: %+v", prefix, d)
		}
	}
	if got := NAT64Prefixes([]netip.Addr{netip.MustParseAddr("64:ff9b::c000:aa")}); len(got) != 0 {
		t.Errorf("the well-known prefix found again: %v", got)
	}
}
