package netpolicy

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // Rule.String(); "" with wantErr
		kind     Kind
		wantErr  string // a piece of the message
	}{
		{name: "domain", in: "Example.COM.", want: "example.com", kind: Domain},
		{name: "domain port", in: "api.example.com:443", want: "api.example.com:443", kind: Domain},
		{name: "wildcard", in: "*.example.com", want: "*.example.com", kind: Wildcard},
		{name: "wildcard port", in: "*.example.com:8443", want: "*.example.com:8443", kind: Wildcard},
		{name: "ipv4", in: "192.168.1.10", want: "192.168.1.10", kind: Prefix},
		{name: "ipv4 port", in: "192.168.1.10:8080", want: "192.168.1.10:8080", kind: Prefix},
		{name: "cidr", in: "10.1.2.3/16", want: "10.1.0.0/16", kind: Prefix},
		{name: "cidr port", in: "10.1.0.0/16:22", want: "10.1.0.0/16:22", kind: Prefix},
		{name: "ipv6 bare", in: "fd00::1", want: "fd00::1", kind: Prefix},
		{name: "ipv6 brackets port", in: "[fd00::1]:80", want: "[fd00::1]:80", kind: Prefix},
		{name: "ipv6 cidr", in: "fd00::/8", want: "fd00::/8", kind: Prefix},
		{name: "ipv6 brackets no port", in: "[2001:db8::1]", want: "2001:db8::1", kind: Prefix},
		{name: "mapped", in: "::ffff:10.0.0.1", want: "10.0.0.1", kind: Prefix},
		{name: "localhost", in: "localhost:5432", want: "localhost:5432", kind: LocalPort},
		{name: "127 is localhost", in: "127.0.0.1:5432", want: "localhost:5432", kind: LocalPort},
		{name: "::1 is localhost", in: "[::1]:6379", want: "localhost:6379", kind: LocalPort},
		{name: "underscore", in: "_srv.example.com", want: "_srv.example.com", kind: Domain},

		{name: "empty", in: "", wantErr: "empty"},
		{name: "spaces", in: " example.com", wantErr: "spaces"},
		{name: "port zero", in: "example.com:0", wantErr: "out of range"},
		{name: "port big", in: "example.com:65536", wantErr: "out of range"},
		{name: "port text", in: "example.com:https", wantErr: "not a number"},
		{name: "port plus", in: "example.com:+80", wantErr: "not a number"},
		{name: "port empty", in: "example.com:", wantErr: "not a number"},
		{name: "no host", in: ":80", wantErr: "no host"},
		{name: "all v4", in: "0.0.0.0/0", wantErr: "covers every address"},
		{name: "all v6", in: "::/0", wantErr: "covers every address"},
		{name: "bad cidr", in: "10.0.0.0/33", wantErr: "not a CIDR"},
		{name: "tld wildcard", in: "*.com", wantErr: "below a top-level"},
		{name: "star inside", in: "a.*.example.com", wantErr: "first label"},
		{name: "bare star", in: "*", wantErr: "first label"},
		{name: "localhost no port", in: "localhost", wantErr: "needs a port"},
		{name: "loopback no port", in: "127.0.0.1", wantErr: "needs a port"},
		{name: "loopback cidr", in: "127.0.0.0/8", wantErr: "localhost:PORT"},
		{name: "bad char", in: "exa mple.com", wantErr: "not allowed"},
		{name: "empty label", in: "a..b", wantErr: "empty label"},
		{name: "dash", in: "-a.com", wantErr: "'-'"},
		{name: "numeric", in: "1.2.3", wantErr: "needs a letter"},
		{name: "long label", in: strings.Repeat("a", 64) + ".com", wantErr: "63"},
		{name: "unclosed", in: "[fd00::1", wantErr: "missing ]"},
		{name: "junk after bracket", in: "[fd00::1]x", wantErr: "[ADDRESS]:PORT"},
		{name: "zone", in: "fe80::1%eth0", wantErr: "zone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRule(tt.in)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrBadRule) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseRule(%q) = %v, %v; want error with %q", tt.in, r, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRule(%q): %v", tt.in, err)
			}
			if got := r.String(); got != tt.want || r.Kind != tt.kind {
				t.Errorf("ParseRule(%q) = %q kind %d; want %q kind %d", tt.in, got, r.Kind, tt.want, tt.kind)
			}
			// The canonical form parses to the same rule.
			r2, err := ParseRule(r.String())
			if err != nil || r2.String() != r.String() {
				t.Errorf("round trip of %q: %q, %v", r.String(), r2.String(), err)
			}
		})
	}
}

func TestWildcardMatch(t *testing.T) {
	r, _ := ParseRule("*.example.com")
	for name, want := range map[string]bool{
		"a.example.com": true, "a.b.example.com": true, "example.com": false,
		"badexample.com": false, "example.com.evil": false, "xexample.com": false,
	} {
		if got := r.matchName(name); got != want {
			t.Errorf("*.example.com matches %q = %v, want %v", name, got, want)
		}
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com:443", "10.0.0.0/8", "[fd00::1]:80", "localhost:5432", "::ffff:1.2.3.4/120", "0.0.0.0/0", "a:b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			if !errors.Is(err, ErrBadRule) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q", err)
			}
			return
		}
		if r.Kind == Prefix && (r.Prefix.Bits() == 0 || r.Prefix.Addr().IsLoopback() || r.Prefix.Addr().Is4In6()) {
			t.Fatalf("%q parsed to %v", s, r)
		}
		if r.Kind == LocalPort && r.Port == 0 {
			t.Fatalf("%q: localhost without port", s)
		}
		// The canonical form is a fixed point.
		r2, err := ParseRule(r.String())
		if err != nil || r2.String() != r.String() {
			t.Fatalf("%q -> %q -> %q, %v", s, r.String(), r2.String(), err)
		}
	})
}
