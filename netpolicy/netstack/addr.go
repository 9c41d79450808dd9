// Package netstack applies a netpolicy.Policy to the packets of the
// sandbox's network namespace: a userspace TCP/IP stack (gVisor's
// netstack, as tailscale and wireguard-go use it) reads the sandbox's
// TUN device in P1, answers DNS on the gateway address, and relays each
// allowed TCP connection (and explicitly allowed UDP flow) through a
// socket of P1's own namespace; everything else is refused, with one
// rate-limited line on the logger.
//
// # Addresses
//
// The sandbox's side of the link is [SandboxAddr]/24, its default route
// and only resolver are [Gateway]. Where the host can reach IPv6
// (Options.IPv6), the sandbox also has [SandboxAddr6], with the link as
// its IPv6 default route, and AAAA answers are recorded and judged as A
// answers are; else AAAA questions are answered with no address, and
// clients use IPv4 at once. The sandbox's IPv6 address is a ULA, so
// address selection (RFC 6724) prefers IPv4 where a name has both, and
// IPv6 carries what only IPv6 reaches. Everything the sandbox sends to the
// link is the engine's, whatever its destination (the NIC is promiscuous).
//
// # TCP
//
// The SYN's destination is judged with the names that resolved to it
// (netpolicy.Table). Refused: RST. Allowed: rootfs dials the destination
// first (a refused or unreachable one gives RST), completes the
// handshake, and, when a name is involved (the address resolved from a
// name, or the policy has name rules), waits for the connection's first
// bytes and reads, within [peekMax] bytes and [peekWait] of the first,
// a TLS ClientHello's SNI (over as many records as the client splits it
// in) or the host an HTTP request names, and judges again with it (it
// can only narrow); one that has not ended by then is refused, since
// the name it sends is not known. A protocol where the server speaks
// first ends the wait as soon as the server's first bytes arrive.
//
// # DNS
//
// Queries to Gateway:53 (UDP) are answered by asking the upstream resolver
// (Options.Upstream, by default the host's first nameserver) from P1. A
// name the policy refuses is not asked at all (MayResolve) and gets
// NXDOMAIN. Of an answer, only the records on the CNAME chain from the
// question reach the sandbox, and of their addresses (A, AAAA, service
// bindings' hints) only those the policy allows (DecideName); an answer
// left with none has no address, NOERROR and empty (rebinding to
// 127.0.0.1 or the metadata address is refused here, and again by address
// if the address is used without DNS), not NXDOMAIN, which a resolver
// asking A and AAAA at once (musl) takes on either for the name's end.
package netstack

import "net/netip"

// The sandbox's link. 10.0.2.0/24 is slirp's and podman's choice: it
// hides the same /24 of a host LAN, which the default refuses anyway.
var (
	// SandboxAddr is the sandbox's address on its TUN device.
	SandboxAddr = netip.MustParsePrefix("10.0.2.100/24")
	// Gateway is the sandbox's default route and DNS server: the engine.
	Gateway = netip.MustParseAddr("10.0.2.2")
	// SandboxAddr6 is the sandbox's IPv6 address on its TUN device: a
	// unique local address (fc00::/7, which the policy refuses as a
	// destination) of rootfs's own /48 ("rootf" in its global ID), so it
	// stands for no host's LAN.
	SandboxAddr6 = netip.MustParsePrefix("fd72:6f6f:7466::100/64")
)

// MTU of the link: large, as slirp4netns and pasta use, so a bulk
// transfer is few packets through the userspace stack.
const MTU = 65520

// DeviceName is the TUN device's name in the sandbox.
const DeviceName = "rfs0"
