package netstack

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// exchange asks the sandbox's resolver one question from inside the
// sandbox and returns the whole answer.
func exchange(name string, qtype uint16) (*dns.Msg, error) {
	c := &dns.Client{Timeout: 3 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(4096, false)
	r, _, err := c.Exchange(m, Gateway.String()+":53")
	return r, err
}

// hintsOf lists the hints of the answer's HTTPS records, in order.
func hintsOf(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		h, ok := rr.(*dns.HTTPS)
		if !ok {
			continue
		}
		for _, kv := range h.Value {
			switch kv := kv.(type) {
			case *dns.SVCBIPv4Hint:
				for _, ip := range kv.Hint {
					out = append(out, ip.String())
				}
			case *dns.SVCBIPv6Hint:
				for _, ip := range kv.Hint {
					out = append(out, ip.String())
				}
			}
		}
	}
	return out
}

// TestServiceBindingHints: the addresses an HTTPS record hints at (which
// clients that read these records connect to without asking A or AAAA)
// are judged as answers' addresses are: the host's loopback and the
// metadata address leave the hints, IPv6 hints go when the sandbox has no
// IPv6, the kept ones are remembered for the name, and address records in
// the additional section never reach the sandbox. The control for each
// is the test zone's own answer, which has them.
func TestServiceBindingHints(t *testing.T) {
	setupWorld(t)
	for _, v6 := range []bool{true, false} {
		t.Run(fmt.Sprintf("ipv6=%v", v6), func(t *testing.T) {
			sb := newSandboxFamilies(t, netpolicy.Options{}, viaStack, v6)
			got := inNS(t, sb.pid, func() []string {
				r, err := exchange("www.internet.test", dns.TypeHTTPS)
				if err != nil {
					return []string{err.Error()}
				}
				return hintsOf(r)
			})
			want := []string{"203.0.113.1", "2001:db8:113::1"}
			if !v6 {
				want = want[:1]
			}
			if !slices.Equal(got, want) {
				t.Errorf("hints through rootfs %q, want %q", got, want)
			}
		})
	}
	control := inNS(t, hostPID, func() []string {
		r, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(new(dns.Msg).SetQuestion("www.internet.test.", dns.TypeHTTPS), dnsAddr.String()+":53")
		if err != nil {
			return []string{err.Error()}
		}
		return hintsOf(r)
	})
	if len(control) != 6 {
		t.Errorf("control: the zone's own hints %q, want all 6", control)
	}

	t.Run("a name known by its hint alone", func(t *testing.T) {
		sb := newSandbox(t, netpolicy.Options{Only: []string{"hintonly.internet.test"}})
		get := func() result {
			return inNS(t, sb.pid, func() result { return connect(hostDial, "203.0.113.1:80", "hintonly.internet.test", "") })
		}
		if r := get(); r.reached() {
			t.Fatalf("before the HTTPS question (control): %v; want refused, the address is not known by the name yet", r)
		}
		inNS(t, sb.pid, func() error { _, err := exchange("hintonly.internet.test", dns.TypeHTTPS); return err })
		if r := get(); !r.reached() || !strings.Contains(r.line, "host hintonly.internet.test") {
			t.Errorf("after it: %v; want the world, by the hinted address", r)
		}
	})

	t.Run("rebinding by a hint", func(t *testing.T) {
		sb := newSandbox(t, netpolicy.Options{})
		r := inNS(t, sb.pid, func() *dns.Msg { r, _ := exchange("rebind-hint.test", dns.TypeHTTPS); return r })
		if r == nil || len(hintsOf(r)) != 0 {
			t.Errorf("answer %v; want no hint left", r)
		}
	})

	t.Run("no addresses in the additional section", func(t *testing.T) {
		sb := newSandbox(t, netpolicy.Options{})
		r := inNS(t, sb.pid, func() *dns.Msg { r, _ := exchange("extra.test", dns.TypeA); return r })
		if r == nil || len(r.Answer) != 1 {
			t.Fatalf("answer %v; want extra.test's one A record", r)
		}
		for _, rr := range r.Extra {
			if _, ok := rr.(*dns.A); ok {
				t.Errorf("additional section reached the sandbox: %v", rr)
			}
		}
		c := inNS(t, hostPID, func() *dns.Msg {
			r, _, _ := (&dns.Client{Timeout: 3 * time.Second}).Exchange(new(dns.Msg).SetQuestion("extra.test.", dns.TypeA), dnsAddr.String()+":53")
			return r
		})
		if c == nil || len(c.Extra) == 0 {
			t.Errorf("control: the zone's own answer %v has no additional record", c)
		}
	})
}

