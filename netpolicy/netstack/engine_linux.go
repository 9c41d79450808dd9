package netstack

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// Bounds on what the sandbox can make the engine hold.
const (
	// DefaultMaxFlows bounds the TCP connections and UDP flows relayed at
	// once (each holds two sockets and two goroutines).
	DefaultMaxFlows = 1024
	// maxInFlight bounds handshakes the TCP forwarder holds (SYN flood).
	maxInFlight = 512
	// maxDNS bounds DNS questions being answered at once.
	maxDNS = 64
	// maxDNSTCP bounds the DNS connections open at once, each one
	// question of maxDNS's while it is answered: connections that send
	// nothing, or never read their answers, hold no more, and leave the
	// questions over UDP their room.
	maxDNSTCP = 16
	// maxDNSFlows bounds the stack's DNS endpoints over UDP (one per
	// client socket: glibc and Go open one per lookup), each one question
	// of maxDNS's while it is answered, and ended dnsFlowIdle after its
	// last question: a client asks again on the same socket within that
	// (A and AAAA at once), or after its timeout (5 s), which a new
	// endpoint takes.
	maxDNSFlows = 256
	dnsFlowIdle = 2 * time.Second
	// peekMax and peekWait bound the look at a connection's first bytes,
	// from the first (see peek).
	peekMax  = 16 << 10
	peekWait = 2 * time.Second
	// udpIdle ends a relayed UDP flow, dnsIdle a DNS client's endpoint.
	udpIdle = 60 * time.Second
	dnsIdle = 10 * time.Second
)

// tooMany is the refusal of a connection when the flows (MaxFlows), or
// the places of connects being answered, are all taken.
var tooMany = netpolicy.Decision{Reason: "too many connections at once"}

// Options configure an Engine. Zero values mean the defaults documented.
type Options struct {
	// Policy decides; nil is the default policy.
	Policy *netpolicy.Policy
	// Table records the names the sandbox resolves; nil: a new one of
	// netpolicy.DefaultTableSize.
	Table *netpolicy.Table
	// Logger gets one warning per refusal (rate limited) and debug lines;
	// nil prints nothing.
	Logger *zap.Logger
	// Upstream is the DNS server ("host:port") asked for the sandbox's
	// names; "" is the first nameserver of the host's /etc/resolv.conf.
	Upstream string
	// Dial makes the engine's outgoing connections; nil is a net.Dialer
	// with a 10s timeout. Tests point it elsewhere.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxFlows: DefaultMaxFlows when 0.
	MaxFlows int
	// MaxBuffers bounds the bytes the stack's TCP buffers may hold for
	// all the sandbox's connections together, both ways:
	// DefaultMaxBuffers when 0.
	MaxBuffers int64
	// IPv6 says the sandbox has SandboxAddr6 and P1 can reach IPv6:
	// AAAA questions are then asked upstream and their answers judged
	// and recorded; without it they get no address.
	IPv6 bool
	// Refused, when not nil, is given every refusal (the session's audit
	// stream), without the rate limit of the log lines. It must not block.
	Refused func(Refusal)
}

// Stats count what the engine did.
type Stats struct {
	TCPAllowed, UDPAllowed, DNSAnswered, Refused, Local int64
	// TCPFast are the TCPAllowed connections that took the fast path
	// (Connect).
	TCPFast int64
}

// Engine is the userspace network of one sandbox. Close stops it; it may
// be called more than once.
type Engine struct {
	pol      *netpolicy.Policy
	table    *netpolicy.Table
	log      *zap.Logger
	ref      *refusals
	upstream string
	ipv6     bool
	// nat64Done is closed once the network's NAT64 prefixes are known
	// (discoverNAT64): an IPv6 destination waits for it to be judged.
	nat64Done chan struct{}
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	flows     chan struct{} // semaphore of MaxFlows
	dnsSem    chan struct{}
	dnsTCP    chan struct{} // semaphore of maxDNSTCP
	dnsUDP    chan struct{} // semaphore of maxDNSFlows
	nic       nic

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	// mu guards closers and relays.
	mu sync.Mutex
	// closers are the listeners and sockets the engine serves, which
	// Close closes first.
	closers []io.Closer
	fast    atomic.Pointer[fastPath] // ServeRelay's
	// relays are the connections being relayed, by their sandbox side,
	// for Close to end; nil once closed.
	relays map[net.Conn]net.Conn
	bufs   *buffers
	// orphanWait is the package's when the engine started.
	orphanWait time.Duration
	blind      sync.Once // cannotRead's

	n counters
}

// nic is the engine's side of the sandbox's link: the stack, its endpoint
// on the TUN queue, and the queue.
type nic struct {
	stack *stack.Stack
	ep    stack.LinkEndpoint
	tun   *os.File
}

// counters are what Stats reports.
type counters struct {
	tcpAllowed, udpAllowed, dnsAnswered, local, tcpFast atomic.Int64
}

const nicID = 1

