package netpolicy

import (
	"net/netip"
	"testing"
)

// TestHostNowLocalRoutes (attack31): a prefix the host takes as its own
// by a local route (AnyIP: "ip route add local 192.88.99.0/24 dev lo")
// is answered by its services bound to 0.0.0.0 and [::] on every
// address, though no interface has them: the view missed them, and the
// default policy took them for the public internet (a name could allow
// them). They are the host's own addresses, by default and against
// names. Controls: a transparent proxy's local default route, in a
// table only marked packets use, does not refuse the internet; a
// neighbouring public address is allowed.
func TestHostNowLocalRoutes(t *testing.T) {
	var h Host
	var err error
	inNewNetNS(t, func() {
		hostLAN()
		ipCmd("route", "add", "local", "192.88.99.0/24", "dev", "lo")
		ipCmd("-6", "route", "add", "local", "2001:db8:99::/64", "dev", "lo")
		ipCmd("route", "add", "local", "203.0.113.0/24", "dev", "lo", "table", "100")
		ipCmd("route", "add", "local", "0.0.0.0/0", "dev", "lo", "table", "101")
		h, err = HostNow()
	})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := New(Options{Allow: []string{"evil.test"}})
	p.SetHost(h)
	for _, s := range []string{"192.88.99.7", "2001:db8:99::7", "203.0.113.9"} {
		a := netip.MustParseAddr(s)
		if d := p.Decide(Query{Addr: a, Port: 8080}); d.Allow {
			t.Errorf("BROKEN: %s, the host's own by a local route, is allowed: %+v", s, d)
		}
		if d := p.Decide(Query{Addr: a, Port: 8080, Names: []string{"evil.test"}}); d.Allow {
			t.Errorf("BROKEN: %s, the host's own by a local route, is allowed by a name: %+v", s, d)
		}
	}
	for _, s := range []string{"192.88.100.7", "2001:db8:98::7", "8.8.8.8"} {
		if d := p.Decide(Query{Addr: netip.MustParseAddr(s), Port: 8080}); !d.Allow {
			t.Errorf("control: %s is refused: %+v", s, d)
		}
	}
	if d := p.Decide(Query{Addr: netip.MustParseAddr("127.0.0.2"), Port: 80}); d.Reason != "host loopback" {
		t.Errorf("control: the loopback's local route changed its reason: %+v", d)
	}
}

// TestWatchHostLocalRouteAdded: a local route added while the server
// runs is followed, as an address is.
func TestWatchHostLocalRouteAdded(t *testing.T) {
	watchRefuses(t, netip.MustParseAddr("192.88.99.7"), func() {}, func() {
		ipCmd("route", "add", "local", "192.88.99.0/24", "dev", "lo")
	}, "a local route added later: its prefix is still allowed")
}

// TestHostNowVPNRoutes: the networks a VPN pushes as routes through its
// gateway on its own device (OpenVPN: "203.0.113.0/24 via 10.8.0.1 dev
// tun0") are the host's side, as the on-link networks of one are, and
// refused by default. Controls: a full tunnel's halves (0.0.0.0/1,
// 128.0.0.0/1 via the VPN), a route through the default route's device
// (to the VPN's server) and the internet beside them stay allowed; and
// without the route, the pushed network is allowed (as it was before).
func TestHostNowVPNRoutes(t *testing.T) {
	read := func(pushed bool) Host {
		var h Host
		var err error
		inNewNetNS(t, func() {
			hostLAN()
			ipCmd("route", "add", "default", "via", "198.51.100.1", "dev", "d0")
			ipCmd("link", "add", "vpn0", "type", "veth", "peer", "name", "vpn1")
			ipCmd("link", "set", "vpn0", "addrgenmode", "none")
			ipCmd("link", "set", "vpn0", "up")
			ipCmd("link", "set", "vpn1", "up")
			ipCmd("addr", "add", "10.8.0.6/32", "peer", "10.8.0.5", "dev", "vpn0")
			ipCmd("-6", "addr", "add", "fd88::6/64", "dev", "vpn0", "nodad")
			ipCmd("route", "add", "0.0.0.0/1", "via", "10.8.0.5", "dev", "vpn0")
			ipCmd("route", "add", "128.0.0.0/1", "via", "10.8.0.5", "dev", "vpn0")
			ipCmd("route", "add", "192.0.2.0/24", "via", "198.51.100.1", "dev", "d0")
			if pushed {
				ipCmd("route", "add", "203.0.113.0/24", "via", "10.8.0.5", "dev", "vpn0")
				ipCmd("-6", "route", "add", "2001:db8:77::/48", "via", "fd88::5", "dev", "vpn0")
			}
			h, err = HostNow()
		})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	p, _ := New(Options{})
	p.SetHost(read(true))
	for _, s := range []string{"203.0.113.9", "2001:db8:77::9"} {
		if d := p.Decide(Query{Addr: netip.MustParseAddr(s), Port: 443}); d.Allow {
			t.Errorf("BROKEN: %s, pushed by the VPN, is allowed: %+v", s, d)
		}
	}
	for _, s := range []string{"192.0.2.9", "8.8.8.8", "203.0.114.9", "2001:db8:78::9"} {
		if d := p.Decide(Query{Addr: netip.MustParseAddr(s), Port: 443}); !d.Allow {
			t.Errorf("control: %s is refused: %+v", s, d)
		}
	}
	p.SetHost(read(false))
	if d := p.Decide(Query{Addr: netip.MustParseAddr("203.0.113.9"), Port: 443}); !d.Allow {
		t.Errorf("control: without the pushed route, 203.0.113.9 is refused: %+v", d)
	}
}
