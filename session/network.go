package session

// The network plane: by default the server's network namespace has one
// link, a TUN device that P2 hands to P1, where a userspace stack
// (netpolicy/netstack) applies the policy to every connection and DNS
// question (see package netpolicy).

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/netpolicy"
	"github.com/rootfs-dev/rootfs/netpolicy/netstack"
)

// NetOptions say what the server may reach. The zero value is the
// default policy: the public internet, not the host's private side.
type NetOptions struct {
	// Allow, Deny and Only are --allow-net, --deny-net and --net-only's
	// patterns (netpolicy.Options).
	Allow, Deny, Only []string
	// Host shares the host's network namespace, unfiltered.
	Host bool
	// DNS is the server ("host:port") asked for the sandbox's names; ""
	// is the host's first nameserver.
	DNS string
}

// NetPolicy checks the network options against each other and against
// noNetwork and parses the patterns: nil without error means no filtered
// network (Host or noNetwork). host are the host's own addresses
// (netpolicy.Options.HostAddrs).
func NetPolicy(noNetwork bool, o NetOptions, host []netip.Addr) (*netpolicy.Policy, error) {
	rules := len(o.Allow) + len(o.Deny) + len(o.Only)
	switch {
	case o.Host && noNetwork:
		return nil, fmt.Errorf("%w: --host-network and --no-network exclude each other", ErrUsage)
	case (o.Host || noNetwork) && rules > 0:
		flag := "--host-network"
		if noNetwork {
			flag = "--no-network"
		}
		return nil, fmt.Errorf("%w: %s leaves nothing for --allow-net, --deny-net or --net-only to filter", ErrUsage, flag)
	case (o.Host || noNetwork) && o.DNS != "":
		return nil, fmt.Errorf("%w: --net-dns is for the server's own network, which --host-network and --no-network replace", ErrUsage)
	case o.Host || noNetwork:
		return nil, nil
	}
	if o.DNS != "" {
		if _, err := netip.ParseAddrPort(o.DNS); err != nil {
			return nil, fmt.Errorf("%w: --net-dns %q: want an address and port, e.g. 10.0.0.53:53", ErrUsage, o.DNS)
		}
	}
	p, err := netpolicy.New(netpolicy.Options{Allow: o.Allow, Deny: o.Deny, Only: o.Only, HostAddrs: host})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return p, nil
}

// netSpec is the sandbox side of p: nil for the host's network.
func netSpec(p *netpolicy.Policy) *mountmgr.NetSpec {
	if p == nil {
		return nil
	}
	n := &mountmgr.NetSpec{Device: netstack.DeviceName, Addr: netstack.SandboxAddr, Gateway: netstack.Gateway,
		MTU: netstack.MTU, LocalPorts: p.LocalPorts()}
	if hostRoutesIPv6() {
		n.Addr6 = netstack.SandboxAddr6
	}
	return n
}

// hostRoutesIPv6 says whether the host has a route to the IPv6 internet
// from an address that is not link-local: only then does the sandbox get
// IPv6, so that a client never prefers an address rootfs cannot reach.
// Connecting a UDP socket sends nothing; it only asks the kernel for the
// route and the source address.
func hostRoutesIPv6() bool {
	c, err := net.Dial("udp6", "[2001:4860:4860::8888]:53")
	if err != nil {
		return false
	}
	defer c.Close()
	a, ok := c.LocalAddr().(*net.UDPAddr)
	return ok && a.IP.To4() == nil && !a.IP.IsLinkLocalUnicast() && !a.IP.IsLoopback()
}

// noNetworkNote is added to the error a client sees when the server ended
// without answering and had no network because the sandbox could not use
// /dev/net/tun (startNetwork logs the same with the kernel's error).
const noNetworkNote = "the server had no network: rootfs cannot use /dev/net/tun here; " + tunFix

// tunFix is what gives the server a network where /dev/net/tun cannot be
// used.
const tunFix = "make it usable (modprobe tun; chmod 0666 /dev/net/tun, as most distributions ship it) or pass --host-network"

// tunFix2 is what gives the server UDP where it has TCP and DNS only.
const tunFix2 = "for UDP, make /dev/net/tun usable (modprobe tun; chmod 0666 /dev/net/tun; in a container, --device=/dev/net/tun)"

// netDescription says in one line what the server may reach.
func netDescription(o NetOptions) string {
	var b strings.Builder
	if len(o.Only) > 0 {
		b.WriteString("only " + strings.Join(o.Only, ", "))
	} else {
		b.WriteString("the public internet, not the host's private side")
	}
	if len(o.Allow) > 0 {
		b.WriteString("; also " + strings.Join(o.Allow, ", "))
	}
	if len(o.Deny) > 0 {
		b.WriteString("; never " + strings.Join(o.Deny, ", "))
	}
	return b.String()
}
