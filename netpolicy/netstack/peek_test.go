package netstack

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// clientHello returns the first bytes a TLS client sends for sni.
func clientHello(t *testing.T, sni string) []byte {
	t.Helper()
	a, b := net.Pipe()
	go func() {
		_ = tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake()
	}()
	defer a.Close()
	buf := make([]byte, 0, 8192)
	_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		tmp := make([]byte, 8192)
		n, err := b.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if _, more := serverName(buf); !more || err != nil {
			return buf
		}
	}
}

func TestServerName(t *testing.T) {
	hello := clientHello(t, "api.example.com")
	tests := []struct {
		name string
		in   []byte
		want string
		more bool
	}{
		{name: "tls", in: hello, want: "api.example.com"},
		{name: "tls partial", in: hello[:len(hello)/2], more: true},
		{name: "tls header only", in: hello[:3], more: true},
		{name: "http", in: []byte("GET / HTTP/1.1\r\nUser-Agent: x\r\nHost: Example.com:8080\r\n\r\n"), want: "Example.com"},
		{name: "http v6 host", in: []byte("GET / HTTP/1.1\r\nHost: [fd00::1]:80\r\n\r\n"), want: "fd00::1"},
		{name: "http partial", in: []byte("GET / HTTP/1.1\r\nHost: a"), more: true},
		{name: "http method prefix", in: []byte("PO"), more: true},
		{name: "http no host", in: []byte("GET / HTTP/1.0\r\n\r\n")},
		{name: "other protocol", in: []byte("SSH-2.0-OpenSSH_9.6\r\n")},
		{name: "postgres", in: []byte{0, 0, 0, 8, 4, 210, 22, 47}},
		{name: "tls not a hello", in: []byte{0x16, 3, 1, 0, 4, 2, 0, 0, 0}},
		{name: "empty", in: nil, more: true},
		// As servers read them (attack31): a ClientHello over several
		// records, and the request forms a server routes by.
		{name: "tls in two records", in: twoRecords(hello, 10), want: "api.example.com"},
		{name: "tls in one-byte records", in: twoRecords(hello, 1), want: "api.example.com"},
		{name: "tls second record partial", in: twoRecords(hello, 10)[:30], more: true},
		{name: "tls then not a handshake", in: append(twoRecords(hello, 10)[:15], 0x17, 3, 3, 0, 1, 0), more: false},
		{name: "http after empty lines", in: []byte("\r\n\r\nGET / HTTP/1.1\r\nHost: other.example\r\n\r\n"), want: "other.example"},
		{name: "http lines ended by LF", in: []byte("GET / HTTP/1.1\nX: a\nHost: other.example\n\n"), want: "other.example"},
		{name: "http absolute-form", in: []byte("GET http://other.example:8080/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n"), want: "other.example"},
		{name: "http absolute-form with userinfo", in: []byte("GET http://api.example.com@other.example/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n"), want: "other.example"},
		{name: "http absolute-form no parser takes", in: []byte("GET http://other.example\\@x%zz/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n"), want: "x%zz"},
		{name: "http connect", in: []byte("CONNECT other.example:443 HTTP/1.1\r\nHost: api.example.com\r\n\r\n"), want: "other.example"},
		{name: "http other method", in: []byte("PROPFIND / HTTP/1.1\r\nHost: other.example\r\n\r\n"), want: "other.example"},
		{name: "not a request line", in: []byte("SET key value\r\n")},
		{name: "method too long", in: []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZ / HTTP/1.1\r\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, more := serverName(tt.in)
			if got != tt.want || more != tt.more {
				t.Errorf("serverName = %q, %v; want %q, %v", got, more, tt.want, tt.more)
			}
		})
	}
}

// twoRecords puts the handshake message of hello's first TLS record in
// records of first bytes, then one of the rest.
func twoRecords(hello []byte, first int) []byte {
	p := hello[5 : 5+(int(hello[3])<<8|int(hello[4]))]
	var out []byte
	for len(p) > 0 {
		n := min(first, len(p))
		if first == 1 && len(out) >= 5*20 {
			n = len(p) // twenty one-byte records, then the rest
		}
		out = append(out, 0x16, hello[1], hello[2], byte(n>>8), byte(n))
		out = append(out, p[:n]...)
		p = p[n:]
		if first != 1 {
			first = len(p)
		}
	}
	return out
}

func FuzzServerName(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte{0x16, 3, 1, 0, 50, 1, 0, 0, 46, 3, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = serverName(b) // never panics, whatever the sandbox sends
	})
}

