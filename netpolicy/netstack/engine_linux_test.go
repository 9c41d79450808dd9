package netstack

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

type step struct {
	name    string
	dst     string // NAME:PORT or ADDR:PORT
	sni     string // TLS with this SNI
	reach   bool
	want    string // a piece of the line (reached) or error (refused)
	control bool   // also attempt from the host's namespace, which must reach
	six     bool   // NAME:PORT by its AAAA records
}

// runSteps runs steps from a sandbox with policy o, once for each way
// its client can connect (through the stack, and offered to the fast
// path on a blocking and on a non-blocking socket, and from an IPv6
// socket to IPv4 addresses in their v4-mapped form): the same rules must
// hold on every path. A step that reaches through the fast path must
// have been carried by it.
func runSteps(t *testing.T, o netpolicy.Options, steps []step) {
	for _, mode := range dialModes {
		t.Run(mode.String(), func(t *testing.T) {
			sb := newSandboxMode(t, o, mode)
			for _, s := range steps {
				t.Run(s.name, func(t *testing.T) {
					before := sb.eng.Stats().TCPFast
					r := attemptFamily(t, sb, s.dst, s.sni, s.six)
					if r.reached() != s.reach || !strings.Contains(r.String(), s.want) {
						t.Errorf("%s from the sandbox: %v; want reached=%v with %q", s.dst, r, s.reach, s.want)
					}
					fast := sb.eng.Stats().TCPFast - before
					if want := mode != viaStack && r.reached() && !strings.Contains(s.name, "localhost"); fast != 0 != want {
						t.Errorf("%d connections carried by the fast path, want %v", fast, want)
					}
					if s.control {
						if c := attemptFamily(t, nil, s.dst, s.sni, s.six); !c.reached() {
							t.Errorf("negative control (host network) %s: %v", s.dst, c)
						}
					}
				})
			}
		})
	}
}

func TestDefaultPolicy(t *testing.T) {
	runSteps(t, netpolicy.Options{}, []step{
		{name: "internet by name", dst: "www.internet.test:80", reach: true, want: "world 203.0.113.1:80 host www.internet.test", control: true},
		{name: "internet by address", dst: "203.0.113.1:80", reach: true, want: "world 203.0.113.1:80", control: true},
		{name: "internet tls", dst: "www.internet.test:443", sni: "www.internet.test", reach: true, want: "sni www.internet.test", control: true},
		{name: "lan by address", dst: "192.168.77.1:80", want: "connection refused", control: true},
		{name: "lan by name", dst: "db.lan.test:80", want: "no address", control: true},
		{name: "metadata by address", dst: "169.254.169.254:80", want: "connection refused", control: true},
		{name: "rebinding to metadata", dst: "rebind-meta.test:80", want: "no address"},
		{name: "rebinding to loopback", dst: "rebind-lo.test:5432", want: "no address"},
		{name: "mixed answer keeps the public address", dst: "mixed.test:80", reach: true, want: "world 203.0.113.1:80"},
		{name: "host loopback", dst: "127.0.0.1:5432", want: "connection refused", control: true},
		{name: "host's own address", dst: "198.51.100.2:8080", want: "connection refused", control: true},
		{name: "unknown name", dst: "nx.internet.test:80", want: "NXDOMAIN"},
	})
}

func TestAllowNet(t *testing.T) {
	runSteps(t, netpolicy.Options{Allow: []string{"db.lan.test:80", "localhost:5432", "169.254.169.254:80"}}, []step{
		{name: "hard-coded lan address, name not used", dst: "192.168.77.1:80", want: "connection refused"},
		{name: "lan by allowed name", dst: "db.lan.test:80", reach: true, want: "world 192.168.77.1:80 host db.lan.test", control: true},
		{name: "allowed name, other port", dst: "db.lan.test:443", sni: "db.lan.test", want: "connection refused"},
		{name: "localhost port at its usual address", dst: "127.0.0.1:5432", reach: true, want: "host 127.0.0.1:5432", control: true},
		{name: "metadata allowed by address", dst: "169.254.169.254:80", reach: true, want: "world 169.254.169.254:80"},
	})
}

func TestDenyNet(t *testing.T) {
	runSteps(t, netpolicy.Options{Deny: []string{"www.internet.test"}}, []step{
		{name: "denied name", dst: "www.internet.test:80", want: "NXDOMAIN", control: true},
		{name: "other name, same address", dst: "other.internet.test:80", reach: true, want: "host other.internet.test"},
		{name: "sni names the denied", dst: "other.internet.test:443", sni: "www.internet.test", want: "EOF"},
		{name: "sni agrees", dst: "other.internet.test:443", sni: "other.internet.test", reach: true, want: "sni other.internet.test"},
	})
}

func TestNetOnly(t *testing.T) {
	runSteps(t, netpolicy.Options{Only: []string{"www.internet.test"}}, []step{
		{name: "hard-coded address", dst: "203.0.113.1:80", want: "connection refused", control: true},
		{name: "unlisted name", dst: "other.internet.test:80", want: "NXDOMAIN", control: true},
		{name: "listed name", dst: "www.internet.test:443", sni: "www.internet.test", reach: true, want: "sni www.internet.test"},
		{name: "sni fronting", dst: "www.internet.test:443", sni: "other.internet.test", want: "EOF"},
	})
}

