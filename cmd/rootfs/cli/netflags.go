package cli

import (
	"fmt"
	"net/netip"

	"github.com/spf13/pflag"

	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/netpolicy"
	"github.com/rootfs-dev/rootfs/netpolicy/netstack"
)

// NetOptions are the network flags of "rootfs run" (issue 23). By
// default the server has a network namespace of its own whose traffic
// leaves through rootfs, which allows the public internet and refuses
// the host's private side (package netpolicy).
type NetOptions struct {
	AllowNet    []string
	DenyNet     []string
	NetOnly     []string
	HostNetwork bool
}

// AddFlags registers the flags on f.
func (o *NetOptions) AddFlags(f *pflag.FlagSet) {
	f.StringArrayVar(&o.AllowNet, "allow-net", nil, "also let the server reach `HOST[:PORT]` (repeatable): a domain, *.domain, an address or a CIDR, e.g. --allow-net db.lan:5432; localhost:PORT shows that port of the host's loopback at the same address inside, e.g. --allow-net localhost:5432")
	f.StringArrayVar(&o.DenyNet, "deny-net", nil, "refuse `HOST[:PORT]` to the server (repeatable; same patterns as --allow-net; wins over every allow)")
	f.StringSliceVar(&o.NetOnly, "net-only", nil, "let the server reach nothing but these `HOST[:PORT],...` (and --allow-net's), e.g. --net-only api.github.com,*.githubusercontent.com")
	f.BoolVar(&o.HostNetwork, "host-network", false, "share the host's network namespace with the server, unfiltered: it reaches the host's loopback services, the LAN and the cloud metadata address")
}

// policy checks the flags against each other and against --no-network,
// and parses the patterns: nil without error means no filtered network
// (--host-network or --no-network). host are the host's own addresses
// (netpolicy.Options.HostAddrs).
func (o *NetOptions) policy(noNetwork bool, host []netip.Addr) (*netpolicy.Policy, error) {
	rules := len(o.AllowNet) + len(o.DenyNet) + len(o.NetOnly)
	switch {
	case o.HostNetwork && noNetwork:
		return nil, fmt.Errorf("%w: --host-network and --no-network exclude each other", ErrUsage)
	case (o.HostNetwork || noNetwork) && rules > 0:
		flag := "--host-network"
		if noNetwork {
			flag = "--no-network"
		}
		return nil, fmt.Errorf("%w: %s leaves nothing for --allow-net, --deny-net or --net-only to filter", ErrUsage, flag)
	case o.HostNetwork || noNetwork:
		return nil, nil
	}
	p, err := netpolicy.New(netpolicy.Options{Allow: o.AllowNet, Deny: o.DenyNet, Only: o.NetOnly, HostAddrs: host})
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
	return &mountmgr.NetSpec{Device: netstack.DeviceName, Addr: netstack.SandboxAddr, Gateway: netstack.Gateway,
		MTU: netstack.MTU, LocalPorts: p.LocalPorts()}
}
