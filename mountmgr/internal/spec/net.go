package spec

import (
	"fmt"
	"net/netip"
)

// NetSpec gives the server a network namespace of its own whose only
// link is a TUN device: P2 makes the device, addresses it,
// routes everything through Gateway, brings lo up, listens on the
// LocalPorts of its loopback, writes /etc/resolv.conf naming Gateway, and
// hands the device and the listeners to P1 (mountmgr.Server.Net), where rootfs's
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
	// Addr6, when valid, is the sandbox's IPv6 address and prefix on
	// Device, whose IPv6 default route is then Device itself; the zero
	// value leaves the sandbox IPv4 only.
	Addr6 netip.Prefix `json:"addr6,omitzero"`
	// MTU of Device.
	MTU int `json:"mtu"`
	// LocalPorts are listened on at 127.0.0.1 (and [::1] where the
	// sandbox has IPv6 on lo) inside the sandbox; P1 relays them.
	LocalPorts []uint16 `json:"localPorts,omitempty"`
}

// MaxLocalPorts bounds NetSpec.LocalPorts: two descriptors each travel in
// one message (SCM_RIGHTS carries at most 253).
const MaxLocalPorts = 100

func (n *NetSpec) validate() error {
	if n.Device == "" || len(n.Device) > 15 || !n.Addr.Addr().Is4() || !n.Gateway.Is4() || !n.Addr.Contains(n.Gateway) || n.MTU < 576 || n.MTU > 65535 {
		return fmt.Errorf("%w: network: device %q, address %s, gateway %s, MTU %d", ErrBadSpec, n.Device, n.Addr, n.Gateway, n.MTU)
	}
	if n.Addr6.IsValid() && (!n.Addr6.Addr().Is6() || n.Addr6.Addr().Is4In6() || n.Addr6.Addr().Zone() != "") {
		return fmt.Errorf("%w: network: IPv6 address %s", ErrBadSpec, n.Addr6)
	}
	if len(n.LocalPorts) > MaxLocalPorts {
		return fmt.Errorf("%w: network: more than %d localhost ports", ErrBadSpec, MaxLocalPorts)
	}
	return nil
}

// ResolvConf is the sandbox's /etc/resolv.conf with a NetSpec.
func (n *NetSpec) ResolvConf() string {
	return "# rootfs: the sandbox's only resolver, which applies the network policy\nnameserver " + n.Gateway.String() + "\noptions edns0\n"
}
