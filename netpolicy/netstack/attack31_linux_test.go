package netstack

// Attacks from an outside review of the network boundary (attack31),
// each with a negative control: the same attempt from the host's
// namespace (hostPID) reaches, or the form the policy already refuses is
// refused, so that what is refused is the protection's work.

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// azureWire is Azure's WireServer (and HostGAPlugin, port 32526): a
// public address every Azure VM reaches, which serves the VM's goal
// state, its extensions' settings and, to a caller that sends a
// certificate of its own, the VM's certificates encrypted for it.
var azureWire = "168.63.129.16"

func init() {
	records["rebind-azure.test."] = []string{azureWire}
	records["rebind-anyip.test."] = []string{"192.88.99.7"}
}

// worldAddr gives the world's w0 address a (with prefix bits) for the
// test's life.
func worldAddr(t *testing.T, a string) {
	t.Helper()
	w := setupWorld(t)
	p := strconv.Itoa(w.pid)
	run(t, "nsenter", "-t", p, "-n", "ip", "addr", "add", a, "dev", "w0")
	t.Cleanup(func() { exec.Command("nsenter", "-t", p, "-n", "ip", "addr", "del", a, "dev", "w0").Run() })
}

// TestAttack31AzureWireServer: Azure's WireServer, 168.63.129.16, is
// the cloud's metadata service of a kind, at a public address: by default
// the server reaches it (goal state, extension settings with their
// secrets, the VM's certificates), and a name allowed by --allow-net that
// resolves to it reaches it too. It must be refused as 169.254.169.254
// is, and kept from names. Negative control: the host's namespace
// reaches it; an address rule allows it.
func TestAttack31AzureWireServer(t *testing.T) {
	worldAddr(t, azureWire+"/32")
	if r := attempt(t, nil, azureWire+":80", ""); !r.reached() {
		t.Fatalf("negative control (host network): %v", r)
	}
	for _, mode := range []dialMode{viaStack, viaFast, viaNoTUN} {
		t.Run(mode.String(), func(t *testing.T) {
			sb := newSandboxMode(t, netpolicy.Options{Allow: []string{"rebind-azure.test"}}, mode)
			if r := attempt(t, sb, azureWire+":80", ""); r.reached() {
				t.Errorf("BROKEN: the default policy reaches Azure's WireServer: %v", r)
			}
			if r := attempt(t, sb, "rebind-azure.test:80", ""); r.reached() {
				t.Errorf("BROKEN: a name allowed by --allow-net reaches Azure's WireServer: %v", r)
			}
			ok := newSandboxMode(t, netpolicy.Options{Allow: []string{azureWire + ":80"}}, mode)
			if r := attempt(t, ok, azureWire+":80", ""); !r.reached() {
				t.Errorf("control: --allow-net %s:80 does not reach it: %v", azureWire, r)
			}
		})
	}
}

// TestAttack31AnyIPLocalRoute: a host that takes a whole prefix as its
// own by a local route (AnyIP: "ip route add local 192.88.99.0/24 dev
// lo", as IPv6 proxy pools and transparent proxies do) answers on every
// address of it with its services bound to 0.0.0.0 and [::]: those
// addresses are the host's own as much as its interfaces' are, but no
// interface lists them, so the default policy allowed them as the
// public internet, and a name could allow them. Negative control: the
// host's namespace reaches its service there.
func TestAttack31AnyIPLocalRoute(t *testing.T) {
	setupWorld(t)
	for _, r := range [][]string{{"-4", "192.88.99.0/24"}, {"-6", "2001:db8:99::/64"}} {
		run(t, "ip", r[0], "route", "add", "local", r[1], "dev", "lo")
		t.Cleanup(func() { exec.Command("ip", r[0], "route", "del", "local", r[1], "dev", "lo").Run() })
	}
	for _, dst := range []string{"192.88.99.7:8080", "[2001:db8:99::7]:8080"} {
		if r := attempt(t, nil, dst, ""); !r.reached() {
			t.Fatalf("negative control (host network) %s: %v", dst, r)
		}
	}
	for _, mode := range []dialMode{viaStack, viaFast, viaNoTUN} {
		t.Run(mode.String(), func(t *testing.T) {
			sb := newSandboxMode(t, netpolicy.Options{Allow: []string{"rebind-anyip.test"}}, mode)
			for _, dst := range []string{"192.88.99.7:8080", "[2001:db8:99::7]:8080", "rebind-anyip.test:8080"} {
				if r := attempt(t, sb, dst, ""); r.reached() {
					t.Errorf("BROKEN: %s, the host's own by a local route, reached: %v", dst, r)
				}
			}
		})
	}
}