// New starts an engine on tun (a TUN queue, IFF_NO_PI, with or without
// IFF_VNET_HDR; the engine owns it from here, and closes it in Close).
// With tun nil the engine has no stack: the sandbox has only lo, and
// reaches out only through the fast path (ServeRelay, with the server's
// connect(2) calls given to SeccompConnect) and asks the resolver that
// ServeDNS serves; the fast path then refuses what the stack would have.
func New(tun *os.File, o Options) (*Engine, error) {
	if o.Policy == nil {
		p, err := netpolicy.New(netpolicy.Options{})
		if err != nil {
			return nil, err
		}
		o.Policy = p
	}
	if o.Table == nil {
		o.Table = netpolicy.NewTable(0)
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		o.Dial = d.DialContext
	}
	if o.MaxFlows <= 0 {
		o.MaxFlows = DefaultMaxFlows
	}
	if o.MaxBuffers <= 0 {
		o.MaxBuffers = DefaultMaxBuffers
	}
	if o.Upstream == "" {
		cfg, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil || len(cfg.Servers) == 0 {
			return nil, fmt.Errorf("no DNS server for the sandbox: /etc/resolv.conf: %v", err)
		}
		o.Upstream = net.JoinHostPort(cfg.Servers[0], cfg.Port)
	}
	e := &Engine{pol: o.Policy, table: o.Table, log: o.Logger, ref: newRefusals(o.Logger, o.Refused), upstream: o.Upstream,
		ipv6: o.IPv6, dial: o.Dial, flows: make(chan struct{}, o.MaxFlows), dnsSem: make(chan struct{}, maxDNS), dnsTCP: make(chan struct{}, maxDNSTCP), dnsUDP: make(chan struct{}, maxDNSFlows), nic: nic{tun: tun},
		relays: make(map[net.Conn]net.Conn), orphanWait: orphanWait}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.nat64Done = make(chan struct{})
	if e.ipv6 {
		go e.discoverNAT64()
	} else {
		close(e.nat64Done)
	}
	if tun == nil {
		e.log.Debug("network: engine started without a device: the fast path and the resolver on lo", zap.String("gateway", Gateway.String()), zap.String("dns_upstream", e.upstream))
		return e, nil
	}

	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	var err error
	sack := tcpip.TCPSACKEnabled(true)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	// Small buffers to start with, grown by the stack for a busy
	// connection (receive moderation, send buffer auto-tuning): 200 idle
	// connections hold little, one bulk transfer still gets a large
	// window, and all of them together stay within MaxBuffers.
	e.bufs = newBuffers(s, o.MaxBuffers, o.MaxFlows)
	moderate := tcpip.TCPModerateReceiveBufferOption(true)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &moderate)
	var ep stack.LinkEndpoint
	if fd := int(tun.Fd()); hasVnetHdr(fd) {
		ep, err = newTUNLink(fd, MTU)
	} else {
		// A queue without virtio_net_hdr: gVisor's endpoint, checksums
		// in full both ways.
		ep, err = fdbased.New(&fdbased.Options{FDs: []int{fd}, MTU: MTU, RXChecksumOffload: true})
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("netstack link: %v", err)
	}
	// The handlers before the NIC: CreateNIC starts the link's reader,
	// which delivers packets to them at once.
	fwd := tcp.NewForwarder(s, 0, maxInFlight, e.handleTCP)
	s.SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
	// UDP's as gVisor's forwarder hands it over (a request on a copy of
	// the datagram), with a look at the datagram first.
	s.SetTransportProtocolHandler(udp.ProtocolNumber, func(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
		head, _ := pkt.Data().PullUp(min(pkt.Data().Size(), quicHead))
		return e.handleUDP(udp.NewForwarderRequest(s, id, pkt.Clone()), quicInitial(head, pkt.Data().Size()))
	})
	e.nic.stack, e.nic.ep = s, ep
	if terr := s.CreateNIC(nicID, ep); terr != nil {
		s.Close()
		return nil, fmt.Errorf("netstack nic: %v", terr)
	}
	// Every destination is ours: the sandbox has no other way out.
	s.SetPromiscuousMode(nicID, true)
	s.SetSpoofing(nicID, true)
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: nicID}, {Destination: header.IPv6EmptySubnet, NIC: nicID}})
	e.log.Debug("network: engine started", zap.String("gateway", Gateway.String()), zap.String("dns_upstream", e.upstream), zap.Bool("ipv6", e.ipv6))
	return e, nil
}

// Close stops the engine: the stack, its relays, the local listeners and
// the TUN queue.
func (e *Engine) Close() error {
	e.once.Do(func() {
		e.cancel()
		e.mu.Lock()
		for _, c := range e.closers {
			c.Close()
		}
		// A relay blocked on a peer that stopped reading, or a flow the
		// fast path dialled for and the relay has not accepted, would
		// outlive the engine, with what it holds.
		if fp := e.fast.Load(); fp != nil {
			fp.dropAll(e)
		}
		for c, up := range e.relays {
			c.Close()
			up.Close()
		}
		e.relays = nil
		e.mu.Unlock()
		// Destroy, not Close: Close leaves the NIC, and its link's reader
		// goes on reading the TUN's descriptor number after the TUN is
		// closed, so a file opened next with that number (another
		// engine's TUN, in the tests) had its packets read and answered
		// by this stack. Destroy removes the NIC, which stops the reader
		// and waits for it. Bounded: a session's end must not hang on it.
		if e.nic.stack == nil {
			return // no device
		}
		destroyed := make(chan struct{})
		go func() {
			e.nic.stack.Destroy()
			close(destroyed)
		}()
		select {
		case <-destroyed:
		case <-time.After(closeWait):
			e.log.Warn("network: the stack did not stop in time; its TUN is closed anyway")
		}
		e.nic.tun.Close()
	})
	return nil
}

