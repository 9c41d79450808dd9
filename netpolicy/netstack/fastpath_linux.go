package netstack

// The fast path: an allowed TCP connection carried by the kernel's TCP on
// both sides, with no userspace stack in between.
//
// Every TCP connection the sandbox makes through its TUN ends in gVisor's
// stack here, which is where the policy is applied; but a byte relayed
// that way is copied three more times than on the host's own path, and
// a 1 GiB transfer ran at 0.35-0.5x of the host's (BENCHMARKS.md). So,
// when the sandbox's seccomp filter refers connect(2) to rootfs
// (seccomp.Notify.Connect), an allowed connect is carried out by rootfs
// instead, before any packet leaves:
//
//	sandbox: connect(fd, 203.0.113.1:443) ── seccomp ──▶ P1: Connect
//	  read the address once (the caller's memory may change; the call never runs on it)
//	  take a copy of fd (pidfd_getfd): an unconnected TCP socket of the sandbox's namespace?
//	  the policy allows 203.0.113.1:443 (by the names the sandbox resolved)?   no: let the call run:
//	  a blocking socket: dial the destination first, and answer its refusal    the stack refuses it
//	  bind fd to 127.0.0.1:0 (unless bound), note its port ─▶ connect fd to the relay listener (the sandbox's
//	  loopback, made by P2) ─▶ answer 0 (or EINPROGRESS, as a non-blocking connect would)
//	relay listener accepts ─▶ the noted flow ─▶ dial (if not yet) ─▶ relay: the server name
//	  checked (SNI, Host) as on the stack's path, then splice(2) both ways
//
// The sandbox's socket is then an ordinary kernel TCP connection on its
// own loopback, and the relay copies with splice, so a bulk transfer
// runs at well over half the host's speed, where the stack manages under
// half (BENCHMARKS.md). What a program can tell: getpeername
// says 127.0.0.1 and the relay's port, not the destination; a
// non-blocking connect to a destination that refuses succeeds and the
// connection is then reset (a blocking one gets ECONNREFUSED, as
// before). An IPv6 socket is taken as well, to an IPv6 destination (when
// the sandbox has IPv6) or an IPv4 one in its v4-mapped form (a
// dual-stack client's): it is bound to ::ffff:127.0.0.1 and connected to
// the same relay by that form (an IPV6_V6ONLY one to an IPv6 destination
// has the option cleared first). A socket bound to the wildcard address
// (or, IPv4, the sandbox's own) connects to the relay from there, keeping
// its port. Whatever the fast path does not take (UDP, other families, a
// socket bound to the loopback, to the sandbox's IPv6 address or without
// a port yet, a refused destination, no slot, any error)
// runs as the sandbox made it and meets the stack, which decides and
// reports as before: the fast path only ever carries what the stack
// would have allowed.
//
// Without a TUN device (New with none) there is no stack: the sandbox has
// only lo and no route out. The fast path then refuses itself a TCP
// connect to a destination the policy refuses (ECONNREFUSED, and the
// refusal said as the stack says it), also from a socket it could not
// have taken (bound elsewhere), and one the listener has no room
// for (SeccompBusy); whatever else it does not take, let run, meets no
// route (ENETUNREACH): nothing leaves but what it carries.

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/seccomp"
	"github.com/rootfs-dev/rootfs/netpolicy"
)

// pendingWait bounds how long a flow Connect noted waits for its
// connection on the relay listener.
const pendingWait = 5 * time.Second

// fastPath is ServeRelay's state.
type fastPath struct {
	l     *net.TCPListener
	addr  unix.SockaddrInet4 // the relay listener's, in the sandbox
	netns uint64             // inode of the sandbox's network namespace
	mu    sync.Mutex
	// pending are the flows Connect noted and the relay listener has not
	// accepted yet, by the sandbox socket's port; bounded by the engine's
	// flows (each holds one).
	pending map[int]*fastFlow
}

// fastFlow is one connection Connect took.
type fastFlow struct {
	q  netpolicy.Query
	up net.Conn // dialled before answering (a blocking connect), or nil
	t  *time.Timer
}

