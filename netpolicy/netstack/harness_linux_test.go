package netstack

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/internal/seccomp"
	"github.com/rootfs-dev/rootfs/netpolicy"
)

// The test network, all inside namespaces of the test process (nothing
// leaves this machine). TestMain re-executes the test binary in a new
// network (and mount) namespace, "the host", as real root or as root of a
// new user namespace (ROOTFS_NETTEST_USERNS=1), which is how rootfs runs
// without root. There:
//
//	sandbox netns                 host netns (rootfs, P1)            world netns
//	rfs0 10.0.2.100/24  --TUN-->  engine  -- h0 198.51.100.2/24 ---  w0 198.51.100.1/24
//	lo (127.0.0.1:5432 listener    lo: 127.0.0.1:5432 "database"        203.0.113.1/24   "the internet"
//	    relayed by the engine)     0.0.0.0:8080 (host's own address)    203.0.113.53     test DNS server
//	                                                                   192.168.77.1/24  "a LAN"
//	                                                                   169.254.169.254/16 "metadata"
//
// World serves HTTP on :80 (all its addresses), HTTPS on :443, UDP echo
// on :4433. IPv6 stands beside it: h0 2001:db8:51::2/64 (the host's own,
// a service on [::]:8080, and [::1]:5432 on its loopback), w0
// 2001:db8:51::1/64 with 2001:db8:113::1 "the internet", fd12:3456:789a::1
// "a LAN" and fd00:ec2::254 "metadata" (the address of AWS's), HTTP on
// [::]:80; the sandbox's rfs0 has SandboxAddr6. w0 also has 192.0.2.1/24,
// which the host reaches by an on-link route (192.0.2.0/24 dev h0).
const (
	envChild  = "ROOTFS_NETTEST_CHILD"
	envUserns = "ROOTFS_NETTEST_USERNS"
	// envNoVnet=1: the sandbox's TUN without IFF_VNET_HDR, as before
	// the offloads (the engine's fdbased path; a baseline for the
	// benchmarks).
	envNoVnet = "ROOTFS_NETTEST_NOVNET"
)

var (
	internet = netip.MustParseAddr("203.0.113.1")
	dnsAddr  = netip.MustParseAddr("203.0.113.53")
	lan      = netip.MustParseAddr("192.168.77.1")
	metadata = netip.MustParseAddr("169.254.169.254")
	hostAddr = netip.MustParseAddr("198.51.100.2")

	internet6  = netip.MustParseAddr("2001:db8:113::1")
	lan6       = netip.MustParseAddr("fd12:3456:789a::1")
	metadata6  = netip.MustParseAddr("fd00:ec2::254")
	hostAddr6  = netip.MustParseAddr("2001:db8:51::2")
	worldLink6 = netip.MustParseAddr("2001:db8:51::1")
	// onLinkNet is on the world's w0, which the host reaches by an
	// on-link route of 192.0.2.0/24 (no gateway), as a VPN's network.
	onLinkNet = netip.MustParseAddr("192.0.2.1")
)

func TestMain(m *testing.M) {
	if os.Getenv(envClient) != "" {
		clientMain() // a fast path client (benchfast_linux_test.go)
	}
	if os.Getenv(envChild) == "" && os.Geteuid() == 0 && len(os.Args) > 0 {
		// Re-exec in private namespaces: the tests build their network
		// there, never in the machine's.
		rc := 0
		for _, userns := range []bool{false, true} {
			cmd := exec.Command(os.Args[0], os.Args[1:]...)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			cmd.Env = append(os.Environ(), envChild+"=1")
			flags := uintptr(syscall.CLONE_NEWNET | syscall.CLONE_NEWNS)
			if userns {
				cmd.Env = append(cmd.Env, envUserns+"=1")
				flags |= syscall.CLONE_NEWUSER
				cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags,
					UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
					GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}}
			} else {
				cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
			}
			fmt.Printf("=== network namespace harness (user namespace: %v)\n", userns)
			if err := cmd.Run(); err != nil {
				rc = 1
			}
		}
		os.Exit(rc)
	}
	os.Exit(m.Run())
}