// closeWait bounds how long Close waits for the stack to stop.
const closeWait = 2 * time.Second

// Stats returns the counters so far.
func (e *Engine) Stats() Stats {
	return Stats{TCPAllowed: e.n.tcpAllowed.Load(), UDPAllowed: e.n.udpAllowed.Load(), DNSAnswered: e.n.dnsAnswered.Load(),
		Refused: e.ref.total.Load(), Local: e.n.local.Load(), TCPFast: e.n.tcpFast.Load()}
}

func (e *Engine) acquire() bool {
	select {
	case e.flows <- struct{}{}:
		return true
	default:
		return false
	}
}

func (e *Engine) release() { <-e.flows }

func addrOf(a tcpip.Address) netip.Addr {
	ip, _ := netip.AddrFromSlice(a.AsSlice())
	return ip.Unmap()
}

func dstString(a netip.Addr, port uint16, names []string) string {
	s := netip.AddrPortFrom(a, port).String()
	if len(names) > 0 {
		s += " (" + names[0] + ")"
	}
	return s
}

// accept completes the sandbox's handshake of r and returns its side of
// the connection, its buffers counted in the engine's budget until its
// endpoint is done, when done is called too; nil (and a reset) when the
// stack cannot, and then done is not called.
func (e *Engine) accept(r *tcp.ForwarderRequest, done func()) net.Conn {
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		r.Complete(true)
		return nil
	}
	r.Complete(false)
	e.bufs.add(ep)
	return &stackConn{TCPConn: gonet.NewTCPConn(&wq, ep), ep: ep, ctx: e.ctx, wait: e.orphanWait, done: func() {
		e.bufs.remove(ep)
		done()
	}}
}

// stackConn is a connection of the stack's, counted in the buffer budget
// (and, by whoever accepted it, in a slot) until its endpoint is done.
type stackConn struct {
	*gonet.TCPConn
	ep   tcpip.Endpoint
	ctx  context.Context // the engine's
	wait time.Duration   // orphanWait when the engine started
	once sync.Once
	done func()
}

func (c *stackConn) Close() error {
	err := c.TCPConn.Close()
	c.once.Do(func() { go c.finish() })
	return err
}

// orphanWait bounds how long a closed endpoint may go on sending what
// it holds (the end of a response the sandbox reads slowly, or never:
// gVisor probes a zero window for as long as the probes are answered).
// Until then it keeps its slot and its share of the budget, so it
// counts as the connection it was; then it is reset. Linux gives an
// orphaned socket about as long (tcp_orphan_retries). A variable for the
// tests, read by New.
var orphanWait = 60 * time.Second

// finish waits for c's closed endpoint to be done: nothing left to send
// (its data and FIN acknowledged), or the connection gone; at most
// orphanWait, or until the engine closes, after which it is aborted.
// Then it calls c.done.
func (c *stackConn) finish() {
	defer c.done()
	wait := time.Millisecond
	for deadline := time.Now().Add(c.wait); time.Now().Before(deadline); wait = min(2*wait, 250*time.Millisecond) {
		switch tcp.EndpointState(c.ep.State()) {
		case tcp.StateClose, tcp.StateError, tcp.StateTimeWait, tcp.StateFinWait2:
			return
		}
		select {
		case <-c.ctx.Done():
			c.ep.Abort()
			return
		case <-time.After(wait):
		}
	}
	c.ep.Abort()
}

// handleTCP runs in a goroutine of its own for each SYN (the forwarder's).
func (e *Engine) handleTCP(r *tcp.ForwarderRequest) {
	id := r.ID()
	dst, port := addrOf(id.LocalAddress), id.LocalPort
	if dst == Gateway {
		if port != 53 {
			r.Complete(true) // nothing else listens here
			return
		}
		select {
		case e.dnsTCP <- struct{}{}:
		default:
			r.Complete(true)
			return
		}
		// The connection's slot is held until its endpoint is done, as a
		// flow's is below.
		if c := e.accept(r, func() { <-e.dnsTCP }); c != nil {
			e.serveDNSTCP(c)
		} else {
			<-e.dnsTCP
		}
		return
	}
	if !e.acquire() {
		r.Complete(true)
		e.ref.refuse("tcp", dstString(dst, port, nil), tooMany)
		return
	}
	e.nat64Wait(dst)
	names := e.table.Names(dst)
	q := netpolicy.Query{Addr: dst, Port: port, Names: names}
	if d := e.pol.Decide(q); !d.Allow {
		r.Complete(true)
		e.release()
		e.ref.refuse("tcp", dstString(dst, port, names), d)
		return
	}
	up, err := e.dialTCP(q)
	if err != nil {
		r.Complete(true)
		e.release()
		return
	}
	defer up.Close()
	// The flow's slot is the connection's from here: released when its
	// endpoint is done, which may be after the relay.
	c := e.accept(r, e.release)
	if c == nil {
		e.release()
		return
	}
	defer c.Close()
	e.relay(c, up, q, false)
}

// dialTCP connects to q's destination for the sandbox; a failure is
// logged (debug) and returned.
func (e *Engine) dialTCP(q netpolicy.Query) (net.Conn, error) {
	up, err := e.dial(e.ctx, "tcp", netip.AddrPortFrom(q.Addr, q.Port).String())
	if err != nil {
		e.log.Debug("network: dial failed", zap.String("dst", dstString(q.Addr, q.Port, q.Names)), zap.Error(err))
	}
	return up, err
}

// relay carries an allowed connection: c the sandbox's side, up the
// destination's, q what was decided on. Where names matter it first
// reads c's first bytes for the server name (TLS SNI, HTTP Host) and
// decides again with it; then it copies both ways until both are done.
// fast counts it as the fast path's.
func (e *Engine) relay(c, up net.Conn, q netpolicy.Query, fast bool) {
	e.mu.Lock()
	if e.relays == nil {
		e.mu.Unlock()
		return // closed
	}
	e.relays[c] = up
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if e.relays != nil {
			delete(e.relays, c)
		}
		e.mu.Unlock()
	}()
	dst, port, names := q.Addr, q.Port, q.Names
	upFirst := make(chan []byte, 1)
	var peekMu sync.Mutex // held to change peeking, spoke and c's read deadline
	peeking, spoke := true, false
	go func() {
		b := make([]byte, 32<<10)
		n, _ := up.Read(b)
		upFirst <- b[:n]
		peekMu.Lock()
		spoke = true
		if peeking {
			_ = c.SetReadDeadline(time.Now()) // a server that speaks first ends the peek
		}
		peekMu.Unlock()
	}()
	var head []byte
	if len(names) > 0 || e.pol.HasNameRules() {
		var sn string
		var unread bool
		head, sn, unread = peek(c, func(t time.Time) {
			peekMu.Lock()
			if !spoke {
				_ = c.SetReadDeadline(t)
			}
			peekMu.Unlock()
		})
		switch {
		case sn != "":
			q.ServerName = sn
			if d := e.pol.Decide(q); !d.Allow {
				e.ref.refuse("tcp", dstString(dst, port, []string{sn}), d)
				return
			}
		case unread:
			// A ClientHello or request head left unfinished: what it
			// would name is not known, and the server would take it.
			e.ref.refuse("tcp", dstString(dst, port, names), unreadName)
			return
		}
	}
	peekMu.Lock()
	peeking = false
	_ = c.SetReadDeadline(time.Time{})
	peekMu.Unlock()
	e.n.tcpAllowed.Add(1)
	if fast {
		e.n.tcpFast.Add(1)
	}
	if len(head) > 0 {
		if _, err := up.Write(head); err != nil {
			return
		}
	}
	splice(c, up, upFirst)
}

// unreadName refuses a connection whose TLS ClientHello or HTTP request
// head did not end within the peek's bounds.
var unreadName = netpolicy.Decision{Reason: fmt.Sprintf("its TLS ClientHello or HTTP request head did not end within %d KiB and %v of its first byte, so the server name it sends cannot be checked", peekMax>>10, peekWait)}

// peek reads the connection's first bytes until they name a server or
// cannot. It waits for the first byte as long as the connection lasts
// (or until setDeadline's deadline, which a server that speaks first
// moves to now): a client that waits before its ClientHello must not
// find it unread. From the first byte, the rest must come within
// peekWait and peekMax; unread says they looked like a ClientHello or a
// request head and had not ended then, so the name is not known.
// setDeadline sets c's read deadline, unless the server spoke first.
func peek(c net.Conn, setDeadline func(time.Time)) (head []byte, name string, unread bool) {
	buf := make([]byte, 0, 4096)
	for len(buf) < peekMax {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, cap(buf))...)[:len(buf)]
		}
		n, err := c.Read(buf[len(buf):min(cap(buf), peekMax)])
		if len(buf) == 0 && n > 0 {
			setDeadline(time.Now().Add(peekWait))
		}
		buf = buf[:len(buf)+n]
		name, more := serverName(buf)
		if name != "" || !more {
			return buf, name, false
		}
		if err != nil {
			return buf, "", len(buf) > 0
		}
	}
	return buf, "", true
}

type closeWriter interface{ CloseWrite() error }

// splice copies both ways until both are done; upFirst is what was read
// from up already (one read, possibly empty at its end).
func splice(c, up net.Conn, upFirst <-chan []byte) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := <-upFirst
		if len(first) > 0 {
			if _, err := c.Write(first); err != nil {
				return
			}
			_, _ = io.CopyBuffer(c, up, make([]byte, copyBuf))
		}
		if cw, ok := c.(closeWriter); ok {
			_ = cw.CloseWrite()
		}
	}()
	_, _ = io.CopyBuffer(up, c, make([]byte, copyBuf))
	if cw, ok := up.(closeWriter); ok {
		_ = cw.CloseWrite()
	}
	<-done
}

// copyBuf is the buffer of each direction of a relayed connection.
const copyBuf = 64 << 10