// ServeRelay takes l, a listener P2 made at 127.0.0.1 in the sandbox's
// network namespace, for the connections Connect makes; Close stops it.
func (e *Engine) ServeRelay(l *net.TCPListener) error {
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok || a.IP.To4() == nil {
		l.Close()
		return errors.New("network: the relay listener is not at an IPv4 address")
	}
	rc, err := l.SyscallConn()
	if err != nil {
		l.Close()
		return err
	}
	var ino uint64
	var nerr error
	if err := rc.Control(func(fd uintptr) { ino, nerr = netnsOf(int(fd)) }); err != nil || nerr != nil {
		l.Close()
		return errors.Join(err, nerr)
	}
	fp := &fastPath{l: l, netns: ino, pending: make(map[int]*fastFlow)}
	fp.addr.Port = a.Port
	copy(fp.addr.Addr[:], a.IP.To4())
	e.mu.Lock()
	e.closers = append(e.closers, l)
	e.mu.Unlock()
	e.fast.Store(fp)
	go e.acceptFast(fp)
	return nil
}

// netnsOf is the inode of the network namespace of socket fd.
func netnsOf(fd int) (uint64, error) {
	ns, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
	if err != nil {
		return 0, os.NewSyscallError("ioctl(SIOCGSKNS)", err)
	}
	defer unix.Close(ns)
	var st unix.Stat_t
	if err := unix.Fstat(ns, &st); err != nil {
		return 0, os.NewSyscallError("fstat", err)
	}
	return st.Ino, nil
}

// SeccompConnect answers a connect(2) the sandbox's filter referred to
// rootfs (seccomp.ListenOptions.Connect): carried out by Connect, or let
// run.
func (e *Engine) SeccompConnect(c *seccomp.Call) seccomp.Answer {
	run := seccomp.Answer{Continue: true}
	if e.fast.Load() == nil {
		return run
	}
	dst, dup, ok := e.readConnect(c)
	if !ok {
		return run
	}
	defer unix.Close(dup)
	errno, ok := e.Connect(dup, dst)
	switch {
	case !ok:
		return run
	case errno != 0:
		return seccomp.Answer{Errno: errno}
	}
	return seccomp.Answer{}
}

// readConnect reads connect(2) call c's address and takes a copy of its
// socket, which the caller closes; ok false when the call is not one the
// fast path could take, or cannot be read.
func (e *Engine) readConnect(c *seccomp.Call) (dst netip.AddrPort, dup int, ok bool) {
	fd, addr, alen := int(int32(c.Args[0])), c.Args[1], int(int32(c.Args[2]))
	// A length the kernel refuses (negative, or more than a
	// sockaddr_storage) is left for it to refuse.
	if fd < 0 || alen < unix.SizeofSockaddrInet4 || alen > sizeofSockaddrStorage {
		return dst, -1, false
	}
	// Read once, as much as a sockaddr_in6 (or what the caller gave): the
	// caller's memory may change, and the call never runs on it.
	sa := make([]byte, min(alen, unix.SizeofSockaddrInet6))
	if err := c.ReadMem(addr, sa); err != nil {
		e.cannotRead(err)
		return dst, -1, false
	}
	if dst, ok = parseSockaddr(sa); !ok {
		return dst, -1, false
	}
	dup, err := c.FD(fd)
	if err != nil {
		e.log.Debug("network: fast path: the socket", zap.Error(err))
		e.cannotRead(err)
		return dst, -1, false
	}
	return dst, dup, true
}

// SeccompBusy answers a connect(2) the listener has no room to answer
// (seccomp.ListenOptions.Busy), at once. With the stack it runs, and
// meets the stack; without, it would meet no route, so a TCP connect to
// an IPv4 or IPv6 address is refused as when the engine's flows are all
// taken (ECONNREFUSED, and said), and anything else runs.
func (e *Engine) SeccompBusy(c *seccomp.Call) seccomp.Answer {
	run := seccomp.Answer{Continue: true}
	fp := e.fast.Load()
	if e.nic.stack != nil || fp == nil {
		return run
	}
	dst, dup, ok := e.readConnect(c)
	if !ok {
		return run
	}
	defer unix.Close(dup)
	if !e.outside(dst) || !fp.socket(dup, dst).tcp {
		return run
	}
	// The policy's reason where it refuses anyway (no waiting: a look-up).
	q := e.lookup(dst)
	d := e.pol.Decide(q)
	if d.Allow {
		d = tooMany
	}
	e.ref.refuse("tcp", dstString(q.Addr, q.Port, q.Names), d)
	return seccomp.Answer{Errno: unix.ECONNREFUSED}
}