// nsPath is the network namespace of pid, or the host's (the test
// process's, opened at start: /proc/PID/ns/net follows the main thread,
// which a locked goroutine may have moved) for hostPID.
func nsPath(pid int) string {
	if pid == hostPID {
		return hostNS
	}
	return fmt.Sprintf("/proc/%d/ns/net", pid)
}

// hostPID stands for the test process's own network namespace: rootfs's,
// where --host-network would leave the server (the negative control).
const hostPID = -1

var hostNS = func() string {
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY, 0)
	if err != nil {
		return "/proc/self/ns/net"
	}
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd)
}()

// inNS runs f on a new thread in the network namespace of pid (or
// hostPID), and returns what it returns. The thread is never reused.
func inNS[T any](t testing.TB, pid int, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		{
			fd, err := unix.Open(nsPath(pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				errc <- err
				return
			}
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
			if err != nil {
				errc <- err
				return
			}
		}
		ch <- f()
	}()
	select {
	case v := <-ch:
		return v
	case err := <-errc:
		t.Fatalf("enter netns of %d: %v", pid, err)
	}
	panic("unreachable")
}

// anchor starts a process in a new network namespace and returns its pid;
// the test's cleanup ends it.
func anchor(t testing.TB) int {
	t.Helper()
	cmd, err := startAnchor()
	if err != nil {
		t.Fatalf("network namespace: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// forks runs on one thread locked for the life of the process: a death
// signal follows the thread that forked, and inNS ends its threads.
var forks = make(chan func())

func init() {
	go func() {
		runtime.LockOSThread()
		for f := range forks {
			f()
		}
	}()
}

// startAnchor starts "sleep" in a new network namespace, killed with the
// test process.
func startAnchor() (*exec.Cmd, error) {
	cmd := exec.Command("sleep", "3600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	errc := make(chan error)
	forks <- func() { errc <- cmd.Start() }
	return cmd, <-errc
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

type world struct {
	pid int
}

var theWorld *world

// setupWorld builds the host's and the world's side once per process.
func setupWorld(t testing.TB) *world {
	t.Helper()
	if os.Getenv(envChild) == "" {
		t.Skip("needs root: the network tests run in namespaces of their own (re-exec as root)")
	}
	if theWorld != nil {
		return theWorld
	}
	if err := linux.LoopbackUp(); err != nil {
		t.Fatal(err)
	}
	w := &world{pid: anchorForever(t)}
	p := fmt.Sprint(w.pid)
	run(t, "ip", "link", "add", "h0", "type", "veth", "peer", "name", "w0", "netns", p)
	run(t, "ip", "addr", "add", hostAddr.String()+"/24", "dev", "h0")
	run(t, "ip", "link", "set", "h0", "up")
	run(t, "ip", "route", "add", "default", "via", "198.51.100.1")
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", "198.51.100.1/24", "dev", "w0"},
		{"addr", "add", internet.String() + "/24", "dev", "w0"},
		{"addr", "add", dnsAddr.String() + "/32", "dev", "w0"},
		{"addr", "add", lan.String() + "/24", "dev", "w0"},
		{"addr", "add", metadata.String() + "/16", "dev", "w0"},
		{"link", "set", "w0", "up"},
		{"addr", "add", onLinkNet.String() + "/24", "dev", "w0"},
		{"-6", "addr", "add", worldLink6.String() + "/64", "dev", "w0", "nodad"},
		{"-6", "addr", "add", internet6.String() + "/64", "dev", "w0", "nodad"},
		{"-6", "addr", "add", lan6.String() + "/64", "dev", "w0", "nodad"},
		{"-6", "addr", "add", metadata6.String() + "/128", "dev", "w0", "nodad"},
		// What a NAT64 of the network's own prefix (2001:db8:64::/96,
		// ipv4only.arpa's AAAA below) would reach: the LAN's 192.168.77.1
		// and the internet's 203.0.113.1.
		{"-6", "addr", "add", "2001:db8:64::c0a8:4d01/128", "dev", "w0", "nodad"},
		{"-6", "addr", "add", "2001:db8:64::cb00:7101/128", "dev", "w0", "nodad"},
	} {
		run(t, "nsenter", append([]string{"-t", p, "-n", "ip"}, args...)...)
	}
	// A network the host reaches on its link by a route of its own, as
	// a VPN's (no address of the host's is in it).
	run(t, "ip", "route", "add", "192.0.2.0/24", "dev", "h0")
	run(t, "ip", "-6", "addr", "add", hostAddr6.String()+"/64", "dev", "h0", "nodad")
	run(t, "ip", "-6", "route", "add", "default", "via", worldLink6.String())
	// The world's services.
	inNS(t, w.pid, func() error {
		l, err := net.Listen("tcp4", ":80")
		if err != nil {
			t.Fatal(err)
		}
		world := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(rw, "world %s host %s\n", r.Context().Value(http.LocalAddrContextKey), r.Host)
		})
		go http.Serve(l, world)
		l6, err := net.Listen("tcp6", "[::]:80")
		if err != nil {
			t.Fatal(err)
		}
		go http.Serve(l6, world)
		lt, err := net.Listen("tcp4", ":443")
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(rw, "tls world sni %s\n", r.TLS.ServerName)
		}))
		ts.Listener.Close()
		ts.Listener = lt
		ts.StartTLS()
		u, err := net.ListenPacket("udp4", internet.String()+":4433")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			b := make([]byte, 2048)
			for {
				n, from, err := u.ReadFrom(b)
				if err != nil {
					return
				}
				u.WriteTo(append([]byte("echo "), b[:n]...), from)
			}
		}()
		d, err := net.ListenPacket("udp4", dnsAddr.String()+":53")
		if err != nil {
			t.Fatal(err)
		}
		go dns.ActivateAndServe(nil, d, dns.HandlerFunc(zone))
		dt, err := net.Listen("tcp4", dnsAddr.String()+":53")
		if err != nil {
			t.Fatal(err)
		}
		go dns.ActivateAndServe(dt, nil, dns.HandlerFunc(zone))
		return nil
	})
	// The host's own: a loopback "database" and a service on every address.
	for _, a := range []string{"127.0.0.1:5432", ":8080", "[::1]:5432", "[::]:8080"} {
		network := "tcp4"
		if strings.HasPrefix(a, "[") {
			network = "tcp6"
		}
		l, err := net.Listen(network, a)
		if err != nil {
			t.Fatal(err)
		}
		go serveLine(l, "host "+a)
	}
	theWorld = w
	return w
}