// handleUDP is given each datagram no flow's endpoint took, in the
// stack's goroutine: it must not block. It returns false for a datagram
// it refuses, which hands it back to the stack: with no endpoint for it,
// gVisor's UDP answers ICMP port unreachable (rate limited by the stack,
// 1000/s in bursts of 50). The sandbox's kernel makes that ECONNREFUSED on
// a connected socket's next recv or send, so a QUIC client falls back to
// TCP at once, as an RST makes a TCP client give up, instead of after its
// handshake timeout. Not "administratively prohibited" (code 13): Linux
// makes that EHOSTUNREACH, which clients take for a broken path rather
// than for "not here, use TCP". A refused flow gets no endpoint, so each
// of its datagrams comes here, and is recorded, once.
//
// quic says the datagram is a QUIC client's first (quicInitial). On a
// flow that only a name allows, such a datagram is refused, the first or
// a later one: its ClientHello is encrypted, so the server name that a
// TCP connection must show is never seen (at a CDN's address, HTTP/3
// would reach any site it serves), and an HTTP/3 client refused falls
// back to TCP, where it is checked.
func (e *Engine) handleUDP(r *udp.ForwarderRequest, quic bool) bool {
	id := r.ID()
	dst, port := addrOf(id.LocalAddress), id.LocalPort
	if dst == Gateway && port == 53 {
		select {
		case e.dnsUDP <- struct{}{}:
		default:
			return true // busy: the client asks again
		}
		var wq waiter.Queue
		ep, terr := r.CreateEndpoint(&wq)
		if terr != nil {
			<-e.dnsUDP
			return true
		}
		go func() {
			defer func() { <-e.dnsUDP }()
			e.serveDNS(gonet.NewUDPConn(&wq, ep))
		}()
		return true
	}
	if !e.nat64Ready(dst) {
		return true // dropped, not waited for (the stack's goroutine): the client sends again
	}
	names := e.table.Names(dst)
	if d := e.pol.Decide(netpolicy.Query{Addr: dst, Port: port, Names: names, UDP: true}); !d.Allow {
		e.ref.refuse("udp", dstString(dst, port, names), d)
		return false // ICMP port unreachable
	}
	byName := !e.pol.Decide(netpolicy.Query{Addr: dst, Port: port, UDP: true}).Allow
	if byName && quic {
		e.ref.refuse("udp", dstString(dst, port, names), quicByName(dst, port))
		return false
	}
	if !e.acquire() {
		// Refused as TCP is at this limit (an RST there): a datagram
		// dropped here would leave the client waiting, and the flows
		// that hold the slots end only after udpIdle.
		e.ref.refuse("udp", dstString(dst, port, names), netpolicy.Decision{Reason: "too many flows at once"})
		return false
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		e.release()
		return true
	}
	e.n.udpAllowed.Add(1)
	go func() {
		defer e.release()
		c := gonet.NewUDPConn(&wq, ep)
		defer c.Close()
		up, err := e.dial(e.ctx, "udp", netip.AddrPortFrom(dst, port).String())
		if err != nil {
			return
		}
		defer up.Close()
		relay := func(to, src net.Conn, check bool) {
			b := make([]byte, 64<<10)
			for {
				_ = src.SetReadDeadline(time.Now().Add(udpIdle))
				n, err := src.Read(b)
				if err == nil && check && quicInitial(b[:n], n) {
					e.ref.refuse("udp", dstString(dst, port, names), quicByName(dst, port))
					err = errQUICByName
				}
				if err != nil {
					to.Close()
					src.Close()
					return
				}
				_, _ = to.Write(b[:n])
			}
		}
		go relay(up, c, byName)
		relay(c, up, false)
	}()
	return true
}

// quicHead is how much of a datagram quicInitial reads.
const quicHead = 5

// quicInitial says whether a datagram of size bytes that starts with
// head is a QUIC client's first: a long header (RFC 8999: the form bit
// and, in every version so far, the fixed bit) of a version (0 is a
// server's version negotiation), in a datagram of at least 1200 bytes,
// which a server requires of a client's Initial (RFC 9000 14.1) and
// which NTP, DNS or RTP, whose first bytes can look alike, never are.
func quicInitial(head []byte, size int) bool {
	return size >= 1200 && len(head) >= quicHead && head[0]&0xc0 == 0xc0 && binary.BigEndian.Uint32(head[1:5]) != 0
}

// quicByName is the refusal of a QUIC client's datagram on a flow that
// only a name allows.
func quicByName(dst netip.Addr, port uint16) netpolicy.Decision {
	return netpolicy.Decision{
		Reason: "QUIC to an address allowed by name: the server name is encrypted in its first packet and cannot be checked (HTTP/3 clients fall back to TCP, where it is)",
		Hint:   "--allow-net " + netip.AddrPortFrom(dst, port).String(),
	}
}

var errQUICByName = errors.New("QUIC on a flow allowed by name")

// serveDNS answers the questions of one client endpoint until it idles.
func (e *Engine) serveDNS(c *gonet.UDPConn) {
	defer c.Close()
	b := make([]byte, 4096)
	for {
		_ = c.SetReadDeadline(time.Now().Add(dnsFlowIdle))
		n, err := c.Read(b)
		if err != nil {
			return
		}
		// Each question is one of maxDNS's while it is answered; beyond,
		// dropped (the client asks again).
		select {
		case e.dnsSem <- struct{}{}:
		default:
			continue
		}
		out := e.answer(b[:n], false)
		<-e.dnsSem
		if out != nil {
			_, _ = c.Write(out)
		}
	}
}