// fragConn splits the first TLS record written through it (the
// ClientHello) in two records, the first of 10 bytes: TLS allows a
// handshake message over any number of records, and servers (Go's,
// OpenSSL, the CDNs') put it together again.
type fragConn struct {
	net.Conn
	done bool
}

func (c *fragConn) Write(b []byte) (int, error) {
	if c.done || len(b) < 5 || b[0] != 0x16 {
		return c.Conn.Write(b)
	}
	rl := int(binary.BigEndian.Uint16(b[3:5]))
	if len(b) < 5+rl || rl <= 10 {
		return c.Conn.Write(b)
	}
	c.done = true
	var out []byte
	p := b[5 : 5+rl]
	for _, part := range [][]byte{p[:10], p[10:]} {
		out = append(out, 0x16, b[1], b[2], byte(len(part)>>8), byte(len(part)))
		out = append(out, part...)
	}
	out = append(out, b[5+rl:]...)
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// lateConn waits before its first write: a client that sends its first
// bytes after the relay stopped looking for them.
type lateConn struct {
	net.Conn
	wait time.Duration
	done bool
}

func (c *lateConn) Write(b []byte) (int, error) {
	if !c.done {
		c.done = true
		time.Sleep(c.wait)
	}
	return c.Conn.Write(b)
}

// stallConn writes its first write in two, pausing after the first few
// bytes: a ClientHello or HTTP head still incomplete when the relay's
// wait ends.
type stallConn struct {
	net.Conn
	wait time.Duration
	done bool
}

func (c *stallConn) Write(b []byte) (int, error) {
	if c.done || len(b) < 20 {
		return c.Conn.Write(b)
	}
	c.done = true
	if _, err := c.Conn.Write(b[:6]); err != nil {
		return 0, err
	}
	time.Sleep(c.wait)
	if _, err := c.Conn.Write(b[6:]); err != nil {
		return 0, err
	}
	return len(b), nil
}

// nameAttempt connects to addr from sb (its dial), wraps the connection
// with wrap, and speaks TLS with SNI sni (or, with sni "", plain HTTP
// with Host host); the first line the world answers.
func nameAttempt(t *testing.T, sb *sandbox, resolveFirst, addr, sni, host string, wrap func(net.Conn) net.Conn) result {
	return inNS(t, sb.pid, func() result {
		if resolveFirst != "" {
			if _, err := resolve(resolveFirst); err != nil {
				return result{err: err}
			}
		}
		c, err := sb.dial(addr)
		if err != nil {
			return result{err: err}
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(peekWait + 5*time.Second))
		w := wrap(c)
		if sni != "" {
			tc := tls.Client(w, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
			fmt.Fprintf(tc, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", sni)
			return readResult(tc)
		}
		fmt.Fprintf(w, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", host)
		return readResult(c)
	})
}

// TestAttack31ServerNameUnchecked: where a connection is allowed by a
// name (--net-only NAME, the address of a CDN that serves many), its
// TLS SNI or HTTP Host must be that name, and a --deny-net name is
// refused by its SNI even at an address allowed otherwise. The relay
// looked at the first bytes for at most peekWait and one TLS record: a
// client that waits before its ClientHello, sends it in two records, or
// pauses inside it, named any server it liked. Controls: the same
// ClientHello sent at once is refused; the allowed name reaches.
func TestAttack31ServerNameUnchecked(t *testing.T) {
	late := func(c net.Conn) net.Conn { return &lateConn{Conn: c, wait: peekWait + 500*time.Millisecond} }
	frag := func(c net.Conn) net.Conn { return &fragConn{Conn: c} }
	stall := func(c net.Conn) net.Conn { return &stallConn{Conn: c, wait: peekWait + 500*time.Millisecond} }
	plain := func(c net.Conn) net.Conn { return c }
	for _, mode := range []dialMode{viaStack, viaNoTUN} {
		t.Run(mode.String(), func(t *testing.T) {
			only := newSandboxMode(t, netpolicy.Options{Only: []string{"www.internet.test"}}, mode)
			if r := nameAttempt(t, only, "www.internet.test", "203.0.113.1:443", "www.internet.test", "", plain); !r.reached() {
				t.Fatalf("control: the allowed name's own SNI: %v", r)
			}
			if r := nameAttempt(t, only, "www.internet.test", "203.0.113.1:443", "other.internet.test", "", plain); r.reached() {
				t.Fatalf("control: another name's SNI at once: %v", r)
			}
			for _, c := range []struct {
				name string
				wrap func(net.Conn) net.Conn
			}{{"sni after the wait", late}, {"sni in a second record", frag}, {"sni paused inside", stall}} {
				if r := nameAttempt(t, only, "www.internet.test", "203.0.113.1:443", "other.internet.test", "", c.wrap); r.reached() {
					t.Errorf("BROKEN: --net-only www.internet.test, %s: SNI other.internet.test reached: %v", c.name, r)
				}
			}
			for _, c := range []struct {
				name string
				wrap func(net.Conn) net.Conn
			}{{"host after the wait", late}, {"host paused inside", stall}} {
				if r := nameAttempt(t, only, "www.internet.test", "203.0.113.1:80", "", "other.internet.test", c.wrap); r.reached() {
					t.Errorf("BROKEN: --net-only www.internet.test, %s: Host other.internet.test reached: %v", c.name, r)
				}
			}
			deny := newSandboxMode(t, netpolicy.Options{Deny: []string{"www.internet.test"}}, mode)
			if r := nameAttempt(t, deny, "", "203.0.113.1:443", "www.internet.test", "", plain); r.reached() {
				t.Fatalf("control: the denied name's SNI at once: %v", r)
			}
			for _, c := range []struct {
				name string
				wrap func(net.Conn) net.Conn
			}{{"sni after the wait", late}, {"sni in a second record", frag}} {
				if r := nameAttempt(t, deny, "", "203.0.113.1:443", "www.internet.test", "", c.wrap); r.reached() {
					t.Errorf("BROKEN: --deny-net www.internet.test, %s: SNI www.internet.test reached: %v", c.name, r)
				}
			}
		})
	}
}

// quicInitialDatagram is a datagram as a QUIC client's first: a long header
// (version 1, Initial) padded to 1200 bytes, whose ClientHello (and SNI)
// is encrypted with keys only a QUIC parser derives.
func quicInitialDatagram() []byte {
	b := make([]byte, 1200)
	b[0] = 0xc3                      // long header, fixed bit, Initial, 4-byte packet number
	copy(b[1:5], []byte{0, 0, 0, 1}) // QUIC v1
	b[5] = 8                         // DCID length
	copy(b[6:14], "attack31")
	return b
}

// udpSend sends each datagram of ds in turn on one socket connected to
// dst, from the namespace of pid, and returns what each read gave: the
// echo's first bytes, or the error.
func udpSend(t *testing.T, pid int, dst string, ds ...[]byte) []string {
	return inNS(t, pid, func() []string {
		c, err := net.Dial("udp4", dst)
		if err != nil {
			return []string{err.Error()}
		}
		defer c.Close()
		var out []string
		for _, d := range ds {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			if _, err := c.Write(d); err != nil {
				out = append(out, err.Error())
				continue
			}
			b := make([]byte, 2048)
			n, err := c.Read(b)
			if err != nil {
				out = append(out, err.Error())
				continue
			}
			out = append(out, string(b[:min(n, 10)]))
		}
		return out
	})
}

// TestAttack31QUICByName: a name rule allows UDP to the addresses the
// name resolved to (--net-only www.internet.test: HTTP/3 to it), but a
// QUIC Initial carries its ClientHello encrypted, so the SNI that TCP
// must show is never checked: at a CDN's address, HTTP/3 names any site
// it serves. Such a datagram, first on its flow or after others, must
// be refused (ICMP port unreachable: HTTP/3 clients fall back to TCP,
// where the SNI is checked). Controls: other datagrams on the flow pass;
// under an address rule, where no name decides, QUIC passes.
func TestAttack31QUICByName(t *testing.T) {
	const dst = "203.0.113.1:4433"
	sb := newSandbox(t, netpolicy.Options{Only: []string{"www.internet.test"}})
	if err := inNS(t, sb.pid, func() error { _, err := resolve("www.internet.test"); return err }); err != nil {
		t.Fatal(err)
	}
	got := udpSend(t, sb.pid, dst, []byte("ping"))
	if got[0] != "echo ping" {
		t.Fatalf("control: a datagram to the allowed name's address: %q", got)
	}
	if got := udpSend(t, sb.pid, dst, quicInitialDatagram()); got[0] == "echo \xc3\x00\x00\x00\x01" {
		t.Errorf("BROKEN: a QUIC Initial to an address allowed by name, first on its flow, reached: %q", got)
	}
	if got := udpSend(t, sb.pid, dst, []byte("ping"), quicInitialDatagram()); got[1] == "echo \xc3\x00\x00\x00\x01" {
		t.Errorf("BROKEN: a QUIC Initial to an address allowed by name, after another datagram, reached: %q", got)
	}
	byAddr := newSandbox(t, netpolicy.Options{Only: []string{dst}})
	if got := udpSend(t, byAddr.pid, dst, quicInitialDatagram()); got[0] != "echo \xc3\x00\x00\x00\x01" {
		t.Errorf("control: a QUIC Initial under an address rule: %q", got)
	}
}