// anchorForever is anchor without cleanup: the world lives as long as
// the test process (its death signal ends it).
func anchorForever(t testing.TB) int {
	cmd, err := startAnchor()
	if err != nil {
		t.Fatalf("network namespace: %v", err)
	}
	return cmd.Process.Pid
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// serveEach serves each connection l accepts with handle, in a goroutine
// of its own, until l is closed.
func serveEach(l net.Listener, handle func(net.Conn)) {
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
}

// writeForever writes to c until that fails, then closes it: a source
// of bytes. The connections share one buffer, which writes only read, so
// that the heap the benchmarks measure is the engine's.
func writeForever(c net.Conn) {
	defer c.Close()
	for {
		if _, err := c.Write(zeros[:]); err != nil {
			return
		}
	}
}

var zeros [256 << 10]byte

func serveLine(l net.Listener, line string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			fmt.Fprintln(c, line)
			c.Close()
		}()
	}
}

var records = map[string][]string{
	"www.internet.test.":   {"203.0.113.1"},
	"other.internet.test.": {"203.0.113.1"},
	"db.lan.test.":         {"192.168.77.1"},
	"rebind-lo.test.":      {"127.0.0.1"},
	"rebind-meta.test.":    {"169.254.169.254"},
	"mixed.test.":          {"192.168.77.1", "203.0.113.1"},
}

// records6 are the test zone's AAAA records.
var records6 = map[string][]string{
	"www.internet.test.":    {"2001:db8:113::1"},
	"v6only.internet.test.": {"2001:db8:113::1"},
	"lan6.test.":            {"fd12:3456:789a::1"},
	"rebind6-lo.test.":      {"::1"},
	"rebind6-meta.test.":    {"fd00:ec2::254"},
	"rebind6-mapped.test.":  {"::ffff:127.0.0.1"},
	"rebind6-nat64.test.":   {"64:ff9b::a9fe:a9fe"},
	"rebind6-nsp.test.":     {"2001:db8:64::c0a8:4d01"},
	// A DNS64 with a NAT64 of the network's own prefix (RFC 7050).
	"ipv4only.arpa.": {"2001:db8:64::c000:aa", "2001:db8:64::c000:ab"},
	"mixed6.test.":   {"fd12:3456:789a::1", "2001:db8:113::1"},
}

