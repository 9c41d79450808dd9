package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ErrBadRule is a pattern that cannot be a rule; the message says why in
// one line.
var ErrBadRule = errors.New("bad network rule")

// Kind says what a [Rule] matches.
type Kind uint8

// The kinds of rule.
const (
	// Domain matches one name exactly.
	Domain Kind = iota + 1
	// Wildcard matches every name below Name ("*.Name"), not Name itself.
	Wildcard
	// Prefix matches the addresses of Prefix (a single address is a /32
	// or /128).
	Prefix
	// LocalPort is a port of the host's loopback, shown inside the
	// sandbox at the same address. Only in --allow-net.
	LocalPort
)

// Rule is one parsed pattern. Port 0 means every port (LocalPort always
// has one).
type Rule struct {
	Kind   Kind
	Name   string       // Domain, Wildcard: lower case, no trailing dot
	Prefix netip.Prefix // Prefix: masked; IPv4-mapped addresses unmapped
	Port   uint16
	// Text is the pattern as given, for messages.
	Text string
}

// String is the rule as a flag value, canonical.
func (r Rule) String() string {
	var host string
	switch r.Kind {
	case Domain:
		host = r.Name
	case Wildcard:
		host = "*." + r.Name
	case LocalPort:
		host = "localhost"
	case Prefix:
		if r.Prefix.IsSingleIP() {
			host = r.Prefix.Addr().String()
			if r.Prefix.Addr().Is6() && r.Port != 0 {
				host = "[" + host + "]"
			}
		} else {
			host = r.Prefix.String()
		}
	}
	if r.Port != 0 {
		return host + ":" + strconv.Itoa(int(r.Port))
	}
	return host
}

// ParseRule parses one pattern (see the package doc). Errors wrap
// ErrBadRule and quote the pattern.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(s)
	if err != nil {
		return Rule{}, fmt.Errorf("%w %q: %s", ErrBadRule, s, err)
	}
	r.Text = s
	return r, nil
}

type ruleError string

func (e ruleError) Error() string { return string(e) }

func parseRule(s string) (Rule, error) {
	if strings.TrimSpace(s) != s || s == "" {
		return Rule{}, ruleError("empty, or spaces around it")
	}
	host, port, err := splitPort(s)
	if err != nil {
		return Rule{}, err
	}
	r := Rule{Port: port}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Rule{}, ruleError("an address with a zone cannot be a rule")
		}
		a = a.Unmap()
		r.Kind, r.Prefix = Prefix, netip.PrefixFrom(a, a.BitLen())
	} else if p, err := netip.ParsePrefix(host); err == nil {
		if p.Bits() == 0 {
			return Rule{}, ruleError("covers every address; the default already allows the public internet, and --host-network shares the host's network")
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			if p.Bits() < 0 {
				return Rule{}, ruleError("bad IPv4-mapped prefix")
			}
		}
		r.Kind, r.Prefix = Prefix, p.Masked()
	} else if strings.ContainsAny(host, "/") {
		return Rule{}, ruleError("not a CIDR (want ADDRESS/BITS, e.g. 10.1.0.0/16)")
	} else if strings.EqualFold(host, "localhost") {
		r.Kind = LocalPort
	} else {
		name := strings.ToLower(strings.TrimSuffix(host, "."))
		r.Kind = Domain
		if rest, ok := strings.CutPrefix(name, "*."); ok {
			r.Kind, name = Wildcard, rest
			if !strings.Contains(name, ".") {
				return Rule{}, ruleError("a wildcard must name a domain below a top-level domain (*.example.com, not *.com)")
			}
		}
		if err := checkName(name); err != nil {
			return Rule{}, err
		}
		r.Name = name
	}
	if r.Kind == Prefix && r.Prefix.IsSingleIP() && r.Prefix.Addr().IsLoopback() {
		r.Kind, r.Prefix = LocalPort, netip.Prefix{}
	}
	if r.Kind == LocalPort && r.Port == 0 {
		return Rule{}, ruleError("the host's loopback needs a port: localhost:PORT")
	}
	if r.Kind == Prefix && r.Prefix.Addr().IsLoopback() {
		return Rule{}, ruleError("the host's loopback is reached by port: localhost:PORT")
	}
	return r, nil
}

// splitPort splits HOST[:PORT], [V6][:PORT] and a bare V6 address or CIDR.
func splitPort(s string) (host string, port uint16, err error) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		h, after, ok := strings.Cut(rest, "]")
		if !ok {
			return "", 0, ruleError("missing ]")
		}
		if after == "" {
			return h, 0, nil
		}
		p, ok := strings.CutPrefix(after, ":")
		if !ok {
			return "", 0, ruleError("want [ADDRESS]:PORT")
		}
		port, err := parsePort(p)
		return h, port, err
	}
	if strings.Count(s, ":") > 1 { // a bare IPv6 address or prefix: no port
		return s, 0, nil
	}
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return s, 0, nil
	}
	if h == "" {
		return "", 0, ruleError("no host before the port")
	}
	port, err = parsePort(p)
	return h, port, err
}

func parsePort(p string) (uint16, error) {
	n, err := strconv.ParseUint(p, 10, 32)
	if err != nil || p[0] == '+' {
		return 0, ruleError(fmt.Sprintf("port %q is not a number", p))
	}
	if n < 1 || n > 65535 {
		return 0, ruleError(fmt.Sprintf("port %d out of range 1-65535", n))
	}
	return uint16(n), nil
}

// checkName accepts a DNS name of letters, digits, '-' and '_' in labels
// of 1 to 63 bytes, at most 253 in all, with at least one label that is not
// all digits (so that 1.2.3 is not taken for a name).
func checkName(name string) error {
	if name == "" {
		return ruleError("empty name")
	}
	if len(name) > 253 {
		return ruleError("name longer than 253 bytes")
	}
	digits := true
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 {
			return ruleError("empty label or label longer than 63 bytes")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return ruleError("a label starts or ends with '-'")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case c >= 'a' && c <= 'z', c == '-', c == '_':
				digits = false
			case c >= '0' && c <= '9':
			case c == '*':
				return ruleError("'*' only as the first label: *.example.com")
			default:
				return ruleError(fmt.Sprintf("%q is not allowed in a name", c))
			}
		}
	}
	if digits {
		return ruleError("not an address, and a name needs a letter")
	}
	return nil
}

// matchName reports whether r (Domain or Wildcard) matches name, which is
// lower case without a trailing dot.
func (r *Rule) matchName(name string) bool {
	switch r.Kind {
	case Domain:
		return name == r.Name
	case Wildcard:
		return len(name) > len(r.Name)+1 && strings.HasSuffix(name, r.Name) && name[len(name)-len(r.Name)-1] == '.'
	}
	return false
}

func (r *Rule) matchPort(port uint16) bool { return r.Port == 0 || port == 0 || r.Port == port }

// CanonName lower-cases name and drops a trailing dot, as names are kept
// in the table and matched by rules.
func CanonName(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }
