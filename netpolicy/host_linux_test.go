package netpolicy

import (
	"net/netip"
	"slices"
	"testing"
)

// TestHostNow: the view has the loopback addresses, and the networks of
// the host's addresses; no network wider than the bounds survives
// SetHost.
func TestHostNow(t *testing.T) {
	h, err := HostNow()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(h.Addrs, netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("addresses %v lack 127.0.0.1", h.Addrs)
	}
	if !slices.Contains(h.Nets, netip.MustParsePrefix("127.0.0.0/8")) {
		t.Errorf("networks %v lack 127.0.0.0/8", h.Nets)
	}
	p, _ := New(Options{})
	p.SetHost(h)
	for _, n := range p.host.Load().Nets {
		if n.Addr().Is4() && n.Bits() < minHostNet4 || n.Addr().Is6() && n.Bits() < minHostNet6 {
			t.Errorf("network %v is wider than the bounds", n)
		}
	}
}