// httpsRecords are the test zone's HTTPS records (service bindings),
// with hints; extra.test's A answer carries an additional record.
var httpsRecords = map[string]string{
	"www.internet.test.":      `www.internet.test. 60 IN HTTPS 1 . alpn="h2" ipv4hint="203.0.113.1,127.0.0.1,169.254.169.254" ipv6hint="2001:db8:113::1,::1,fd00:ec2::254"`,
	"hintonly.internet.test.": `hintonly.internet.test. 60 IN HTTPS 1 . ipv4hint="203.0.113.1"`,
	"rebind-hint.test.":       `rebind-hint.test. 60 IN HTTPS 1 . ipv4hint="127.0.0.1"`,
}

func init() {
	records["extra.test."] = []string{"203.0.113.1"}
	for i := range 60 { // an answer larger than 512 bytes
		records["big.test."] = append(records["big.test."], fmt.Sprintf("203.0.113.%d", 100+i))
	}
}

func zone(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	if o := r.IsEdns0(); o != nil {
		m.SetEdns0(4096, false) // as a server with EDNS0 answers it
	}
	defer func() {
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			size := dns.MinMsgSize
			if o := r.IsEdns0(); o != nil {
				size = int(o.UDPSize())
			}
			m.Truncate(size) // as a real server does
		}
		w.WriteMsg(m)
	}()
	q := r.Question[0]
	addrs, ok := records[strings.ToLower(q.Name)]
	addrs6, ok6 := records6[strings.ToLower(q.Name)]
	https, okH := httpsRecords[strings.ToLower(q.Name)]
	if !ok && !ok6 && !okH {
		m.Rcode = dns.RcodeNameError
	}
	hdr := func(name string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 60}
	}
	switch {
	case strings.EqualFold(q.Name, "alias.test.") && q.Qtype == dns.TypeA:
		// A chain, as a recursive resolver answers it.
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: hdr(q.Name, dns.TypeCNAME), Target: "www.internet.test."},
			&dns.A{Hdr: hdr("www.internet.test.", dns.TypeA), A: net.ParseIP("203.0.113.1")})
		m.Rcode = dns.RcodeSuccess
		return
	case strings.EqualFold(q.Name, "stray.test.") && q.Qtype == dns.TypeA:
		// Records that belong to no chain from the question: an address
		// of another owner, and a CNAME from another name.
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr(q.Name, dns.TypeA), A: net.ParseIP("203.0.113.1")},
			&dns.A{Hdr: hdr("injected.test.", dns.TypeA), A: net.ParseIP(dnsAddr.String())},
			&dns.CNAME{Hdr: hdr("elsewhere.test.", dns.TypeCNAME), Target: q.Name})
		m.Rcode = dns.RcodeSuccess
		return
	case strings.EqualFold(q.Name, "stray.test.") && q.Qtype == dns.TypeHTTPS:
		// A service binding of another owner, hinting at an address.
		m.Answer = append(m.Answer, must(dns.NewRR("injected.test. 60 IN HTTPS 1 . ipv4hint="+dnsAddr.String())))
		m.Rcode = dns.RcodeSuccess
		return
	}
	if strings.EqualFold(q.Name, "extra.test.") {
		m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: "db.extra.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP("127.0.0.1")})
	}
	switch q.Qtype {
	case dns.TypeHTTPS:
		if okH {
			m.Answer = append(m.Answer, must(dns.NewRR(https)))
		}
	case dns.TypeA:
		for _, a := range addrs {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(a)})
		}
	case dns.TypeAAAA:
		for _, a := range addrs6 {
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 60}, AAAA: net.ParseIP(a)})
		}
	}
}

