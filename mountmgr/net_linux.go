package mountmgr

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/mountmgr/internal/spec"
)

// The network hand-over (issue 23). With Spec.Net, P1 adds a third
// descriptor to the stage protocol: one end of a SOCK_SEQPACKET
// socketpair (fd 5, ROOTFS_NET_FD). P2, still before pivot_root (it needs
// the host's /dev/net/tun), sends one message on it and closes it:
//
//	P1                                         P2 (new network namespace)
//	  <--- net socket: payload netHandover, -----  make TUN, address it, route via the gateway,
//	       SCM_RIGHTS [tun, relay, listener...]    lo up, listen on 127.0.0.1:0 (the fast path's
//	                                               relay) and 127.0.0.1:PORT ([::1]:PORT)
//	  <--- sync pipe: stageReport ---------------  (the server runs)
//
// P1 reads the message once the report says ok: it is already queued.
// When /dev/net/tun cannot be used (absent, as in a container not given
// it, or mode 0600 without root), the sandbox has only lo and no route
// out, and the message says why. P2 then gives lo the gateway's address
// and listens there on port 53 (UDP and TCP), so the resolver that
// /etc/resolv.conf names is still P1's, and P1 carries every TCP
// connection through the fast path, which needs no device (a socket is
// connected to the relay on lo): the message carries [relay, dns udp,
// dns tcp, listener...] and Loopback. The sandbox's IPv6 address goes on
// lo too. What the fast path does not take (UDP other than DNS, ICMP, a
// socket bound to the loopback or the sandbox's IPv6 address) meets no
// route:
// nothing leaves. Failing closed keeps the host's private side
// out; refusing to start would break every server on such a host.

// netHandover is the payload of the hand-over message.
type netHandover struct {
	Ports []uint16 `json:"ports,omitempty"` // of the listeners after the TUN and the relay, in order
	Err   string   `json:"err,omitempty"`   // no device: why
	IPv6  bool     `json:"ipv6,omitempty"`  // NetSpec.Addr6 is configured
	// Loopback: no device, but the fast path's relay and the resolver on
	// lo (then Err says why there is no device).
	Loopback bool `json:"loopback,omitempty"`
}

// setupNet is P2's part: it builds the link and sends its descriptors. It
// says whether P1 runs an engine for the sandbox (with the TUN, or on lo
// alone).
func setupNet(n *NetSpec, sock int) (bool, error) {
	if err := linux.LoopbackUp(); err != nil {
		return false, err
	}
	tun, err := linux.CreateTUN(n.Device)
	if err != nil {
		return setupLoopbackNet(n, sock, err)
	}
	defer tun.Close()
	// The device then goes with the namespace, in the background, so
	// the session's end does not wait for the kernel to unregister it;
	// where this fails, the end only takes longer.
	_ = linux.PersistTUN(tun)
	if err := linux.ConfigureLink(n.Device, n.Addr, n.Gateway, n.MTU); err != nil {
		return false, fmt.Errorf("network: %w", err)
	}
	// IPv6 where asked and the kernel has it (not with ipv6.disable=1, or
	// disable_ipv6 set for new namespaces): else the sandbox stays IPv4
	// only and P1 answers no AAAA, as on a host without IPv6.
	v6 := n.Addr6.IsValid() && linux.ConfigureLink6(n.Device, n.Addr6) == nil
	fds := []int{int(tun.Fd())}
	var ports []uint16
	defer func() {
		for _, fd := range fds[1:] {
			unix.Close(fd)
		}
	}()
	// The fast path's relay (netstack.Engine.ServeRelay): any free port;
	// a full backlog would stall the connects it carries.
	relay, err := listenLoopback(unix.AF_INET, 0)
	if err != nil {
		return false, fmt.Errorf("network: the relay listener: %w", err)
	}
	fds = append(fds, relay)
	fds, ports, err = listenLocalPorts(n, fds)
	if err != nil {
		return false, err
	}
	if err := sendHandover(sock, netHandover{Ports: ports, IPv6: v6}, fds...); err != nil {
		return false, fmt.Errorf("network: hand the device to rootfs: %w", err)
	}
	return true, nil
}

// listenLocalPorts appends to fds a listener on lo for each of
// n.LocalPorts (two where lo has IPv6), and returns their ports in order.
func listenLocalPorts(n *NetSpec, fds []int) ([]int, []uint16, error) {
	var ports []uint16
	for _, p := range n.LocalPorts {
		fd, err := listenLoopback(unix.AF_INET, p)
		if err != nil {
			return fds, nil, fmt.Errorf("network: localhost:%d in the sandbox: %w", p, err)
		}
		fds, ports = append(fds, fd), append(ports, p)
		if fd, err := listenLoopback(unix.AF_INET6, p); err == nil { // no IPv6 on lo: 127.0.0.1 only
			fds, ports = append(fds, fd), append(ports, p)
		}
	}
	return fds, ports, nil
}

