package mountmgr

import (
	"errors"
	"fmt"
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
// When /dev/net/tun cannot be used (absent, or mode 0600 without root),
// the message carries no descriptor and says why: the sandbox keeps its
// namespace with only lo, as --no-network, and P1 says so. Failing closed
// keeps the host's private side out; refusing to start would break every
// server on such a host.

// netHandover is the payload of the hand-over message.
type netHandover struct {
	Ports []uint16 `json:"ports,omitempty"` // of the listeners after the TUN and the relay, in order
	Err   string   `json:"err,omitempty"`   // no device: why
	IPv6  bool     `json:"ipv6,omitempty"`  // NetSpec.Addr6 is configured
}

// setupNet is P2's part: it builds the link and sends its descriptors. It
// says whether the sandbox has the TUN (and so an engine in P1).
func setupNet(n *NetSpec, sock int) (bool, error) {
	if err := linux.LoopbackUp(); err != nil {
		return false, err
	}
	tun, err := linux.CreateTUN(n.Device)
	if err != nil {
		if err := sendHandover(sock, netHandover{Err: err.Error()}); err != nil {
			return false, fmt.Errorf("network: %w", err)
		}
		return false, nil
	}
	defer tun.Close()
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
	for _, p := range n.LocalPorts {
		fd, err := listenLoopback(unix.AF_INET, p)
		if err != nil {
			return false, fmt.Errorf("network: localhost:%d in the sandbox: %w", p, err)
		}
		fds, ports = append(fds, fd), append(ports, p)
		if fd, err := listenLoopback(unix.AF_INET6, p); err == nil { // no IPv6 on lo: 127.0.0.1 only
			fds, ports = append(fds, fd), append(ports, p)
		}
	}
	if err := sendHandover(sock, netHandover{Ports: ports, IPv6: v6}, fds...); err != nil {
		return false, fmt.Errorf("network: hand the device to rootfs: %w", err)
	}
	return true, nil
}

// listenLoopback listens on the loopback address of family at port.
func listenLoopback(family int, port uint16) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}
	if family == unix.AF_INET6 {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
		sa = &unix.SockaddrInet6{Port: int(port), Addr: [16]byte{15: 1}}
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
	fds, err := recvHandover(sock, &h, 2*spec.MaxLocalPorts+2)
	if errors.Is(err, errBadHandover) {
		return nil, fmt.Errorf("network: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("network: no device from the sandbox: %w", err)
	}
	if h.Err == "" && len(fds) != len(h.Ports)+2 || h.Err != "" && len(fds) != 0 {
		closeFDs(fds)
		return nil, fmt.Errorf("network: %w", errBadHandover)
	}
	if h.Err != "" {
		return &NetFiles{Unavailable: h.Err}, nil
	}
	f := &NetFiles{TUN: os.NewFile(uintptr(fds[0]), "tun"), Relay: os.NewFile(uintptr(fds[1]), "relay"), IPv6: h.IPv6}
	for i, p := range h.Ports {
		f.Local = append(f.Local, LocalListener{Port: p, File: os.NewFile(uintptr(fds[i+2]), fmt.Sprintf("localhost:%d", p))})
	}
	return f, nil
}
