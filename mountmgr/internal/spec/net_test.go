package spec

import (
	"net/netip"
	"testing"
)

func TestNetSpecValidate(t *testing.T) {
	ok := NetSpec{Device: "rfs0", Addr: netip.MustParsePrefix("10.0.2.100/24"), Gateway: netip.MustParseAddr("10.0.2.2"), MTU: 1500}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	ok6 := ok
	ok6.Addr6 = netip.MustParsePrefix("fd72:6f6f:7466::100/64")
	if err := ok6.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*NetSpec){
		"gateway outside": func(n *NetSpec) { n.Gateway = netip.MustParseAddr("10.0.3.2") },
		"v6":              func(n *NetSpec) { n.Addr = netip.MustParsePrefix("fd00::2/64") },
		"mtu":             func(n *NetSpec) { n.MTU = 100 },
		"addr6 v4":        func(n *NetSpec) { n.Addr6 = netip.MustParsePrefix("10.0.2.100/24") },
		"addr6 mapped":    func(n *NetSpec) { n.Addr6 = netip.MustParsePrefix("::ffff:10.0.2.100/120") },
		"name":            func(n *NetSpec) { n.Device = "a-very-long-device-name" },
		"ports":           func(n *NetSpec) { n.LocalPorts = make([]uint16, MaxLocalPorts+1) },
	} {
		n := ok
		mod(&n)
		if err := n.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s := Spec{NewRoot: "/x", Argv: []string{"/bin/true"}, NoNetwork: true, Net: &ok}
	if err := s.Validate(); err == nil {
		t.Error("NoNetwork with Net accepted")
	}
}