// serveDNSTCP answers length-prefixed questions on c (DNS over TCP, where
// a client retries an answer truncated over UDP) until it idles.
func (e *Engine) serveDNSTCP(c net.Conn) {
	defer c.Close()
	var hdr [2]byte
	b := make([]byte, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(dnsIdle))
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n := int(hdr[0])<<8 | int(hdr[1])
		if _, err := io.ReadFull(c, b[:n]); err != nil {
			return
		}
		// Each question is one of maxDNS's while it is answered.
		select {
		case e.dnsSem <- struct{}{}:
		case <-e.ctx.Done():
			return
		}
		out := e.answer(b[:n], true)
		<-e.dnsSem
		if out == nil {
			return
		}
		// A client that does not read its answers holds its connection
		// no longer than one that sends nothing.
		_ = c.SetWriteDeadline(time.Now().Add(dnsIdle))
		if _, err := c.Write(append([]byte{byte(len(out) >> 8), byte(len(out))}, out...)); err != nil {
			return
		}
	}
}

// ServeDNS answers the sandbox's DNS questions on u (a UDP socket) and l
// (a TCP listener), both at Gateway port 53 on the sandbox's lo, where
// it has no device for the stack to answer them on; Close stops them.
// Questions in flight are bounded as on the stack's path: beyond maxDNS,
// a datagram is dropped (the client asks again); beyond maxDNSTCP
// connections, a connection is closed.
func (e *Engine) ServeDNS(u *net.UDPConn, l *net.TCPListener) {
	e.mu.Lock()
	e.closers = append(e.closers, l, u)
	e.mu.Unlock()
	go e.acceptEach(l, "dns", func(c net.Conn) {
		select {
		case e.dnsTCP <- struct{}{}:
			go func() {
				defer func() { <-e.dnsTCP }()
				// Close ends it too, as the stack's Destroy does the
				// stack's.
				stop := context.AfterFunc(e.ctx, func() { c.Close() })
				defer stop()
				e.serveDNSTCP(c)
			}()
		default:
			c.Close()
		}
	})
	go func() {
		b := make([]byte, 4096)
		for {
			n, from, err := u.ReadFromUDPAddrPort(b)
			if err != nil {
				if errors.Is(err, net.ErrClosed) || e.ctx.Err() != nil {
					return
				}
				continue
			}
			select {
			case e.dnsSem <- struct{}{}:
				go func(q []byte) {
					defer func() { <-e.dnsSem }()
					if out := e.answer(q, false); out != nil {
						_, _ = u.WriteToUDPAddrPort(out, from)
					}
				}(b[:n])
				b = make([]byte, 4096) // that one is the question's now
			default: // busy: the client asks again
			}
		}
	}()
}

