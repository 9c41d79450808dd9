package netpolicy

import (
	"net/netip"
	"os"
	"testing"
)

// TestHostNowVPNRoutesNexthopDefault: a default route through a nexthop
// object (FRR's way; with nexthop_compat_mode off the route names no
// device) still makes its device the internet's, so a static route
// through the same gateway to a public network is not taken for a VPN's.
// And a host with no default route at all (a full BGP table) has no
// VPN's networks to find: its routes through gateways are the internet.
func TestHostNowVPNRoutesNexthopDefault(t *testing.T) {
	read := func(setup func()) Host {
		var h Host
		var err error
		inNewNetNS(t, func() {
			hostLAN()
			setup()
			h, err = HostNow()
		})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	p, _ := New(Options{})
	p.SetHost(read(func() {
		if err := os.WriteFile("/proc/sys/net/ipv4/nexthop_compat_mode", []byte("0"), 0); err != nil {
			panic("skip: no nexthop_compat_mode: " + err.Error())
		}
		ipCmd("nexthop", "add", "id", "7", "via", "198.51.100.1", "dev", "d0")
		ipCmd("route", "add", "default", "nhid", "7")
		ipCmd("route", "add", "192.0.2.0/24", "via", "198.51.100.1", "dev", "d0")
	}))
	if d := p.Decide(Query{Addr: netip.MustParseAddr("192.0.2.9"), Port: 443}); !d.Allow {
		t.Errorf("BROKEN: 192.0.2.9, through the default route's gateway, is refused: %+v", d)
	}
	p.SetHost(read(func() {
		ipCmd("route", "add", "192.0.2.0/24", "via", "198.51.100.1", "dev", "d0")
		ipCmd("route", "add", "8.0.0.0/8", "via", "198.51.100.1", "dev", "d0")
	}))
	for _, s := range []string{"192.0.2.9", "8.8.8.8"} {
		if d := p.Decide(Query{Addr: netip.MustParseAddr(s), Port: 443}); !d.Allow {
			t.Errorf("BROKEN: %s, on a host with no default route, is refused: %+v", s, d)
		}
	}
}
