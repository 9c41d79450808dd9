package netpolicy

import (
	"net/netip"
	"testing"
	"time"
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
	p, _ := New(Options{})
	target := netip.MustParseAddr("192.88.99.7")
	var failed string
	inNewNetNS(t, func() {
		hostLAN()
		stop, err := WatchHost(p)
		if err != nil {
			failed = err.Error()
			return
		}
		defer stop()
		if _, refused := p.Classify(target); refused {
			failed = "control: refused before the route"
			return
		}
		ipCmd("route", "add", "local", "192.88.99.0/24", "dev", "lo")
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if _, refused := p.Classify(target); refused {
				return
			}
		}
		failed = "a local route added later: its prefix is still allowed"
	})
	if failed != "" {
		t.Error(failed)
	}
}