// acceptEach hands each connection l accepts to handle, in the accepting
// goroutine, until l is closed or the engine is; what names l in the
// debug line of an accept that failed otherwise (out of descriptors:
// after a pause, to let some close, it accepts again).
func (e *Engine) acceptEach(l net.Listener, what string, handle func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || e.ctx.Err() != nil {
				return
			}
			e.log.Debug("network: "+what+" accept", zap.Error(err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		handle(c)
	}
}

// nat64Ask bounds the question for the network's NAT64 prefixes.
const nat64Ask = 2 * time.Second

// discoverNAT64 asks the host's resolver for ipv4only.arpa's AAAA records
// (RFC 7050): where the network has a DNS64 and a NAT64 of its own
// prefix, the answers carry that prefix, and the policy then judges the
// IPv4 address an address in it carries (Policy.SetNAT64). It closes
// nat64Done when it knows, or has given up.
func (e *Engine) discoverNAT64() {
	defer close(e.nat64Done)
	ctx, cancel := context.WithTimeout(e.ctx, nat64Ask)
	defer cancel()
	m := new(dns.Msg)
	m.SetQuestion("ipv4only.arpa.", dns.TypeAAAA)
	cl := &dns.Client{Timeout: nat64Ask}
	resp, _, err := cl.ExchangeContext(ctx, m, e.upstream)
	if err != nil {
		e.log.Debug("network: NAT64 prefix: no answer", zap.Error(err))
		return
	}
	var addrs []netip.Addr
	for _, rr := range resp.Answer {
		if r, ok := rr.(*dns.AAAA); ok {
			if a, ok := netip.AddrFromSlice(r.AAAA); ok {
				addrs = append(addrs, a)
			}
		}
	}
	if ps := netpolicy.NAT64Prefixes(addrs); len(ps) > 0 {
		e.pol.SetNAT64(ps)
		e.log.Debug("network: the network's NAT64 prefixes: the IPv4 addresses they carry are judged as IPv4", zap.Stringers("prefixes", ps))
	}
}

// nat64Wait waits, for an IPv6 destination, until the network's NAT64
// prefixes are known (at most nat64Ask after the engine's start).
func (e *Engine) nat64Wait(dst netip.Addr) {
	if dst.Is6() && !dst.Is4In6() {
		e.nat64Known()
	}
}

// nat64Ready reports, without waiting, whether dst may be judged now:
// an IPv4 destination always, an IPv6 one once the network's NAT64
// prefixes are known (or the engine is closing).
func (e *Engine) nat64Ready(dst netip.Addr) bool {
	if !dst.Is6() || dst.Is4In6() {
		return true
	}
	select {
	case <-e.nat64Done:
		return true
	case <-e.ctx.Done():
		return true
	default:
		return false
	}
}

// carriesIPv6 says whether resp may carry IPv6 addresses: AAAA records,
// or service bindings with their hints.
func carriesIPv6(resp *dns.Msg) bool {
	for _, rr := range resp.Answer {
		switch rr.(type) {
		case *dns.AAAA, *dns.SVCB, *dns.HTTPS:
			return true
		}
	}
	return false
}

// nat64Known waits until the network's NAT64 prefixes are known.
func (e *Engine) nat64Known() {
	select {
	case <-e.nat64Done:
	case <-e.ctx.Done():
	}
}

// answer is the answer to one DNS query message, nil to drop it; over
// UDP it is truncated to what the client can take (512 bytes, or its
// EDNS0 size), so it asks again over TCP.
func (e *Engine) answer(query []byte, overTCP bool) []byte {
	var m dns.Msg
	if err := m.Unpack(query); err != nil || m.Response {
		return nil
	}
	reply := func(rcode int) []byte {
		r := new(dns.Msg)
		r.SetRcode(&m, rcode)
		b, _ := r.Pack()
		return b
	}
	if len(m.Question) != 1 || m.Opcode != dns.OpcodeQuery {
		return reply(dns.RcodeFormatError)
	}
	qn := m.Question[0]
	name := netpolicy.CanonName(qn.Name)
	if d := e.pol.MayResolve(name); !d.Allow {
		e.ref.refuse("dns", name, d)
		return reply(dns.RcodeNameError)
	}
	if qn.Qtype == dns.TypeAAAA && !e.ipv6 { // IPv4 only inside: no address, at once
		e.n.dnsAnswered.Add(1)
		return reply(dns.RcodeSuccess)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 4*time.Second)
	defer cancel()
	cl := &dns.Client{Timeout: 4 * time.Second, UDPSize: dns.DefaultMsgSize}
	up := m.Copy()
	up.RecursionDesired = true
	if up.IsEdns0() == nil {
		up.SetEdns0(1232, false) // DNS flag day 2020's size; TCP beyond it
	}
	resp, _, err := cl.ExchangeContext(ctx, up, e.upstream)
	if err == nil && resp.Truncated {
		cl.Net = "tcp"
		resp, _, err = cl.ExchangeContext(ctx, up, e.upstream)
	}
	if err != nil {
		e.log.Debug("network: dns upstream", zap.String("name", name), zap.Error(err))
		return reply(dns.RcodeServerFailure)
	}
	resp.Id = m.Id
	if carriesIPv6(resp) {
		e.nat64Known() // its IPv6 addresses are judged with the network's NAT64 prefixes
	}
	keep, chain, d := e.filterAnswer(name, m.IsEdns0() != nil, resp)
	if !d.Allow {
		// The name is there; none of its addresses is the sandbox's:
		// no address (NOERROR, empty) rather than NXDOMAIN, which a
		// resolver that asks A and AAAA at once (musl) takes on either
		// for the name's end, though the other family's may be allowed.
		e.ref.refuse("dns", name, d)
		return reply(dns.RcodeSuccess)
	}
	if len(keep) > 0 {
		for _, n := range chain {
			e.table.Add(n, keep)
		}
	}
	e.n.dnsAnswered.Add(1)
	if !overTCP {
		size := dns.MinMsgSize
		if o := m.IsEdns0(); o != nil {
			size = max(int(o.UDPSize()), dns.MinMsgSize)
		}
		resp.Truncate(size)
	}
	resp.Compress = true
	b, err := resp.Pack()
	if err == nil && len(b) > dns.MaxMsgSize {
		// Over TCP the length prefix holds 65535 bytes at most.
		resp.Truncate(dns.MaxMsgSize)
		b, err = resp.Pack()
	}
	if err != nil {
		return reply(dns.RcodeServerFailure)
	}
	return b
}

// filterAnswer makes resp, the upstream's answer to a question for name
// (canonical), what the sandbox may be told, and returns the addresses it
// keeps with the names that lead to them (the question's and the CNAME
// chain from it). d refuses the name when it had addresses and the policy
// allows none of them; resp is then not to be sent. clientEDNS says the
// sandbox's question had EDNS0.
func (e *Engine) filterAnswer(name string, clientEDNS bool, resp *dns.Msg) (keep []netip.Addr, chain []string, d netpolicy.Decision) {
	var addrs []netip.Addr
	// The names that lead to the answer's addresses: the question's and
	// the CNAME chain from it, as a stub resolver follows it. Records of
	// other owners (an upstream may add them) name nothing and go.
	chain = []string{name}
	for grew := true; grew && len(chain) <= len(resp.Answer); {
		grew = false
		for _, rr := range resp.Answer {
			c, ok := rr.(*dns.CNAME)
			if !ok || netpolicy.CanonName(c.Hdr.Name) != chain[len(chain)-1] {
				continue
			}
			if target := netpolicy.CanonName(c.Target); !slices.Contains(chain, target) {
				chain, grew = append(chain, target), true
			}
		}
	}
	resp.Answer = slices.DeleteFunc(resp.Answer, func(rr dns.RR) bool {
		return !slices.Contains(chain, netpolicy.CanonName(rr.Header().Name))
	})
	for _, rr := range resp.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			if a, ok := netip.AddrFromSlice(rr.A.To4()); ok {
				addrs = append(addrs, a)
			}
		case *dns.AAAA:
			if a, ok := netip.AddrFromSlice(rr.AAAA.To16()); ok && e.ipv6 {
				addrs = append(addrs, a.Unmap()) // as the sandbox's kernel connects to it
			}
		}
	}
	keep, d = e.pol.DecideName(name, addrs)
	if !d.Allow {
		return nil, chain, d
	}
	// Of the chain's records (the only ones left: other owners' name
	// nothing the question asked), only the addresses the policy kept
	// reach the sandbox: in A and AAAA records (whatever the question's
	// type) and in service bindings' hints; none from the additional
	// section, which a stub resolver may take.
	kept := resp.Answer[:0]
	var hinted []netip.Addr
	for _, rr := range resp.Answer {
		var ip netip.Addr
		switch rr := rr.(type) {
		case *dns.A:
			ip, _ = netip.AddrFromSlice(rr.A.To4())
		case *dns.AAAA:
			ip, _ = netip.AddrFromSlice(rr.AAAA.To16())
			ip = ip.Unmap()
		case *dns.SVCB:
			hinted = append(hinted, e.hints(name, &rr.Value)...)
			kept = append(kept, rr)
			continue
		case *dns.HTTPS:
			hinted = append(hinted, e.hints(name, &rr.Value)...)
			kept = append(kept, rr)
			continue
		default:
			kept = append(kept, rr)
			continue
		}
		if containsAddr(keep, ip) {
			kept = append(kept, rr)
		}
	}
	resp.Answer = kept
	keep = append(keep, hinted...)
	resp.Extra = slices.DeleteFunc(resp.Extra, func(rr dns.RR) bool {
		switch rr.(type) {
		case *dns.A, *dns.AAAA, *dns.SVCB, *dns.HTTPS:
			return true
		case *dns.OPT: // asked upstream for rootfs's sake
			return !clientEDNS
		}
		return false
	})
	return keep, chain, netpolicy.Decision{Allow: true}
}