// cannotRead says once, where there is no stack to carry what the fast
// path cannot, that the kernel refuses rootfs the server's calls (a
// Yama ptrace_scope of 3, an LSM): the server's TCP then has no way out.
func (e *Engine) cannotRead(err error) {
	if e.nic.stack != nil || !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		return
	}
	e.blind.Do(func() {
		e.log.Warn("network: rootfs may not read the server's connect(2) calls here, so its TCP connections fail; make /dev/net/tun usable, or pass --host-network", zap.Error(err))
	})
}

// sizeofSockaddrStorage is the kernel's limit on connect(2)'s address
// length (struct sockaddr_storage; x/sys's SizeofSockaddrAny is 112):
// programs pass it as the length of any address.
const sizeofSockaddrStorage = 128

// parseSockaddr reads a sockaddr_in, or a sockaddr_in6 without a scope
// (an address with one is link-local, which the fast path never takes),
// as connect(2) would: the IPv6 form needs its first 24 bytes (the
// kernel's SIN6_LEN_RFC2133). The address keeps its family: 4 bytes for
// a sockaddr_in, 16 (v4-mapped too) for a sockaddr_in6.
func parseSockaddr(sa []byte) (netip.AddrPort, bool) {
	if len(sa) < unix.SizeofSockaddrInet4 {
		return netip.AddrPort{}, false
	}
	port := binary.BigEndian.Uint16(sa[2:4])
	switch binary.NativeEndian.Uint16(sa[0:2]) {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), port), true
	case unix.AF_INET6:
		if len(sa) < 24 || len(sa) >= unix.SizeofSockaddrInet6 && binary.NativeEndian.Uint32(sa[24:28]) != 0 {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(sa[8:24])), port), true
	}
	return netip.AddrPort{}, false
}

// Connect carries out connect(2) to dst (as parseSockaddr gives it) for
// the sandbox's socket fd (a copy of it, which the caller closes), as the
// fast path: ok false when it does not take the call, which must then
// run as the sandbox made it (the stack judges it); else errno is the
// call's answer.
func (e *Engine) Connect(fd int, dst netip.AddrPort) (errno syscall.Errno, ok bool) {
	fp := e.fast.Load()
	if fp == nil || e.ctx.Err() != nil || !e.outside(dst) {
		return 0, false
	}
	noStack := e.nic.stack == nil
	sk := fp.socket(fd, dst)
	if !sk.tcp {
		return 0, false // the kernel answers it as it would anyway
	}
	q := e.query(dst)
	if d := e.pol.Decide(q); !d.Allow {
		if noStack {
			// Refused here as the stack would (a reset: ECONNREFUSED), and
			// said so, whether or not the fast path could have taken the
			// socket; let run, the call would meet no route.
			e.ref.refuse("tcp", dstString(q.Addr, q.Port, q.Names), d)
			return unix.ECONNREFUSED, true
		}
		return 0, false // the stack refuses it, and says so
	}
	if !sk.take {
		return 0, false
	}
	six := sk.six
	if !e.acquire() {
		if noStack {
			e.ref.refuse("tcp", dstString(q.Addr, q.Port, nil), tooMany)
			return unix.ECONNREFUSED, true
		}
		return 0, false
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		e.release()
		return 0, false
	}
	f := &fastFlow{q: q}
	if fl&unix.O_NONBLOCK == 0 {
		// A blocking connect returns when the destination answered,
		// with its answer.
		up, err := e.dialTCP(q)
		if err != nil {
			e.release()
			return dialErrno(err), true
		}
		f.up = up
	}
	// A copy: unix.Connect writes the raw form into the Sockaddr it is
	// given, and connects run at once.
	ra := fp.addr
	local, relay := unix.Sockaddr(&unix.SockaddrInet4{Addr: fp.addr.Addr}), unix.Sockaddr(&ra)
	if six {
		m := netip.AddrFrom4(fp.addr.Addr).As16() // ::ffff:127.0.0.1
		local, relay = &unix.SockaddrInet6{Addr: m}, &unix.SockaddrInet6{Addr: m, Port: fp.addr.Port}
	}
	port := sk.port
	if port == 0 {
		// With IP_BIND_ADDRESS_NO_PORT the bind would take no port, and
		// the relay would not know the connection. The option only says
		// when a bound socket takes its port, and connect(2) takes one
		// anyway; set again meanwhile, the port is 0 below.
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 0)
		if sk.v6only {
			// Set again meanwhile, the bind below fails and the kernel
			// connects the socket as made.
			_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
		}
		if err := unix.Bind(fd, local); err != nil {
			e.drop(f)
			return 0, false
		}
		port = -1
		switch sa, _ := unix.Getsockname(fd); sa := sa.(type) {
		case *unix.SockaddrInet4:
			port = sa.Port
		case *unix.SockaddrInet6:
			port = sa.Port
		}
		if port <= 0 {
			e.drop(f)
			return unix.EADDRNOTAVAIL, true
		}
	}
	fp.note(e, port, f)
	switch err := unix.Connect(fd, relay); {
	case err == nil:
		return 0, true
	case errors.Is(err, unix.EINPROGRESS):
		return unix.EINPROGRESS, true
	default:
		if fp.take(port) == f {
			e.drop(f)
		}
		var en syscall.Errno
		if !errors.As(err, &en) {
			en = unix.ECONNREFUSED
		}
		return en, true
	}
}

