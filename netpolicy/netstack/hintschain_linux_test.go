package netstack

import (
	"testing"

	"github.com/miekg/dns"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// TestCNAMEChainServiceBinding: a service binding (HTTPS, SVCB) whose
// owner is not on the CNAME chain from the question is, as an address
// record of another owner (TestCNAMEChain), neither told to the sandbox
// nor are its hints allowed by the question's name. Control: the hinted
// address is reached from the host's namespace.
func TestCNAMEChainServiceBinding(t *testing.T) {
	sb := newSandbox(t, netpolicy.Options{Only: []string{"stray.test"}})
	r := inNS(t, sb.pid, func() *dns.Msg { r, _ := exchange("stray.test", dns.TypeHTTPS); return r })
	if r == nil {
		t.Fatal("no answer")
	}
	for _, rr := range r.Answer {
		if _, ok := rr.(*dns.HTTPS); ok {
			t.Errorf("another owner's service binding reached the sandbox: %v", rr)
		}
	}
	stray := dnsAddr.String() + ":80"
	if r := inNS(t, sb.pid, func() result { return connect(hostDial, stray, "stray.test", "") }); r.reached() {
		t.Errorf("another owner's hint, by the question's name: %v; want refused", r)
	}
	if r := attempt(t, nil, stray, ""); !r.reached() {
		t.Errorf("negative control (host network) %s: %v", stray, r)
	}
}