// hints keeps, in a service binding's (SVCB, HTTPS) ipv4hint and
// ipv6hint, the addresses the policy allows for name (clients that read
// these records connect to them instead of asking A and AAAA) and
// returns them; ipv6hint goes without IPv6. A hint left empty goes.
func (e *Engine) hints(name string, kvs *[]dns.SVCBKeyValue) []netip.Addr {
	var all []netip.Addr
	*kvs = slices.DeleteFunc(*kvs, func(kv dns.SVCBKeyValue) bool {
		var list *[]net.IP
		switch kv := kv.(type) {
		case *dns.SVCBIPv4Hint:
			list = &kv.Hint
		case *dns.SVCBIPv6Hint:
			if !e.ipv6 {
				return true
			}
			list = &kv.Hint
		default:
			return false
		}
		var addrs []netip.Addr
		for _, ip := range *list {
			if a, ok := netip.AddrFromSlice(ip); ok {
				addrs = append(addrs, a.Unmap())
			}
		}
		keep, _ := e.pol.DecideName(name, addrs)
		*list = slices.DeleteFunc(*list, func(ip net.IP) bool {
			a, _ := netip.AddrFromSlice(ip)
			return !containsAddr(keep, a.Unmap())
		})
		all = append(all, keep...)
		return len(*list) == 0
	})
	return all
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, b := range list {
		if a == b {
			return true
		}
	}
	return false
}

// ServeLocal relays the connections accepted on l (a listener in the
// sandbox's namespace, at 127.0.0.1:port or [::1]:port there) to port on
// the host's loopback: what --allow-net localhost:PORT shows. It returns
// at once; Close stops it.
func (e *Engine) ServeLocal(l net.Listener, port uint16) {
	e.mu.Lock()
	e.closers = append(e.closers, l)
	e.mu.Unlock()
	go e.acceptEach(l, "local", func(c net.Conn) {
		if !e.acquire() {
			c.Close()
			return
		}
		e.n.local.Add(1)
		go func() {
			defer e.release()
			defer c.Close()
			target := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
			up, err := e.dial(e.ctx, "tcp", target)
			if err != nil {
				up, err = e.dial(e.ctx, "tcp", net.JoinHostPort("::1", strconv.Itoa(int(port))))
			}
			if err != nil {
				e.log.Debug("network: localhost port", zap.Uint16("port", port), zap.Error(err))
				return
			}
			defer up.Close()
			spliceNoFirst(c, up)
		}()
	})
}

func spliceNoFirst(c, up net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(c, up)
		if cw, ok := c.(closeWriter); ok {
			_ = cw.CloseWrite()
		}
	}()
	_, _ = io.Copy(up, c)
	if cw, ok := up.(closeWriter); ok {
		_ = cw.CloseWrite()
	}
	<-done
}