// sandbox is one sandbox network namespace with its engine.
type sandbox struct {
	pid int
	eng *Engine
	// mode is how the sandbox's client connects: through the stack (as
	// without the fast path), or offering each connect to the fast path
	// first as rootfs's seccomp listener does, on a blocking or a
	// non-blocking socket.
	mode dialMode
	// noBusy: runClient's listener lets the connects past its room run
	// (as before Engine.SeccompBusy).
	noBusy bool
}

// busy is the listener's answer to the connects past its room.
func (sb *sandbox) busy() func(*seccomp.Call) seccomp.Answer {
	if sb.noBusy {
		return nil
	}
	return sb.eng.SeccompBusy
}

type dialMode int

const (
	viaStack dialMode = iota
	viaFast
	viaFastNonblocking
	// viaFastDualStack connects from IPv6 sockets, to IPv4 addresses in
	// their v4-mapped form, as Java and other dual-stack clients do.
	viaFastDualStack
	// viaNoTUN is viaFast in a sandbox without a TUN device, as where
	// /dev/net/tun cannot be opened: only lo, with the gateway's address
	// for the resolver (Engine.ServeDNS) and the sandbox's IPv6 address,
	// and an engine with no stack.
	viaNoTUN
)

func (m dialMode) String() string {
	return [...]string{"stack", "fast", "fast-nonblocking", "fast-dualstack", "no-tun"}[m]
}

var dialModes = []dialMode{viaStack, viaFast, viaFastNonblocking, viaFastDualStack, viaNoTUN}

func newSandbox(t testing.TB, o netpolicy.Options) *sandbox { return newSandboxMode(t, o, viaStack) }

// newSandboxMode is newSandbox whose client connects as mode says; the
// engine serves the fast path's relay listener in every mode.
func newSandboxMode(t testing.TB, o netpolicy.Options, mode dialMode) *sandbox {
	t.Helper()
	return newSandboxFamilies(t, o, mode, true)
}

// newSandboxFamilies is newSandboxMode with the engine's IPv6 as ipv6
// says (the sandbox has its IPv6 address either way).
func newSandboxFamilies(t testing.TB, o netpolicy.Options, mode dialMode, ipv6 bool) *sandbox {
	t.Helper()
	return newSandboxEngine(t, o, mode, Options{IPv6: ipv6})
}

