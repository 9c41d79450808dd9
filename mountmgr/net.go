package mountmgr

import (
	"fmt"
	"net/netip"
	"os"
)

// NetSpec gives the server a network namespace of its own whose only
// link is a TUN device (issue 23): P2 makes the device, addresses it,
// routes everything through Gateway, brings lo up, listens on the
// LocalPorts of its loopback, writes /etc/resolv.conf naming Gateway, and
// hands the device and the listeners to P1 ([Server.Net]), where rootfs's
// userspace stack (package netpolicy/netstack) decides what gets out.
// The addresses are the caller's (netstack's), so this package knows no
// policy.
type NetSpec struct {
	// Device is the TUN device's name in the sandbox.
	Device string `json:"device"`
	// Addr is the sandbox's IPv4 address and prefix on Device.
	Addr netip.Prefix `json:"addr"`
	// Gateway is the default route and the only nameserver.
	Gateway netip.Addr `json:"gateway"`
	// MTU of Device.
	MTU int `json:"mtu"`
	// LocalPorts are listened on at 127.0.0.1 (and [::1] where the
	// sandbox has IPv6 on lo) inside the sandbox; P1 relays them.
	LocalPorts []uint16 `json:"localPorts,omitempty"`
}

// maxLocalPorts bounds NetSpec.LocalPorts: two descriptors each travel in
// one message (SCM_RIGHTS carries at most 253).
const maxLocalPorts = 100

func (n *NetSpec) validate() error {
	if n.Device == "" || len(n.Device) > 15 || !n.Addr.Addr().Is4() || !n.Gateway.Is4() || !n.Addr.Contains(n.Gateway) || n.MTU < 576 || n.MTU > 65535 {
		return fmt.Errorf("%w: network: device %q, address %s, gateway %s, MTU %d", ErrBadSpec, n.Device, n.Addr, n.Gateway, n.MTU)
	}
	if len(n.LocalPorts) > maxLocalPorts {
		return fmt.Errorf("%w: network: more than %d localhost ports", ErrBadSpec, maxLocalPorts)
	}
	return nil
}

// resolvConf is the sandbox's /etc/resolv.conf with a NetSpec.
func (n *NetSpec) resolvConf() string {
	return "# rootfs: the sandbox's only resolver, which applies the network policy\nnameserver " + n.Gateway.String() + "\noptions edns0\n"
}

// NetFiles are what P2 hands P1 for a NetSpec. The caller owns them.
type NetFiles struct {
	// TUN is the device's queue (non-blocking, IP packets without header);
	// nil when the sandbox could not make one (Unavailable says why): it
	// then has only lo, as with NoNetwork.
	TUN *os.File
	// Unavailable is why there is no TUN ("" when there is one).
	Unavailable string
	// Local are listening sockets of the sandbox's loopback, one or two
	// per NetSpec.LocalPorts entry.
	Local []LocalListener
}

// LocalListener is a listening socket inside the sandbox for Port.
type LocalListener struct {
	Port uint16
	File *os.File
}

// Close closes every file.
func (f *NetFiles) Close() {
	if f == nil {
		return
	}
	if f.TUN != nil {
		f.TUN.Close()
	}
	for _, l := range f.Local {
		l.File.Close()
	}
}