// The plain-HTTP Host check: a connection to an address allowed by name
// whose Host names something else is cut before any byte goes out.
func TestHostHeaderMustAgree(t *testing.T) {
	sb := newSandbox(t, netpolicy.Options{Only: []string{"www.internet.test"}})
	r := inNS(t, sb.pid, func() result {
		if _, err := resolve("www.internet.test"); err != nil {
			return result{err: err}
		}
		return connect(hostDial, "203.0.113.1:80", "other.internet.test", "")
	})
	if r.reached() {
		t.Errorf("Host other.internet.test reached: %v", r)
	}
	r = inNS(t, sb.pid, func() result { return connect(hostDial, "203.0.113.1:80", "www.internet.test", "") })
	if !r.reached() {
		t.Errorf("Host www.internet.test: %v", r)
	}
}

func udpEcho(t *testing.T, pid int) error {
	return inNS(t, pid, func() error {
		c, err := net.Dial("udp4", "203.0.113.1:4433")
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("quic?")); err != nil {
			return err
		}
		b := make([]byte, 64)
		n, err := c.Read(b)
		if err != nil {
			return err
		}
		if string(b[:n]) != "echo quic?" {
			return fmt.Errorf("got %q", b[:n])
		}
		return nil
	})
}

func TestUDP(t *testing.T) {
	sb := newSandbox(t, netpolicy.Options{})
	if err := udpEcho(t, sb.pid); err == nil {
		t.Error("UDP other than DNS reached by default")
	}
	if err := udpEcho(t, hostPID); err != nil {
		t.Errorf("negative control: %v", err)
	}
	sb = newSandbox(t, netpolicy.Options{Allow: []string{"203.0.113.1:4433"}})
	if err := udpEcho(t, sb.pid); err != nil {
		t.Errorf("allowed UDP: %v", err)
	}
}

// Programs that know nothing of proxies are held all the same.
func TestProgramsIgnoringProxies(t *testing.T) {
	sb := newSandbox(t, netpolicy.Options{})
	progs := map[string]func(url string) []string{
		"curl": func(u string) []string {
			return []string{"curl", "--noproxy", "*", "-sS", "--max-time", "3", u}
		},
		"python3": func(u string) []string {
			return []string{"python3", "-c", "import sys,urllib.request;print(urllib.request.urlopen(sys.argv[1],timeout=3).read().decode())", u}
		},
		"node": func(u string) []string {
			return []string{"node", "-e", "fetch(process.argv[1]).then(r=>r.text()).then(t=>console.log(t),e=>{console.error(e.cause||e);process.exit(1)})", u}
		},
	}
	for name, argv := range progs {
		if _, err := exec.LookPath(name); err != nil {
			t.Logf("%s not installed: skipped", name)
			continue
		}
		for _, tc := range []struct {
			url   string
			reach bool
		}{{"http://203.0.113.1/", true}, {"http://192.168.77.1/", false}, {"http://169.254.169.254/latest/meta-data/", false}} {
			t.Run(name+" "+tc.url, func(t *testing.T) {
				a := argv(tc.url)
				for _, pid := range []int{sb.pid, hostPID} {
					cmd := exec.Command("nsenter", append([]string{"--net=" + nsPath(pid), "--"}, a...)...)
					cmd.Env = append(os.Environ(), "http_proxy=", "HTTP_PROXY=", "no_proxy=*")
					out, err := cmd.CombinedOutput()
					ok := err == nil && strings.Contains(string(out), "world")
					want := tc.reach || pid == hostPID // the host's namespace is the negative control
					if ok != want {
						t.Errorf("%s in netns of %d: reached=%v, want %v\n%s", name, pid, ok, want, out)
					}
				}
			})
		}
	}
	if sb.eng.Stats().Refused == 0 {
		t.Error("no refusal counted")
	}
}

// A large answer: truncated over UDP (no EDNS0), whole over TCP.
func TestDNSOverTCP(t *testing.T) {
	sb := newSandbox(t, netpolicy.Options{})
	type got struct {
		udpTC bool
		tcpN  int
		err   error
	}
	g := inNS(t, sb.pid, func() got {
		m := new(dns.Msg)
		m.SetQuestion("big.test.", dns.TypeA)
		u, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(m, Gateway.String()+":53")
		if err != nil {
			return got{err: err}
		}
		r, _, err := (&dns.Client{Net: "tcp", Timeout: 3 * time.Second}).Exchange(m, Gateway.String()+":53")
		if err != nil {
			return got{err: err}
		}
		return got{udpTC: u.Truncated, tcpN: len(r.Answer)}
	})
	if g.err != nil || !g.udpTC || g.tcpN != 60 {
		t.Errorf("big answer: %+v; want truncated over UDP, 60 records over TCP", g)
	}
}

// failFirstAccept is a listener whose first Accept fails as accept(2)
// does when the process is out of descriptors.
type failFirstAccept struct {
	net.Listener
	failed bool
}

func (l *failFirstAccept) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServeLocalOutlivesAcceptError: a --allow-net localhost:PORT
// listener that fails one accept (out of descriptors for a moment) keeps
// serving, as the relay and the resolver do. The sandbox's side listens
// at 127.0.0.2:PORT here, the host's service at 127.0.0.1:PORT.
// Negative control: before, ServeLocal returned on any accept error and
// the port stayed dead for the session.
func TestServeLocalOutlivesAcceptError(t *testing.T) {
	setupWorld(t) // this process's own namespace, lo up
	svc, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	go func() {
		for {
			c, err := svc.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); fmt.Fprintln(c, "db") }()
		}
	}()
	port := svc.Addr().(*net.TCPAddr).Port
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := netpolicy.New(netpolicy.Options{Allow: []string{fmt.Sprintf("localhost:%d", port)}})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := New(nil, Options{Policy: pol, Logger: testLogger(t), Upstream: "127.0.0.1:53"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	eng.ServeLocal(&failFirstAccept{Listener: l}, uint16(port))
	c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if line != "db\n" {
		t.Fatalf("after a failed accept, the local port answered %q, %v; want the host's service", line, err)
	}
}
