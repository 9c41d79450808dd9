package netstack

import (
	"crypto/tls"
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
	for range 1000 {
		r.refuse("tcp", "192.168.1.1:80", netpolicy.Decision{Reason: "private address (RFC 1918)", Hint: "--allow-net 192.168.1.1:80"})
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
