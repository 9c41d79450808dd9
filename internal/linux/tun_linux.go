package linux

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// CreateTUN makes a TUN device called name (IFF_TUN|IFF_NO_PI|
// IFF_VNET_HDR: IP packets, each after a struct virtio_net_hdr) in the
// calling thread's network namespace and returns its queue, non-blocking.
// The device offloads checksums and TCP segmentation (TUNSETOFFLOAD
// TUN_F_CSUM|TUN_F_TSO4|TUN_F_TSO6): the namespace's kernel leaves its
// TCP checksums partial and may send segments of up to 64 KiB, for the
// reader of the queue to take as they are (the engine does not check
// checksums of what the sandbox sends). It needs CAP_NET_ADMIN over that
// namespace and a /dev/net/tun it may open. The device goes when the last
// descriptor of its queue is closed, unless PersistTUN.
func CreateTUN(name string) (*os.File, error) { return CreateTUNVnet(name, true) }

// CreateTUNVnet is CreateTUN, without IFF_VNET_HDR and the offloads when
// vnetHdr is false (the queue carries bare IP packets).
func CreateTUNVnet(name string, vnetHdr bool) (*os.File, error) {
	fd, err := retryOnEINTR2(func() (int, error) {
		return unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/dev/net/tun", Err: err}
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if vnetHdr {
		flags |= unix.IFF_VNET_HDR
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("ioctl(TUNSETIFF)", err)
	}
	if flags&unix.IFF_VNET_HDR != 0 {
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, unix.TUN_F_CSUM|unix.TUN_F_TSO4|unix.TUN_F_TSO6); err != nil {
			unix.Close(fd)
			return nil, os.NewSyscallError("ioctl(TUNSETOFFLOAD)", err)
		}
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

// PersistTUN makes the device of queue f outlive its last descriptor
// (TUNSETPERSIST): it then goes with its network namespace, which the
// kernel tears down in the background once nothing is in it. Without it
// the last close unregisters the device, waiting for the network's RCU
// grace periods (10-30 ms here), and whoever closes it last (P1 at the
// session's end) waits that long. With no queue attached the device
// drops what is routed to it. It has no owner or group (TUNSETOWNER,
// TUNSETGROUP), so the kernel lets any process in the namespace that can
// open /dev/net/tun attach a queue to it by name, without a capability
// (only a new device needs CAP_NET_ADMIN): what keeps the server off it
// is that its /dev has no tun, every other mount it sees is nodev and
// mknod of a device is refused. A queue would only carry the packets of
// the namespace it is in.
func PersistTUN(f *os.File) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := c.Control(func(fd uintptr) { ioErr = unix.IoctlSetInt(int(fd), unix.TUNSETPERSIST, 1) }); err != nil {
		return err
	}
	return os.NewSyscallError("ioctl(TUNSETPERSIST)", ioErr)
}

// ConfigureLink gives the IPv4 interface name the address addr (with its
// prefix), the MTU mtu, brings it up, and, when gw is valid, adds a
// default route through gw on it.
func ConfigureLink(name string, addr netip.Prefix, gw netip.Addr, mtu int) error {
	if !addr.Addr().Is4() {
		return fmt.Errorf("configure %s: %s is not IPv4", name, addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	ioctl := func(req uint, what string, set func(*unix.Ifreq) error) error {
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		if err := set(ifr); err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, req, ifr); err != nil {
			return os.NewSyscallError("ioctl("+what+") "+name, err)
		}
		return nil
	}
	mask := netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, ^uint32(0)<<(32-addr.Bits()))))
	steps := []struct {
		req  uint
		what string
		set  func(*unix.Ifreq) error
	}{
		{unix.SIOCSIFMTU, "SIOCSIFMTU", func(r *unix.Ifreq) error { r.SetUint32(uint32(mtu)); return nil }},
		{unix.SIOCSIFADDR, "SIOCSIFADDR", func(r *unix.Ifreq) error { return r.SetInet4Addr(addr.Addr().AsSlice()) }},
		{unix.SIOCSIFNETMASK, "SIOCSIFNETMASK", func(r *unix.Ifreq) error { return r.SetInet4Addr(mask.AsSlice()) }},
		{unix.SIOCSIFFLAGS, "SIOCSIFFLAGS", func(r *unix.Ifreq) error { r.SetUint16(unix.IFF_UP | unix.IFF_RUNNING); return nil }},
	}
	for _, s := range steps {
		if err := ioctl(s.req, s.what, s.set); err != nil {
			return err
		}
	}
	if !gw.IsValid() {
		return nil
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return os.NewSyscallError("ioctl(SIOCGIFINDEX) "+name, err)
	}
	return addDefaultRoute(gw, ifr.Uint32())
}

// addDefaultRoute adds the route 0.0.0.0/0 via gw on interface index
// oif.
func addDefaultRoute(gw netip.Addr, oif uint32) error {
	g := gw.As4()
	body := []byte{unix.AF_INET, 0, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_UNIVERSE, unix.RTN_UNICAST, 0, 0, 0, 0} // struct rtmsg
	body = append(body, rtattr(unix.RTA_GATEWAY, g[:])...)
	body = append(body, rtattr(unix.RTA_OIF, binary.NativeEndian.AppendUint32(nil, oif))...)
	return netlinkRequest(unix.RTM_NEWROUTE, body, "RTM_NEWROUTE default via "+gw.String())
}

