package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
)

// ErrEverything is a set of flags that refuses nothing: a --net-only
// without a destination, say.
var ErrEverything = errors.New("bad network policy")

// Options are the flags, as given. The zero value is the default policy.
type Options struct {
	// Allow are --allow-net patterns: they add to what is allowed.
	Allow []string
	// Deny are --deny-net patterns: they take away, before anything allows.
	Deny []string
	// Only are --net-only patterns: when non-empty, nothing but these and
	// Allow is reached (the default classes no longer allow anything).
	Only []string
	// HostAddrs are the host's own addresses (its interfaces'), refused
	// like its loopback: a service listening on every interface is reached
	// through them. nil means none known. SetHost replaces them.
	HostAddrs []netip.Addr
	// HostNets are the networks the host reaches directly (its on-link
	// routes: the LAN, a VPN's networks), refused as private ranges are:
	// over IPv6 a LAN's machines have global addresses. SetHost replaces
	// them.
	HostNets []netip.Prefix
}

// Host is what the policy knows of the host's side: Options.HostAddrs
// and Options.HostNets, kept current by SetHost.
type Host struct {
	Addrs []netip.Addr
	Nets  []netip.Prefix
	// Local are prefixes the host takes as its own by a local route
	// (AnyIP), beyond its interfaces' addresses: each address in them is
	// the host's own, as Addrs are.
	Local []netip.Prefix
}

// Policy is the parsed policy; only its view of the host changes
// (SetHost). Its methods are safe for concurrent use.
type Policy struct {
	allow, deny []Rule
	only        bool
	host        atomic.Pointer[Host]
	nat64       atomic.Pointer[[]netip.Prefix] // the network's own (SetNAT64)
	nameRules   bool                           // some rule matches by name
	prefixAllow bool                           // some allow rule matches by address
}

// Networks narrower than these are taken as the host's own (HostNets);
// a wider on-link route (OpenVPN's 0.0.0.0/1 and 128.0.0.0/1, a VPN's
// whole address space) is a way to the internet, not a LAN.
const (
	minHostNet4 = 8
	minHostNet6 = 16
)

// SetHost replaces the policy's view of the host's addresses and on-link
// networks (a host gains and loses them while rootfs runs: a new IPv6
// temporary address each day, a VPN coming up); Decide uses the new view
// from its next call.
func (p *Policy) SetHost(h Host) {
	n := &Host{}
	for _, a := range h.Addrs {
		n.Addrs = append(n.Addrs, a.Unmap().WithZone(""))
	}
	for _, pf := range h.Local {
		a := pf.Addr().Unmap().WithZone("")
		bits := pf.Bits()
		if pf.Addr().Is4In6() {
			bits -= 96
		}
		if bits <= 0 {
			continue
		}
		n.Local = append(n.Local, netip.PrefixFrom(a, bits).Masked())
	}
	for _, pf := range h.Nets {
		a := pf.Addr().Unmap().WithZone("")
		bits := pf.Bits()
		if pf.Addr().Is4In6() {
			bits -= 96
		}
		if bits < 0 || a.Is4() && bits < minHostNet4 || a.Is6() && bits < minHostNet6 {
			continue
		}
		n.Nets = append(n.Nets, netip.PrefixFrom(a, bits).Masked())
	}
	p.host.Store(n)
}

// ownAddr reports whether a is one of the host's own addresses (of its
// interfaces, or of a local route's prefix).
func (p *Policy) ownAddr(a netip.Addr) bool {
	h := p.host.Load()
	if h == nil {
		return false
	}
	if slices.Contains(h.Addrs, a) {
		return true
	}
	for _, l := range h.Local {
		if l.Contains(a) {
			return true
		}
	}
	return false
}

// hostNet is the host's on-link network that holds a, if any.
func (p *Policy) hostNet(a netip.Addr) (netip.Prefix, bool) {
	if h := p.host.Load(); h != nil {
		for _, n := range h.Nets {
			if n.Contains(a) {
				return n, true
			}
		}
	}
	return netip.Prefix{}, false
}