func TestRefusalsRateLimited(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	r := newRefusals(zap.New(core), nil)
	for i := range 1000 {
		dst := fmt.Sprintf("192.168.%d.%d:80", i/250, i%250)
		r.refuse("tcp", dst, netpolicy.Decision{Reason: "private address (RFC 1918)", Hint: "--allow-net " + dst})
	}
	if n := logs.Len(); n < refusalBurst || n > refusalBurst+5 {
		t.Errorf("%d lines for 1000 refusals at once, want about %d", n, refusalBurst)
	}
	if r.total.Load() != 1000 {
		t.Errorf("counted %d", r.total.Load())
	}
	time.Sleep(refusalEvery + 10*time.Millisecond)
	r.refuse("udp", "203.0.113.1:443", netpolicy.Decision{Reason: "UDP other than DNS", Hint: "--allow-net 203.0.113.1:443"})
	last := logs.All()[logs.Len()-1]
	line := last.Message
	for _, f := range last.Context {
		line += " " + f.Key + "=" + f.String + " "
	}
	fields := last.ContextMap()
	if fields["allow_with"] != "--allow-net 203.0.113.1:443" || fields["not_shown"] == nil || !strings.Contains(line, "203.0.113.1:443") {
		t.Errorf("line after the burst: %v", fields)
	}
}

// TestRefusalRepeatsFolded: the same refusal again within refusalRepeat
// (a name's A and AAAA questions, a client retrying) gets no line of its
// own; the next line shown counts it, and after refusalRepeat it is shown
// again. Every refusal still reaches the hook (the audit log). Negative
// control: a different destination at the same moment is shown.
func TestRefusalRepeatsFolded(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	var hooked int
	r := newRefusals(zap.New(core), func(Refusal) { hooked++ })
	now := time.Unix(1e9, 0)
	r.now = func() time.Time { return now }
	d := netpolicy.Decision{Reason: "resolves only to refused addresses", Hint: "--allow-net lan.test"}
	for range 2 { // A, then AAAA
		r.refuse("dns", "lan.test", d)
	}
	for range 10 { // retries, 100 ms apart
		now = now.Add(100 * time.Millisecond)
		r.refuse("tcp", "10.0.0.5:5432", netpolicy.Decision{Reason: "private address (RFC 1918)"})
	}
	if n := logs.Len(); n != 2 {
		t.Fatalf("%d lines for one name and one destination refused again and again, want 2", n)
	}
	r.refuse("dns", "other.test", d)
	if n := logs.Len(); n != 3 {
		t.Fatalf("control: a different name got no line of its own (%d lines)", n)
	}
	if other := logs.All()[2].ContextMap(); other["not_shown"] != int64(9) {
		t.Errorf("the next line shown %v, want not_shown 9 (the retries; the AAAA was counted by the first retry's line)", other)
	}
	now = now.Add(refusalRepeat)
	r.refuse("dns", "lan.test", d)
	last := logs.All()[logs.Len()-1].ContextMap()
	if logs.Len() != 4 || last["dst"] != "lan.test" || last["refused"] != int64(14) {
		t.Errorf("after refusalRepeat: %d lines, the last %v; want lan.test again, refused 14", logs.Len(), last)
	}
	if hooked != 14 {
		t.Errorf("the hook got %d refusals, want all 14", hooked)
	}
}

// TestRefusalsRememberedBounded: the refusals remembered for folding
// repeats stay at most refusalRecent, however many destinations, and
// forgetting the oldest keeps those shown within refusalRepeat: the one
// just before is still folded. The clock moves refusalEvery a refusal,
// so that each is shown (and remembered); at one instant the rate limit
// would show, and so remember, only refusalBurst of them, and the bound
// would go untested. Negative control: the most remembered at once
// reaches refusalRecent, and the forgetting happened.
func TestRefusalsRememberedBounded(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	r := newRefusals(zap.New(core), nil)
	now := time.Unix(1e9, 0)
	r.now = func() time.Time { return now }
	dst := func(i int) string { return fmt.Sprintf("10.0.%d.%d:80", i/250, i%250) }
	most, forgot := 0, 0
	for i := range 10 * refusalRecent {
		now = now.Add(refusalEvery)
		before := len(r.shown)
		r.refuse("tcp", dst(i), netpolicy.Decision{})
		most = max(most, len(r.shown))
		if len(r.shown) > refusalRecent {
			t.Fatalf("%d refusals remembered, want at most %d", len(r.shown), refusalRecent)
		}
		if len(r.shown) <= before { // the oldest forgotten
			forgot++
			lines := logs.Len()
			r.refuse("tcp", dst(i-1), netpolicy.Decision{})
			if logs.Len() != lines {
				t.Fatalf("%s, shown %v ago, got a line again once the oldest were forgotten", dst(i-1), refusalEvery)
			}
		}
	}
	if most != refusalRecent || forgot == 0 {
		t.Fatalf("at most %d remembered, forgotten %d times; want %d, and some", most, forgot, refusalRecent)
	}
}
