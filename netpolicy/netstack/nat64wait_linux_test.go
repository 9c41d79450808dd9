package netstack

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// TestNAT64PendingNoBlock: while the network's NAT64 prefixes are being
// asked for (an upstream that never answers), what answers in a
// goroutine that must not block (handleUDP in the stack's, SeccompBusy
// in the listener's) does not wait for them: nat64Ready says so at once,
// and lookup returns at once.
func TestNAT64PendingNoBlock(t *testing.T) {
	mute, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	pol, _ := netpolicy.New(netpolicy.Options{})
	eng, err := New(nil, Options{Policy: pol, Logger: testLogger(t), Upstream: mute.LocalAddr().String(), IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	v6 := netip.MustParseAddrPort("[2001:db8:64::c0a8:4d01]:443")
	start := time.Now()
	if eng.nat64Ready(v6.Addr()) {
		t.Fatal("nat64Ready: true while the question is pending")
	}
	if !eng.nat64Ready(netip.MustParseAddr("192.0.2.1")) {
		t.Fatal("nat64Ready: an IPv4 destination waits")
	}
	eng.lookup(v6)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("BROKEN: took %v while the NAT64 question was pending", d)
	}
	eng.query(v6) // waits, at most nat64Ask
	if d := time.Since(start); d > nat64Ask+time.Second {
		t.Fatalf("query waited %v", d)
	}
	if !eng.nat64Ready(v6.Addr()) {
		t.Fatal("nat64Ready: false after the question gave up")
	}
}