// newSandboxEngine is newSandboxMode with the engine's options eo (its
// policy, logger and upstream are the harness's).
func newSandboxEngine(t testing.TB, o netpolicy.Options, mode dialMode, eo Options) *sandbox {
	t.Helper()
	setupWorld(t)
	pol, err := netpolicy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	// The host's addresses and networks as rootfs run follows them (this
	// goroutine's thread is in the host's namespace).
	stop, err := netpolicy.WatchHost(pol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	sb := &sandbox{pid: anchor(t), mode: mode}
	type made struct {
		tun    *os.File
		relay  *net.TCPListener
		local  []net.Listener
		dns    *net.UDPConn // without TUN
		dnsTCP *net.TCPListener
		err    error
	}
	m := inNS(t, sb.pid, func() made {
		if err := linux.LoopbackUp(); err != nil {
			return made{err: err}
		}
		if mode == viaNoTUN {
			// As P2 makes it where /dev/net/tun cannot be opened
			// (mountmgr's setupLoopbackNet).
			for _, a := range []netip.Addr{Gateway, SandboxAddr.Addr()} {
				if err := linux.AddLoopbackAddr(a); err != nil {
					return made{err: err}
				}
			}
			if eo.IPv6 {
				if err := linux.AddLoopbackAddr(SandboxAddr6.Addr()); err != nil {
					return made{err: err}
				}
			}
			gw := &net.UDPAddr{IP: Gateway.AsSlice(), Port: 53}
			u, err := net.ListenUDP("udp4", gw)
			if err != nil {
				return made{err: err}
			}
			l, err := listenPlainTCP((*net.TCPAddr)(gw))
			if err != nil {
				return made{err: err}
			}
			relay, err := listenPlainTCP(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				return made{err: err}
			}
			ls, err := listenLocal(pol)
			return made{relay: relay, local: ls, dns: u, dnsTCP: l, err: err}
		}
		tun, err := linux.CreateTUNVnet(DeviceName, os.Getenv(envNoVnet) == "")
		if err != nil {
			return made{err: err}
		}
		if err := linux.ConfigureLink(DeviceName, SandboxAddr, Gateway, MTU); err != nil {
			return made{err: err}
		}
		if err := linux.ConfigureLink6(DeviceName, SandboxAddr6); err != nil {
			return made{err: err}
		}
		relay, err := listenPlainTCP(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return made{err: err}
		}
		ls, err := listenLocal(pol)
		return made{tun: tun, relay: relay, local: ls, err: err}
	})
	if m.err != nil {
		t.Fatal(m.err)
	}
	eo.Policy, eo.Logger, eo.Upstream = pol, testLogger(t), dnsAddr.String()+":53"
	if eo.Dial == nil {
		eo.Dial = hostNSDial
	}
	eng, err := New(m.tun, eo)
	if err != nil {
		t.Fatal(err)
	}
	if m.dns != nil {
		eng.ServeDNS(m.dns, m.dnsTCP)
	}
	for i, p := range pol.LocalPorts() {
		eng.ServeLocal(m.local[i], p)
	}
	if err := eng.ServeRelay(m.relay); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	sb.eng = eng
	return sb
}

// listenPlainTCP listens for TCP at a, as P2's listenAt does: a plain
// TCP socket. net.ListenTCP has listened with MPTCP since Go 1.24, and an
// MPTCP client of such a relay stays MPTCP, where against rootfs's it
// falls back to TCP.
func listenPlainTCP(a *net.TCPAddr) (*net.TCPListener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	l, err := lc.Listen(context.Background(), "tcp4", a.String())
	if err != nil {
		return nil, err
	}
	return l.(*net.TCPListener), nil
}

// hostNSDial is the engine's dial, from the host's namespace as in P1,
// whatever thread calls it: sb.dial calls Engine.Connect from a thread in
// the sandbox's namespace, where a blocking connect's dial would
// otherwise be made (and, with the TUN, carried by the stack).
func hostNSDial(ctx context.Context, network, addr string) (net.Conn, error) {
	type dialled struct {
		c   net.Conn
		err error
	}
	ch := make(chan dialled, 1)
	go func() { // a thread of the host's namespace: inNS's threads end with their goroutine
		d := &net.Dialer{Timeout: 10 * time.Second}
		c, err := d.DialContext(ctx, network, addr)
		ch <- dialled{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// listenLocal listens in the calling thread's namespace on 127.0.0.1 at
// each of pol's localhost ports, as P2 does.
func listenLocal(pol *netpolicy.Policy) ([]net.Listener, error) {
	var ls []net.Listener
	for _, p := range pol.LocalPorts() {
		l, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return ls, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// result of one attempt: the first line the service sent, or the error.
type result struct {
	line string
	err  error
}

func (r result) reached() bool { return r.err == nil && r.line != "" }

func (r result) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	return "reached: " + r.line
}

// resolve asks the sandbox's resolver (the gateway) for name's A records,
// from inside the sandbox. The error is the rcode for a refusal.
func resolve(name string) ([]string, error) { return resolveType(name, dns.TypeA) }

// resolveType is resolve for qtype's records (A or AAAA).
func resolveType(name string, qtype uint16) ([]string, error) {
	c := &dns.Client{Timeout: 3 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := c.Exchange(m, Gateway.String()+":53")
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("dns %s", dns.RcodeToString[r.Rcode])
	}
	var out []string
	for _, rr := range r.Answer {
		switch a := rr.(type) {
		case *dns.A:
			out = append(out, a.A.String())
		case *dns.AAAA:
			out = append(out, a.AAAA.String())
		}
	}
	return out, nil
}

// attempt connects to dst (NAME:PORT, resolved through the sandbox's DNS
// from sb, through the test zone directly from the host's namespace when
// sb is nil; or ADDR:PORT), speaks HTTP (or TLS with SNI sni when tlsName
// is set) and returns the first line.
func attempt(t *testing.T, sb *sandbox, dst string, sni string) result {
	return attemptFamily(t, sb, dst, sni, false)
}

// attemptFamily is attempt, by a name's AAAA records when six is set.
func attemptFamily(t *testing.T, sb *sandbox, dst string, sni string, six bool) result {
	pid, sandboxed, dial := hostPID, false, hostDial
	if sb != nil {
		pid, sandboxed, dial = sb.pid, true, sb.dial
	}
	return inNS(t, pid, func() result {
		host, port, _ := net.SplitHostPort(dst)
		if _, err := netip.ParseAddr(host); err != nil {
			var addrs []string
			switch {
			case sandboxed && six:
				addrs, err = resolveType(host, dns.TypeAAAA)
			case sandboxed:
				addrs, err = resolve(host)
			case six:
				addrs, err = records6[dns.Fqdn(host)], nil
			default:
				addrs, err = records[dns.Fqdn(host)], nil
			}
			if err != nil {
				return result{err: err}
			}
			if len(addrs) == 0 {
				return result{err: fmt.Errorf("no address")}
			}
			// As clients do: the first address that answers.
			var last result
			for _, a := range addrs {
				last = connect(dial, net.JoinHostPort(a, port), host, sni)
				if last.reached() {
					break
				}
			}
			return last
		}
		return connect(dial, dst, host, sni)
	})
}

func hostDial(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 3*time.Second) }

// dial connects to addr (ADDR:PORT) from the calling thread, which is in
// the sandbox's namespace, as sb.mode says. The fast path is offered the
// call as rootfs's seccomp listener offers it (Engine.SeccompConnect): a
// copy of the socket, and the connect runs as made when it declines.
func (sb *sandbox) dial(addr string) (net.Conn, error) {
	if sb.mode == viaStack {
		return hostDial(addr)
	}
	// viaNoTUN dials as viaFast does.
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	if sb.mode == viaFastDualStack && ap.Addr().Is4() {
		ap = netip.AddrPortFrom(netip.AddrFrom16(ap.Addr().As16()), ap.Port())
	}
	family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()})
	if ap.Addr().Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if sb.mode == viaFastNonblocking {
		unix.SetNonblock(fd, true)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	errno, ok := sb.eng.Connect(dup, ap)
	unix.Close(dup)
	if !ok {
		err = unix.Connect(fd, sa)
	} else if errno != 0 {
		err = errno
	}
	if errors.Is(err, unix.EINPROGRESS) {
		err = waitConnected(fd)
	}
	if err != nil {
		unix.Close(fd)
		return nil, &net.OpError{Op: "dial", Net: "tcp4", Err: os.NewSyscallError("connect", err)}
	}
	f := os.NewFile(uintptr(fd), "sandbox-socket")
	defer f.Close()
	return net.FileConn(f)
}

// waitConnected waits for a non-blocking connect to end, as a client's
// event loop does, and returns its error.
func waitConnected(fd int) error {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	if n, err := unix.Poll(p, 3000); err != nil || n == 0 {
		return errors.Join(err, os.ErrDeadlineExceeded)
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || v != 0 {
		return errors.Join(err, syscall.Errno(v))
	}
	return nil
}

func connect(dial func(string) (net.Conn, error), addr, host, sni string) result {
	c, err := dial(addr)
	if err != nil {
		return result{err: err}
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if sni != "" {
		tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		fmt.Fprintf(tc, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", sni)
		return readResult(tc)
	}
	_, port, _ := net.SplitHostPort(addr)
	if port == "80" {
		if strings.Contains(host, ":") {
			host = "[" + host + "]" // as clients send an IPv6 address
		}
		fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", host)
	}
	return readResult(c)
}

func readResult(c net.Conn) result {
	br := bufio.NewReader(c)
	var last string
	for {
		l, err := br.ReadString('\n')
		if strings.TrimSpace(l) != "" {
			last = strings.TrimSpace(l)
		}
		if err != nil {
			if last != "" {
				return result{line: last}
			}
			return result{err: err}
		}
	}
}

// testLogger is the engine's: its warnings in the test's log, or, with
// ROOTFS_NETTEST_DEBUG=1, everything on stderr as it happens (a test's
// log is lost when a benchmark hangs or is killed).
func testLogger(t testing.TB) *zap.Logger {
	if os.Getenv("ROOTFS_NETTEST_DEBUG") != "" {
		return zap.Must(zap.NewDevelopment())
	}
	return zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel))
}