// query is the policy's question for a TCP connect to dst (as
// parseSockaddr gives it), with the names that resolved to its address.
// An IPv6 destination waits for the network's NAT64 prefixes.
func (e *Engine) query(dst netip.AddrPort) netpolicy.Query {
	e.nat64Wait(dst.Addr().Unmap())
	return e.lookup(dst)
}

// lookup is query without the wait, for SeccompBusy, which answers in
// the listener's own goroutine and refuses whatever the policy says.
func (e *Engine) lookup(dst netip.AddrPort) netpolicy.Query {
	a := dst.Addr().Unmap()
	return netpolicy.Query{Addr: a, Port: dst.Port(), Names: e.table.Names(a)}
}

// outside says whether dst (as parseSockaddr gives it) is one Connect
// may take or refuse: not the sandbox's own addresses, which are its
// kernel's to connect, as its loopback is, with or without the TUN; nor a
// form the kernel refuses itself.
func (e *Engine) outside(dst netip.AddrPort) bool {
	a := dst.Addr().Unmap()
	return a != Gateway && a != SandboxAddr.Addr() && a != SandboxAddr6.Addr() && !a.IsLoopback() &&
		!a.IsUnspecified() && !a.IsMulticast() && dst.Port() != 0 && (a.Is4() || e.ipv6)
}

// sock is what Connect needs to know of the socket a connect(2) is for.
type sock struct {
	// tcp: a TCP (or MPTCP) socket of the sandbox's namespace, of dst's
	// family, neither connected nor listening, for which the kernel would
	// try to reach dst: the policy decides.
	tcp bool
	// take: the fast path can carry it (tcp, not bound to a device, and
	// either not bound or bound where it can reach the relay).
	take bool
	six  bool // an IPv6 socket
	// port: the port the socket is bound to, to the wildcard address or
	// (IPv4) the sandbox's own: from there it reaches the relay as it is,
	// where an unbound one is first bound to the loopback (0).
	port int
	// v6only: an IPv6 socket with IPV6_V6ONLY (to an IPv6 destination).
	// It reaches the relay, at an IPv4 address, only by the v4-mapped
	// form, so the fast path clears the option before binding it: what
	// the option changes is which addresses the socket may bind, accept
	// from or connect to, and once it is connected to dst nothing, except
	// what getsockopt says.
	v6only bool
}