// setupLoopbackNet is setupNet without a device (tunErr says why): the
// relay and the resolver on lo, at the gateway's address. Where even that
// fails, the message says why with no descriptor, and the sandbox has
// loopback only.
func setupLoopbackNet(n *NetSpec, sock int, tunErr error) (bool, error) {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	why := tunErr.Error()
	h, err := func() (netHandover, error) {
		// The gateway's address for the resolver, and the sandbox's own,
		// which a server may bind or connect to as it would on the TUN.
		for _, a := range []netip.Addr{n.Gateway, n.Addr.Addr()} {
			if err := linux.AddLoopbackAddr(a); err != nil {
				return netHandover{}, err
			}
		}
		gw := unix.SockaddrInet4{Addr: n.Gateway.As4(), Port: 53}
		relay, err := listenLoopback(unix.AF_INET, 0)
		if err != nil {
			return netHandover{}, err
		}
		fds = append(fds, relay)
		udp, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return netHandover{}, os.NewSyscallError("socket", err)
		}
		fds = append(fds, udp)
		if err := unix.Bind(udp, &gw); err != nil {
			return netHandover{}, os.NewSyscallError("bind", err)
		}
		tcp, err := listenAt(unix.AF_INET, &gw)
		if err != nil {
			return netHandover{}, err
		}
		fds = append(fds, tcp)
		var ports []uint16
		if fds, ports, err = listenLocalPorts(n, fds); err != nil {
			return netHandover{}, err
		}
		// IPv6 as with the device: the sandbox's address, here on lo, so
		// that clients ask for AAAA records and connect over IPv6 (which
		// the fast path takes); without it, IPv4 only.
		v6 := n.Addr6.IsValid() && linux.AddLoopbackAddr(n.Addr6.Addr()) == nil
		return netHandover{Err: why, Loopback: true, Ports: ports, IPv6: v6}, nil
	}()
	send := fds // the deferred close closes P2's copies either way
	if err != nil {
		send, h = nil, netHandover{Err: why + "; and the resolver on lo: " + err.Error()}
	}
	if err := sendHandover(sock, h, send...); err != nil {
		return false, fmt.Errorf("network: %w", err)
	}
	return h.Loopback, nil
}

// listenLoopback listens on the loopback address of family at port.
func listenLoopback(family int, port uint16) (int, error) {
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}
	if family == unix.AF_INET6 {
		sa = &unix.SockaddrInet6{Port: int(port), Addr: [16]byte{15: 1}}
	}
	return listenAt(family, sa)
}

// listenAt listens on sa, of family, for TCP.
func listenAt(family int, sa unix.Sockaddr) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if family == unix.AF_INET6 {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("bind", err)
	}
	if err := unix.Listen(fd, 4096); err != nil { // the kernel caps it at net.core.somaxconn
		unix.Close(fd)
		return -1, os.NewSyscallError("listen", err)
	}
	return fd, nil
}

// recvNetFiles is P1's part: the one message P2 queued before its report.
func recvNetFiles(sock *os.File) (*NetFiles, error) {
	var h netHandover
	fds, err := recvHandover(sock, &h, 2*spec.MaxLocalPorts+3)
	if errors.Is(err, errBadHandover) {
		return nil, fmt.Errorf("network: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("network: no device from the sandbox: %w", err)
	}
	want := len(h.Ports) + 2 // tun, relay, listeners
	switch {
	case h.Loopback:
		want = len(h.Ports) + 3 // relay, dns udp, dns tcp, listeners
	case h.Err != "":
		want = 0
	}
	if len(fds) != want || h.Loopback && h.Err == "" {
		closeFDs(fds)
		return nil, fmt.Errorf("network: %w", errBadHandover)
	}
	if h.Loopback {
		f := &NetFiles{Unavailable: h.Err, IPv6: h.IPv6, Relay: os.NewFile(uintptr(fds[0]), "relay"),
			DNS: os.NewFile(uintptr(fds[1]), "dns-udp"), DNSTCP: os.NewFile(uintptr(fds[2]), "dns-tcp")}
		f.Local = localListeners(h.Ports, fds[3:])
		return f, nil
	}
	if h.Err != "" {
		return &NetFiles{Unavailable: h.Err}, nil
	}
	f := &NetFiles{TUN: os.NewFile(uintptr(fds[0]), "tun"), Relay: os.NewFile(uintptr(fds[1]), "relay"), IPv6: h.IPv6}
	f.Local = localListeners(h.Ports, fds[2:])
	return f, nil
}

// localListeners pairs each port with its listener's descriptor.
func localListeners(ports []uint16, fds []int) []LocalListener {
	var ls []LocalListener
	for i, p := range ports {
		ls = append(ls, LocalListener{Port: p, File: os.NewFile(uintptr(fds[i]), fmt.Sprintf("localhost:%d", p))})
	}
	return ls
}
