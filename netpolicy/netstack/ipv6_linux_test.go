package netstack

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// The policy over IPv6: the sandbox has SandboxAddr6 and the link as its
// IPv6 route; AAAA answers are judged and recorded as A answers are, and
// every rule holds through the stack and through the fast path (which
// takes IPv6 sockets too). Each refused step with a control reaches from
// the host's namespace.

func TestIPv6DefaultPolicy(t *testing.T) {
	runSteps(t, netpolicy.Options{}, []step{
		{name: "internet by name", dst: "www.internet.test:80", six: true, reach: true, want: "world [2001:db8:113::1]:80 host www.internet.test", control: true},
		{name: "internet by address", dst: "[2001:db8:113::1]:80", reach: true, want: "world [2001:db8:113::1]:80", control: true},
		{name: "a name with IPv6 only", dst: "v6only.internet.test:80", six: true, reach: true, want: "host v6only.internet.test"},
		{name: "lan by address", dst: "[fd12:3456:789a::1]:80", want: "connection refused", control: true},
		{name: "lan by name", dst: "lan6.test:80", six: true, want: "no address", control: true},
		{name: "metadata by address", dst: "[fd00:ec2::254]:80", want: "connection refused", control: true},
		{name: "rebinding to loopback", dst: "rebind6-lo.test:5432", six: true, want: "no address"},
		{name: "rebinding to metadata", dst: "rebind6-meta.test:80", six: true, want: "no address"},
		{name: "rebinding to mapped loopback", dst: "rebind6-mapped.test:5432", six: true, want: "no address"},
		{name: "rebinding to metadata through NAT64", dst: "rebind6-nat64.test:80", six: true, want: "no address"},
		{name: "mixed answer keeps the public address", dst: "mixed6.test:80", six: true, reach: true, want: "world [2001:db8:113::1]:80"},
		{name: "host loopback", dst: "[::1]:5432", want: "connection refused", control: true},
		{name: "host's own address", dst: "[2001:db8:51::2]:8080", want: "connection refused", control: true},
		{name: "metadata through NAT64", dst: "[64:ff9b::a9fe:a9fe]:80", want: "connection refused"},
		// The network's own NAT64 prefix, which its DNS64 gives
		// ipv4only.arpa (the test zone): the control reaches what the
		// NAT64 would carry to the LAN.
		{name: "lan through the network's NAT64", dst: "[2001:db8:64::c0a8:4d01]:80", want: "connection refused", control: true},
		{name: "internet through the network's NAT64", dst: "[2001:db8:64::cb00:7101]:80", reach: true, want: "world [2001:db8:64::cb00:7101]:80", control: true},
		{name: "rebinding to the lan through the network's NAT64", dst: "rebind6-nsp.test:80", six: true, want: "no address"},
	})
}

func TestIPv6Rules(t *testing.T) {
	t.Run("allow-net", func(t *testing.T) {
		runSteps(t, netpolicy.Options{Allow: []string{"lan6.test:80", "[fd00:ec2::254]:80"}}, []step{
			{name: "hard-coded lan address, name not used", dst: "[fd12:3456:789a::1]:80", want: "connection refused"},
			{name: "lan by allowed name", dst: "lan6.test:80", six: true, reach: true, want: "world [fd12:3456:789a::1]:80 host lan6.test", control: true},
			// The address is now known by the allowed name: the SYN
			// passes, and the Host (the address) is not that name.
			{name: "then by address, not the name", dst: "[fd12:3456:789a::1]:80", want: "EOF"},
			{name: "metadata allowed by address", dst: "[fd00:ec2::254]:80", reach: true, want: "world [fd00:ec2::254]:80"},
		})
	})
	t.Run("net-only", func(t *testing.T) {
		runSteps(t, netpolicy.Options{Only: []string{"www.internet.test"}}, []step{
			{name: "hard-coded address", dst: "[2001:db8:113::1]:80", want: "connection refused", control: true},
			{name: "listed name", dst: "www.internet.test:80", six: true, reach: true, want: "host www.internet.test"},
			{name: "unlisted name", dst: "v6only.internet.test:80", six: true, want: "NXDOMAIN", control: true},
		})
	})
	t.Run("deny-net", func(t *testing.T) {
		runSteps(t, netpolicy.Options{Deny: []string{"2001:db8:113::/48"}}, []step{
			{name: "denied range by name", dst: "www.internet.test:80", six: true, want: "no address", control: true},
			{name: "denied range by address", dst: "[2001:db8:113::1]:80", want: "connection refused", control: true},
		})
	})
}

// TestIPv6Off: an engine told the host has no IPv6 answers AAAA with no
// address (clients use IPv4 at once), and the same name's A still
// resolves. The control: with IPv6 the same question has the address.
func TestIPv6Off(t *testing.T) {
	for _, on := range []bool{false, true} {
		sb := newSandboxFamilies(t, netpolicy.Options{}, viaStack, on)
		got := inNS(t, sb.pid, func() string {
			six, err6 := resolveType("www.internet.test", dns.TypeAAAA)
			four, err4 := resolve("www.internet.test")
			return strings.Join(six, ",") + " " + strings.Join(four, ",") + " " + errString(err6) + errString(err4)
		})
		want := " 203.0.113.1 "
		if on {
			want = "2001:db8:113::1 203.0.113.1 "
		}
		if got != want {
			t.Errorf("IPv6 %v: AAAA, A, errors = %q, want %q", on, got, want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