// socket says what fd is, for a connect to dst (as parseSockaddr gives
// it). The address must be of the socket's family (4 bytes for an IPv4
// socket, 16 for an IPv6 one, v4-mapped or not): the kernel refuses the
// other. An MPTCP socket falls back to TCP against the relay.
func (fp *fastPath) socket(fd int, dst netip.AddrPort) sock {
	var s sock
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil || domain != unix.AF_INET && domain != unix.AF_INET6 {
		return s
	}
	s.six = domain == unix.AF_INET6
	if s.six != dst.Addr().Is6() {
		return s
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || v != unix.SOCK_STREAM {
		return s
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || v != unix.IPPROTO_TCP && v != unix.IPPROTO_MPTCP {
		return s
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 0 {
		return s
	}
	if _, err := unix.Getpeername(fd); !errors.Is(err, unix.ENOTCONN) {
		return s
	}
	// getpeername says ENOTCONN of a connect in progress too (SYN_SENT,
	// or deferred by TCP_FASTOPEN_CONNECT), and of one that failed
	// unseen (closed, having sent: a non-blocking connect reset or timed
	// out; disconnecting clears the count); the kernel answers both
	// without trying dst (EALREADY, EISCONN; the pending error, and the
	// socket is reset).
	if ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil && (ti.State != tcpClose || ti.Segs_out != 0) {
		return s
	}
	// A socket from elsewhere (the host's namespace, passed in) would be
	// connected to whatever listens at the relay's port there.
	if ino, err := netnsOf(fd); err != nil || ino != fp.netns {
		return s
	}
	s.v6only = s.six && v6only(fd)
	if s.v6only && dst.Addr().Is4In6() {
		return s // the kernel's ENETUNREACH
	}
	s.tcp = true
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BINDTOIFINDEX); err != nil || v != 0 {
		return s
	}
	// Bound with IP_BIND_ADDRESS_NO_PORT to an address, a socket has no
	// port until it connects, and the relay would not know it; bound to
	// the loopback, the kernel could not send from there to dst; bound to
	// the sandbox's IPv6 address, it cannot reach the relay's IPv4 one;
	// an IPv6-only one bound cannot have the option cleared.
	switch sa, _ := unix.Getsockname(fd); sa := sa.(type) {
	case *unix.SockaddrInet4:
		own := sa.Addr == SandboxAddr.Addr().As4()
		s.take = sa.Addr == [4]byte{} || own && sa.Port != 0
		s.port = sa.Port
	case *unix.SockaddrInet6:
		s.take = sa.Addr == [16]byte{} && sa.ZoneId == 0 && (sa.Port == 0 || !s.v6only)
		s.port = sa.Port
	}
	return s
}

// tcpClose is TCP_CLOSE, tcp_info's state of a socket neither connected,
// connecting nor listening.
const tcpClose = 7

// v6only says whether IPv6 socket fd refuses IPv4 (IPV6_V6ONLY); an
// error counts as yes.
func v6only(fd int) bool {
	v, err := unix.GetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY)
	return err != nil || v != 0
}

// note records f for the connection from port, until it is accepted or
// pendingWait has passed.
func (fp *fastPath) note(e *Engine, port int, f *fastFlow) {
	fp.mu.Lock()
	old := fp.pending[port]
	fp.pending[port] = f
	f.t = time.AfterFunc(pendingWait, func() {
		if fp.take(port) == f {
			e.drop(f)
		}
	})
	fp.mu.Unlock()
	if old != nil { // its socket was closed before it connected
		old.t.Stop()
		e.drop(old)
	}
}

// dropAll gives up every flow not accepted yet (the engine closes).
func (fp *fastPath) dropAll(e *Engine) {
	fp.mu.Lock()
	pending := fp.pending
	fp.pending = make(map[int]*fastFlow)
	fp.mu.Unlock()
	// Taken out of pending, each is this call's to drop (its timer
	// finds it gone).
	for _, f := range pending {
		f.t.Stop()
		e.drop(f)
	}
}

// take removes and returns the flow noted for port, nil if none.
func (fp *fastPath) take(port int) *fastFlow {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	f := fp.pending[port]
	if f != nil {
		delete(fp.pending, port)
	}
	return f
}

// drop gives up a flow that will not be relayed.
func (e *Engine) drop(f *fastFlow) {
	if f.up != nil {
		f.up.Close()
	}
	e.release()
}

// acceptFast serves the relay listener until it is closed.
func (e *Engine) acceptFast(fp *fastPath) {
	e.acceptEach(fp.l, "relay", func(nc net.Conn) {
		c := nc.(*net.TCPConn) // a TCPListener's
		var f *fastFlow
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			f = fp.take(a.Port)
		}
		if f == nil {
			// Not a connection Connect made: the sandbox dialled the relay
			// itself.
			_ = c.SetLinger(0)
			c.Close()
			return
		}
		f.t.Stop()
		go e.serveFast(c, f)
	})
}

// serveFast relays one connection of the fast path.
func (e *Engine) serveFast(c *net.TCPConn, f *fastFlow) {
	defer e.release()
	defer c.Close()
	up := f.up
	if up == nil {
		var err error
		if up, err = e.dialTCP(f.q); err != nil {
			// What the stack's path answers with a reset to the SYN, this
			// answers with a reset after the handshake.
			_ = c.SetLinger(0)
			return
		}
	}
	defer up.Close()
	e.relay(c, up, f.q, true)
}

// dialErrno is the errno a connect(2) would have returned for a failed
// dial.
func dialErrno(err error) syscall.Errno {
	var en syscall.Errno
	switch {
	case errors.As(err, &en):
		return en
	case errors.Is(err, os.ErrDeadlineExceeded):
		return unix.ETIMEDOUT
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return unix.ETIMEDOUT
	}
	return unix.ECONNREFUSED
}