// TestCNAMEChain: the names an answer's addresses are remembered for are
// the question's and the CNAME chain from it. An address of another owner
// in the same answer is neither told to the sandbox nor allowed by the
// question's name, and a CNAME from another name does not lend it the
// address. Controls: the chain's own address is reached by the aliased
// name, and the stray address is reached from the host's namespace.
func TestCNAMEChain(t *testing.T) {
	sb := newSandbox(t, netpolicy.Options{Only: []string{"alias.test", "stray.test"}})
	inNS(t, sb.pid, func() error { _, err := resolve("alias.test"); return err })
	if r := inNS(t, sb.pid, func() result { return connect(hostDial, "203.0.113.1:80", "alias.test", "") }); !r.reached() {
		t.Errorf("the chain's address by the aliased name: %v; want reached", r)
	}
	got := inNS(t, sb.pid, func() []string { a, err := resolve("stray.test"); return append(a, errString(err)) })
	if !slices.Equal(got, []string{"203.0.113.1", ""}) {
		t.Errorf("stray.test through rootfs: %q; want only its own address", got)
	}
	stray := dnsAddr.String() + ":80"
	if r := inNS(t, sb.pid, func() result { return connect(hostDial, stray, "stray.test", "") }); r.reached() {
		t.Errorf("another owner's address, by the question's name: %v; want refused", r)
	}
	if r := inNS(t, sb.pid, func() result { return connect(hostDial, stray, "elsewhere.test", "") }); r.reached() {
		t.Errorf("by the stray CNAME's owner: %v; want refused", r)
	}
	if r := attempt(t, nil, stray, ""); !r.reached() {
		t.Errorf("negative control (host network) %s: %v", stray, r)
	}
}

// TestDNSAnswerForm: what the sandbox's resolver returns besides the
// addresses. A name refused by its addresses is there with no address
// (NOERROR, empty: musl, asking A and AAAA at once, takes NXDOMAIN on
// either for the name's end), a name refused by a rule is NXDOMAIN, a
// client that sent no EDNS0 gets no OPT record (rootfs adds EDNS0 for its
// own question upstream), and a CNAME of another owner does not reach the
// sandbox. Controls: the zone's own answers.
func TestDNSAnswerForm(t *testing.T) {
	sb := newSandbox(t, netpolicy.Options{Deny: []string{"other.internet.test"}})
	ask := func(name string, qtype uint16, edns bool) *dns.Msg {
		return inNS(t, sb.pid, func() *dns.Msg {
			m := new(dns.Msg).SetQuestion(name, qtype)
			if edns {
				m.SetEdns0(4096, false)
			}
			r, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(m, Gateway.String()+":53")
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return new(dns.Msg)
			}
			return r
		})
	}
	if r := ask("rebind-lo.test.", dns.TypeA, false); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Errorf("a name rebound to loopback: %s with %d answers, want NOERROR and none", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if r := ask("other.internet.test.", dns.TypeA, false); r.Rcode != dns.RcodeNameError {
		t.Errorf("a denied name: %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	if r := ask("www.internet.test.", dns.TypeA, false); r.IsEdns0() != nil || len(r.Answer) != 1 {
		t.Errorf("no EDNS0 asked: OPT %v, %d answers; want no OPT and one answer", r.IsEdns0(), len(r.Answer))
	}
	if r := ask("www.internet.test.", dns.TypeA, true); r.IsEdns0() == nil {
		t.Error("EDNS0 asked: no OPT in the answer")
	}
	r := ask("stray.test.", dns.TypeA, false)
	for _, rr := range r.Answer {
		if rr.Header().Name != "stray.test." {
			t.Errorf("a record of another owner reached the sandbox: %v", rr)
		}
	}
	c := inNS(t, hostPID, func() *dns.Msg {
		r, _, _ := (&dns.Client{Timeout: 3 * time.Second}).Exchange(new(dns.Msg).SetQuestion("stray.test.", dns.TypeA), dnsAddr.String()+":53")
		return r
	})
	if c == nil || len(c.Answer) != 3 {
		t.Errorf("control: the zone's own answer for stray.test: %v", c)
	}
}
