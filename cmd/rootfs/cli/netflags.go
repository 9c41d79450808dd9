package cli

import (
	"github.com/spf13/pflag"

	"github.com/rootfs-dev/rootfs/session"
)

// NetOptions are the network flags of "rootfs run". By default the
// server has a network namespace of its own whose traffic leaves through
// rootfs, which allows the public internet and refuses the host's
// private side (package netpolicy).
type NetOptions struct {
	AllowNet    []string
	DenyNet     []string
	NetOnly     []string
	HostNetwork bool
	DNS         string
}

// AddFlags registers the flags on f.
func (o *NetOptions) AddFlags(f *pflag.FlagSet) {
	f.StringArrayVar(&o.AllowNet, "allow-net", nil, "also let the server reach `HOST[:PORT]` (repeatable): a domain, *.domain, an address or a CIDR, e.g. --allow-net db.lan:5432; localhost:PORT shows that port of the host's loopback at the same address inside, e.g. --allow-net localhost:5432")
	f.StringArrayVar(&o.DenyNet, "deny-net", nil, "refuse `HOST[:PORT]` to the server (repeatable; same patterns as --allow-net; wins over every allow)")
	f.StringSliceVar(&o.NetOnly, "net-only", nil, "let the server reach nothing but these `HOST[:PORT],...` (and --allow-net's), e.g. --net-only api.github.com,*.githubusercontent.com")
	f.StringVar(&o.DNS, "net-dns", "", "ask the DNS server at `HOST:PORT` for the server's names (a split-horizon resolver, say) instead of the host's first nameserver in /etc/resolv.conf")
	f.BoolVar(&o.HostNetwork, "host-network", false, "share the host's network namespace with the server, unfiltered: it reaches the host's loopback services, the LAN and the cloud metadata address")
}

// options are the session's network options from the flags.
func (o *NetOptions) options() session.NetOptions {
	return session.NetOptions{Allow: o.AllowNet, Deny: o.DenyNet, Only: o.NetOnly, Host: o.HostNetwork, DNS: o.DNS}
}