// New parses o. The error is the first bad pattern, naming its flag.
func New(o Options) (*Policy, error) {
	p := &Policy{only: len(o.Only) > 0}
	for _, l := range []struct {
		flag string
		pats []string
		dst  *[]Rule
	}{{"--net-only", o.Only, &p.allow}, {"--allow-net", o.Allow, &p.allow}, {"--deny-net", o.Deny, &p.deny}} {
		for _, s := range l.pats {
			r, err := ParseRule(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.flag, err)
			}
			if r.Kind == LocalPort && l.dst == &p.deny {
				return nil, fmt.Errorf("%s: %w %q: the host's loopback is refused already; localhost:PORT is for --allow-net", l.flag, ErrBadRule, s)
			}
			switch r.Kind {
			case Domain, Wildcard:
				p.nameRules = true
			case Prefix:
				if l.dst == &p.allow {
					p.prefixAllow = true
				}
			}
			*l.dst = append(*l.dst, r)
		}
	}
	p.SetHost(Host{Addrs: o.HostAddrs, Nets: o.HostNets})
	return p, nil
}

// HasNameRules reports whether some rule matches by name: then a
// connection's SNI or Host can change its decision even when no name
// resolved to its address.
func (p *Policy) HasNameRules() bool { return p.nameRules }

