// Package netpolicy is the network half of the sandbox's boundary, as
// data: the rules that --allow-net, --deny-net and --net-only become, the
// default that keeps the public internet and refuses the host's private
// side, the one decision every connection and DNS answer goes through,
// and the bounded table of which names resolved to which addresses. It is
// pure Go and does no I/O: the engine that applies it to packets is
// package netpolicy/netstack.
//
// # Rules
//
// A pattern is a domain ("example.com", exactly that name), a wildcard
// ("*.example.com", every name below example.com, not example.com itself),
// an address ("192.168.1.10", "[fd00::1]") or a CIDR ("10.1.0.0/16"),
// each with an optional ":PORT" (no port: every port); "localhost:PORT"
// (or 127.0.0.1:PORT, [::1]:PORT) names a port of the host's loopback,
// which the sandbox then reaches at the same address ([Policy.LocalPorts]).
// [ParseRule] says in one line what is wrong with a bad one.
//
// # The decision
//
// [Policy.Decide] judges one connection: its destination address and
// port, the names the sandbox resolved through rootfs to that address
// ([Table]), and the TLS SNI or HTTP Host it sent, if any. In order:
//
//  1. a --deny-net rule matching the address or any of the names: refused;
//  2. an --allow-net (or --net-only) rule matching the address, or
//     matching a name that resolved to it, which the SNI/Host, when sent,
//     must agree with (be one of those names): allowed; but a name never
//     allows the host's loopback or a link-local address (the metadata
//     service): whoever answers for an allowed name could point it there,
//     so only an address rule or localhost:PORT reaches them;
//  3. with --net-only: refused; otherwise the address's class decides:
//     the public internet is allowed; the host's loopback and own
//     addresses, "this network" (0/8), private ranges (RFC 1918, CGNAT
//     100.64/10, IPv6 ULA), link-local (169.254/16 with the cloud metadata
//     address, fe80::/10), multicast, broadcast and reserved ranges are
//     refused.
//
// A refusal names the flag that would allow it ([Decision.Hint]). Since a
// name only counts for the address it resolved to, a name that resolves
// to the metadata address or to 127.0.0.1 (DNS rebinding) is judged as
// that address, and a hard-coded address is judged by the address rules.
// UDP other than DNS needs an explicit --allow-net rule: the default
// does not allow it ([Query.UDP]), so HTTP/3 clients fall back to TCP.
package netpolicy