// ConfigureLink6 gives interface name, already up (ConfigureLink), the
// IPv6 address addr (with its prefix), usable at once (no duplicate
// address detection: nothing else is on the link), and the default
// route ::/0 on it. A TUN device has no neighbours to find, so the route
// needs no gateway: every packet is the reader of the queue's.
func ConfigureLink6(name string, addr netip.Prefix) error {
	if !addr.Addr().Is6() || addr.Addr().Is4In6() {
		return fmt.Errorf("configure %s: %s is not IPv6", name, addr)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	err = unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr)
	unix.Close(fd)
	if err != nil {
		return os.NewSyscallError("ioctl(SIOCGIFINDEX) "+name, err)
	}
	idx := ifr.Uint32()
	a := addr.Addr().As16()
	// struct ifaddrmsg: family, prefix length, flags, scope, index.
	body := binary.NativeEndian.AppendUint32([]byte{unix.AF_INET6, byte(addr.Bits()), unix.IFA_F_NODAD, unix.RT_SCOPE_UNIVERSE}, idx)
	body = append(body, rtattr(unix.IFA_LOCAL, a[:])...)
	body = append(body, rtattr(unix.IFA_ADDRESS, a[:])...)
	body = append(body, rtattr(unix.IFA_FLAGS, binary.NativeEndian.AppendUint32(nil, unix.IFA_F_NODAD))...)
	if err := netlinkRequest(unix.RTM_NEWADDR, body, "RTM_NEWADDR "+addr.String()+" on "+name); err != nil {
		return err
	}
	body = []byte{unix.AF_INET6, 0, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_UNIVERSE, unix.RTN_UNICAST, 0, 0, 0, 0} // struct rtmsg, ::/0
	body = append(body, rtattr(unix.RTA_OIF, binary.NativeEndian.AppendUint32(nil, idx))...)
	return netlinkRequest(unix.RTM_NEWROUTE, body, "RTM_NEWROUTE ::/0 dev "+name)
}

// AddLoopbackAddr gives lo the address a, alone in its prefix (/32 or
// /128; universe scope, so a socket bound to it may talk to the
// namespace's other addresses; an IPv6 one usable at once, with no
// duplicate address detection). The sandbox without a TUN device takes
// its gateway's address this way, for the resolver its /etc/resolv.conf
// names, and its own IPv6 address, so that clients ask for and use IPv6.
func AddLoopbackAddr(a netip.Addr) error {
	family, bits, flags := byte(unix.AF_INET), byte(32), byte(0)
	if a.Is6() {
		if a.Is4In6() || a.Zone() != "" {
			return fmt.Errorf("lo: %s is not an address of its own", a)
		}
		family, bits, flags = unix.AF_INET6, 128, unix.IFA_F_NODAD
	}
	b := a.AsSlice()
	// struct ifaddrmsg: family, prefix length, flags, scope, index (lo is 1).
	body := binary.NativeEndian.AppendUint32([]byte{family, bits, flags, unix.RT_SCOPE_UNIVERSE}, 1)
	body = append(body, rtattr(unix.IFA_LOCAL, b)...)
	body = append(body, rtattr(unix.IFA_ADDRESS, b)...)
	if flags != 0 {
		body = append(body, rtattr(unix.IFA_FLAGS, binary.NativeEndian.AppendUint32(nil, uint32(flags)))...)
	}
	return netlinkRequest(unix.RTM_NEWADDR, body, fmt.Sprintf("RTM_NEWADDR %s/%d on lo", a, bits))
}

// rtattr is one netlink route attribute, padded.
func rtattr(typ uint16, data []byte) []byte {
	b := make([]byte, unix.SizeofRtAttr, unix.SizeofRtAttr+len(data)+3)
	binary.NativeEndian.PutUint16(b[0:], uint16(unix.SizeofRtAttr+len(data)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// netlinkRequest sends one NETLINK_ROUTE request of type typ (creating,
// never replacing) and reads the kernel's answer; what names it in the
// error.
func netlinkRequest(typ uint16, body []byte, what string) error {
	s, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return os.NewSyscallError("socket(NETLINK_ROUTE)", err)
	}
	defer unix.Close(s)
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.SizeofNlMsghdr+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	msg = append(msg, body...)
	if err := unix.Sendto(s, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return os.NewSyscallError("sendto("+what+")", err)
	}
	buf := make([]byte, 4096)
	for {
		n, err := retryOnEINTR2(func() (int, error) {
			n, _, err := unix.Recvfrom(s, buf, 0)
			return n, err
		})
		if err != nil {
			return os.NewSyscallError("recvfrom(NETLINK_ROUTE)", err)
		}
		for b := buf[:n]; len(b) >= unix.SizeofNlMsghdr; {
			l := int(binary.NativeEndian.Uint32(b[0:]))
			typ := binary.NativeEndian.Uint16(b[4:])
			if l < unix.SizeofNlMsghdr || l > len(b) {
				return fmt.Errorf("%s: bad netlink answer", what)
			}
			data := b[unix.SizeofNlMsghdr:l]
			b = b[min((l+3)&^3, len(b)):]
			if typ != unix.NLMSG_ERROR || len(data) < 4 {
				continue
			}
			if code := int32(binary.NativeEndian.Uint32(data)); code != 0 {
				return os.NewSyscallError(what, unix.Errno(-code))
			}
			return nil
		}
	}
}