// LocalPorts are the host loopback ports of the localhost:PORT rules,
// sorted, without repeats.
func (p *Policy) LocalPorts() []uint16 {
	var out []uint16
	for _, r := range p.allow {
		if r.Kind == LocalPort {
			out = append(out, r.Port)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// NameRules are the Domain rules of --allow-net and --net-only (the
// names to check at start).
func (p *Policy) NameRules() []Rule {
	var out []Rule
	for _, r := range p.allow {
		if r.Kind == Domain {
			out = append(out, r)
		}
	}
	return out
}

// Query is one connection to judge.
type Query struct {
	Addr netip.Addr // destination
	Port uint16     // destination port; 0 only from DecideName (any port)
	// Names resolved through rootfs to Addr (see Table), lower case.
	Names []string
	// ServerName is the TLS SNI or HTTP Host the sandbox sent, "" if none
	// (not TLS or HTTP, not peeked, or none sent).
	ServerName string
	// UDP: a datagram flow other than DNS to the gateway.
	UDP bool
}

// Decision is the verdict on a Query.
type Decision struct {
	Allow bool
	// Reason says why, in a few words ("private address (RFC 1918)",
	// "allowed by --allow-net *.example.com").
	Reason string
	// Hint is the flag that would allow a refused query, "" when none
	// would (a --deny-net refused it: drop that).
	Hint string
}

// Decide judges q; see the package doc for the order.
func (p *Policy) Decide(q Query) Decision {
	return p.decide(q, false)
}

func (p *Policy) decide(q Query, dns bool) Decision {
	a := q.Addr.Unmap().WithZone("")
	sn := CanonName(q.ServerName)
	allowNames, denyNames := q.Names, q.Names
	agree := true
	if sn != "" {
		if slices.Contains(q.Names, sn) {
			allowNames, denyNames = []string{sn}, []string{sn}
		} else {
			agree = false
			allowNames, denyNames = nil, append(slices.Clone(q.Names), sn)
		}
	}
	for i := range p.deny {
		r := &p.deny[i]
		if dns && r.Port != 0 {
			continue // a port's refusal does not hide the name
		}
		if !r.matchPort(q.Port) {
			continue
		}
		if r.Kind == Prefix && r.Prefix.Contains(a) || slices.ContainsFunc(denyNames, r.matchName) {
			return Decision{Reason: "refused by --deny-net " + r.Text}
		}
	}
	// A name never allows what nameProof lists (the host's loopback and
	// own addresses, link-local and metadata addresses): whoever answers
	// for an allowed name could point it there (DNS rebinding). Only an
	// address rule or localhost:PORT does.
	byName := !p.nameProof(a)
	for i := range p.allow {
		r := &p.allow[i]
		if !r.matchPort(q.Port) {
			continue
		}
		if r.Kind == Prefix && r.Prefix.Contains(a) || byName && slices.ContainsFunc(allowNames, r.matchName) ||
			r.Kind == LocalPort && a.IsLoopback() && q.Port == r.Port {
			return Decision{Allow: true, Reason: "allowed by " + p.allowFlag() + " " + r.Text}
		}
	}
	class, refused := p.Classify(a)
	var d Decision
	switch {
	case p.only:
		d = Decision{Reason: "not in --net-only (" + class + ")"}
	case refused:
		d = Decision{Reason: class}
	case q.UDP:
		d = Decision{Reason: "UDP other than DNS (" + class + ")"}
	default:
		return Decision{Allow: true, Reason: class}
	}
	if !agree && len(q.Names) > 0 {
		d.Reason += fmt.Sprintf("; %s %q is not a name that resolved to %s (%s)", serverNameKind(q), sn, a, strings.Join(q.Names, ", "))
	}
	d.Hint = p.hint(q, a, sn)
	return d
}

func serverNameKind(q Query) string {
	if q.UDP {
		return "name"
	}
	return "TLS SNI or HTTP Host"
}

func (p *Policy) allowFlag() string {
	if p.only {
		return "--net-only/--allow-net"
	}
	return "--allow-net"
}

// hint is the --allow-net pattern that would allow q: by name when one
// was used, else by address; with the port unless q is any port.
func (p *Policy) hint(q Query, a netip.Addr, sn string) string {
	host := ""
	if _, err := netip.ParseAddr(sn); err == nil {
		sn = "" // an address for a name (HTTP Host: [2001:db8::1]): only an address rule allows it
	}
	switch {
	case a.IsLoopback() && q.Port != 0:
		host = "localhost"
	case p.nameProof(a):
		host = a.String() // no name allows it (see decide)
		if a.Is6() && q.Port != 0 {
			host = "[" + host + "]"
		}
	case sn != "":
		host = sn
	case len(q.Names) > 0:
		host = q.Names[0]
	case a.Is6() && q.Port != 0:
		host = "[" + a.String() + "]"
	default:
		host = a.String()
	}
	if q.Port != 0 {
		host = fmt.Sprintf("%s:%d", host, q.Port)
	}
	return "--allow-net " + host
}

type class struct {
	p      netip.Prefix
	name   string
	refuse bool
}

var classes = func() []class {
	mk := func(s, name string) class { return class{netip.MustParsePrefix(s), name, true} }
	return []class{
		mk("169.254.169.254/32", "cloud metadata address (link-local)"),
		mk("255.255.255.255/32", "broadcast"),
		mk("0.0.0.0/8", `"this network" (0.0.0.0/8, the host's own)`),
		mk("127.0.0.0/8", "host loopback"),
		mk("10.0.0.0/8", "private address (RFC 1918)"),
		mk("172.16.0.0/12", "private address (RFC 1918)"),
		mk("192.168.0.0/16", "private address (RFC 1918)"),
		mk("100.100.100.200/32", "cloud metadata address (Alibaba Cloud)"),
		mk("168.63.129.16/32", "cloud metadata address (Azure's WireServer)"),
		mk("100.64.0.0/10", "shared address (CGNAT, RFC 6598)"),
		mk("169.254.0.0/16", "link-local address"),
		mk("192.0.0.0/24", "IETF protocol assignment (RFC 6890)"),
		mk("198.18.0.0/15", "benchmarking address (RFC 2544)"),
		mk("224.0.0.0/4", "multicast"),
		mk("240.0.0.0/4", "reserved address (240/4)"),
		mk("::/128", "unspecified address (the host's own)"),
		mk("::1/128", "host loopback"),
		mk("::/96", "IPv4-compatible address (deprecated)"),
		mk("fd00:ec2::254/128", "cloud metadata address (AWS, IPv6 ULA)"),
		mk("fd20:ce::254/128", "cloud metadata address (Google Cloud, IPv6 ULA)"),
		mk("64:ff9b:1::/48", "local-use NAT64 prefix (RFC 8215, to IPv4 the host's network translates)"),
		mk("2001::/32", "Teredo address (tunnels to IPv4)"),
		mk("fc00::/7", "private address (IPv6 ULA)"),
		mk("fec0::/10", "site-local address (deprecated, private)"),
		mk("fe80::/10", "link-local address"),
		mk("ff00::/8", "multicast"),
	}
}()

// IPv6 prefixes that carry an IPv4 address, which a host with the
// translator or tunnel forwards to: NAT64's well-known prefix (the
// address in the last 32 bits) and 6to4 (in bits 16-47).
var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4 = netip.MustParsePrefix("2002::/16")
)

// siit is SIIT's IPv4-translated form, ::ffff:0:a.b.c.d (RFC 6052/7915).
var siit = netip.MustParsePrefix("::ffff:0:0:0/96")

// embedded4 is the IPv4 address a carries through NAT64, 6to4 or SIIT,
// and how.
func (p *Policy) embedded4(a netip.Addr) (v4 netip.Addr, how string, ok bool) {
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64", true
	case sixTo4.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4", true
	case siit.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "SIIT", true
	}
	if ps := p.nat64.Load(); ps != nil {
		for _, pf := range *ps {
			if pf.Contains(a) {
				return nat64Embedded(a, pf.Bits()), "the network's NAT64", true
			}
		}
	}
	return netip.Addr{}, "", false
}

// SetNAT64 gives the policy the network's own NAT64 prefixes (RFC 6052's
// network-specific prefixes, as NAT64Prefixes finds them): an IPv4
// address one carries is judged as that address, as one in the
// well-known prefix is. Without them such an address is judged as the
// IPv6 address it is, and the host's NAT64 would carry it to a private
// IPv4 network.
func (p *Policy) SetNAT64(ps []netip.Prefix) {
	var keep []netip.Prefix
	for _, pf := range ps {
		if pf.Addr().Is6() && !pf.Addr().Is4In6() && slices.Contains(nat64Lens, pf.Bits()) {
			keep = append(keep, pf.Masked())
		}
	}
	p.nat64.Store(&keep)
}

// nat64Lens are the prefix lengths RFC 6052 allows a NAT64 prefix.
var nat64Lens = []int{96, 64, 56, 48, 40, 32}

// nat64Embedded is the IPv4 address a carries after a NAT64 prefix of
// bits (one of nat64Lens): RFC 6052 2.2 puts it after the prefix and
// around bits 64-71, which stay 0.
func nat64Embedded(a netip.Addr, bits int) netip.Addr {
	b := a.As16()
	var v []byte
	for i := bits / 8; len(v) < 4; i++ {
		if i != 8 {
			v = append(v, b[i])
		}
	}
	return netip.AddrFrom4([4]byte(v))
}

// ipv4onlyArpa are the addresses ipv4only.arpa has (RFC 7050): a DNS64
// answers its AAAA question with them under the network's NAT64 prefix.
var ipv4onlyArpa = []netip.Addr{netip.MustParseAddr("192.0.0.170"), netip.MustParseAddr("192.0.0.171")}

// NAT64Prefixes finds the NAT64 prefixes of a DNS64's answers to the AAAA
// question for ipv4only.arpa (RFC 7050 3): each answer with one of that
// name's IPv4 addresses at a position RFC 6052 allows gives its prefix.
// The well-known prefix, which the policy knows already, is left out.
func NAT64Prefixes(answers []netip.Addr) []netip.Prefix {
	var ps []netip.Prefix
	for _, a := range answers {
		if !a.Is6() || a.Is4In6() || nat64.Contains(a) {
			continue
		}
		for _, bits := range nat64Lens {
			if bits < 64 && a.As16()[8] != 0 {
				continue // bits 64-71 of an RFC 6052 address are 0
			}
			if slices.Contains(ipv4onlyArpa, nat64Embedded(a, bits)) {
				if pf, err := a.Prefix(bits); err == nil && !slices.Contains(ps, pf) {
					ps = append(ps, pf)
				}
				break
			}
		}
	}
	return ps
}

// metadataAddrs are the cloud metadata services' addresses besides
// 169.254.169.254 (link-local): Alibaba Cloud's (in CGNAT's range), AWS's
// and Google Cloud's IPv6 ones (ULAs), and Azure's WireServer, at a
// public address every Azure VM reaches (the VM's goal state, its
// extensions' settings, and its certificates to a caller that sends a
// certificate of its own; HostGAPlugin on port 32526), which no default
// class would refuse. All are refused by default, and kept from names as
// 169.254.169.254 is.
var metadataAddrs = []netip.Addr{netip.MustParseAddr("100.100.100.200"), netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("fd20:ce::254"), netip.MustParseAddr("168.63.129.16")}

// v4compat is ::/96, IPv4-compatible addresses: on a host with a sit0
// device each of its IPv4 addresses is its own as ::a.b.c.d too.
var v4compat = netip.MustParsePrefix("::/96")

// nameProof reports whether a is an address no name rule allows: the
// host's loopback, its own addresses and the unspecified address (the
// loopback to a dial), link-local addresses and the cloud metadata
// services, also embedded in NAT64, 6to4, SIIT or an IPv4-compatible
// address.
func (p *Policy) nameProof(a netip.Addr) bool {
	proof := func(a netip.Addr) bool {
		return a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || slices.Contains(metadataAddrs, a) || p.ownAddr(a)
	}
	if proof(a) {
		return true
	}
	if v4, _, ok := p.embedded4(a); ok {
		return proof(v4)
	}
	if v4compat.Contains(a) {
		return proof(netip.AddrFrom4([4]byte(a.AsSlice()[12:16])))
	}
	return false
}

// Classify names the class of a and reports whether the default refuses it.
func (p *Policy) Classify(a netip.Addr) (name string, refused bool) {
	a = a.Unmap().WithZone("")
	if !a.IsValid() {
		return "invalid address", true
	}
	if p.ownAddr(a) {
		return "the host's own address", true
	}
	if v4, how, ok := p.embedded4(a); ok { // judged as the IPv4 address it carries
		if n, r := p.Classify(v4); r {
			return n + " (through " + how + ")", true
		}
	}
	for _, c := range classes {
		if c.p.Contains(a) {
			return c.name, c.refuse
		}
	}
	if n, ok := p.hostNet(a); ok {
		return "the host's own network (" + n.String() + ", on-link)", true
	}
	return "public internet", false
}

// MayResolve reports whether a DNS query for name can lead anywhere, so
// that it is worth asking the upstream resolver: not when a --deny-net
// rule names it, nor under --net-only when no rule names it and no rule
// allows by address. It keeps DNS itself inside the policy (no query for
// a name the policy refuses leaves the host).
func (p *Policy) MayResolve(name string) Decision {
	name = CanonName(name)
	names := []string{name}
	for i := range p.deny {
		if r := &p.deny[i]; r.Port == 0 && r.matchName(name) {
			return Decision{Reason: "refused by --deny-net " + r.Text}
		}
	}
	if !p.only || p.prefixAllow {
		return Decision{Allow: true}
	}
	for i := range p.allow {
		if slices.ContainsFunc(names, p.allow[i].matchName) {
			return Decision{Allow: true}
		}
	}
	return Decision{Reason: "not in --net-only", Hint: "--allow-net " + name}
}

// DecideName judges a DNS answer: name resolved to addrs. keep are the
// addresses the sandbox may be told (those some port of which would be
// allowed for name); when addrs is not empty and keep is, the name is
// refused (a name that resolves only to the host's private side is DNS
// rebinding, or a LAN name not allowed) and d says why and how to allow
// it. An empty answer passes as it is.
func (p *Policy) DecideName(name string, addrs []netip.Addr) (keep []netip.Addr, d Decision) {
	name = CanonName(name)
	if d := p.MayResolve(name); !d.Allow {
		return nil, d
	}
	var first Decision
	for _, a := range addrs {
		d := p.decide(Query{Addr: a, Names: []string{name}}, true)
		if d.Allow {
			keep = append(keep, a)
		} else if first.Reason == "" {
			first = d
		}
	}
	if len(addrs) > 0 && len(keep) == 0 {
		first.Reason = fmt.Sprintf("resolves only to refused addresses (%s: %s)", addrs[0], first.Reason)
		return nil, first
	}
	return keep, Decision{Allow: true}
}
