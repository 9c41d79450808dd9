package netpolicy

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HostNow reads the host's side from the calling thread's network
// namespace: its interfaces' addresses, and the networks it reaches
// directly, which are the on-link routes of every table but local (a
// unicast route with no gateway: the LAN, a VPN's networks) and the
// networks of its addresses. A route through a nexthop object (ip
// nexthop, RTA_NH_ID) is on-link when the object has no gateway; a
// multipath route when one of its hops has none. So are the networks a
// VPN routes through its gateway on its own device (vpnRoute). The
// prefixes of local routes, in any table, are its own addresses too: "ip
// route add local 192.0.2.0/24 dev lo" (AnyIP, as IPv6 proxy pools and
// transparent proxies use it) makes the host answer on every address of
// it, with every service bound to 0.0.0.0 or [::], though no interface
// has them.
func HostNow() (Host, error) {
	var h Host
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return h, err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			h.Addrs = append(h.Addrs, p.Addr())
			h.Nets = append(h.Nets, p.Masked())
		}
	}
	nh, nhDevs, err := nexthops()
	if err != nil {
		return h, err
	}
	var routes []syscall.NetlinkMessage
	for _, family := range []int{syscall.AF_INET, syscall.AF_INET6} {
		rib, err := syscall.NetlinkRIB(syscall.RTM_GETROUTE, family)
		if err != nil {
			return h, os.NewSyscallError("netlink RTM_GETROUTE", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(rib)
		if err != nil {
			return h, os.NewSyscallError("netlink RTM_GETROUTE", err)
		}
		routes = append(routes, msgs...)
	}
	// The devices of default routes, any table; one through a nexthop
	// object has its object's (with nexthop_compat_mode off, the route
	// names none). Where no default route's device is known (none, as
	// on a host with a full BGP table, or one of unknown way), routes
	// through gateways are the internet's way, and none is a VPN's.
	defaults := map[uint32]bool{}
	unknown := false
	var unicast []route // each read once, for both passes
	for _, m := range routes {
		r, ok := parseRoute(m)
		if !ok {
			continue
		}
		unicast = append(unicast, r)
		if r.bits == 0 {
			devs := r.oifs
			if r.nhID != nil {
				devs = append(devs, nhDevs[*r.nhID]...)
			}
			for _, oif := range devs {
				defaults[oif] = true
			}
			unknown = unknown || len(devs) == 0
		}
	}
	if !unknown && len(defaults) > 0 {
		for _, r := range unicast {
			if p, ok := vpnRoute(r, defaults); ok {
				h.Nets = append(h.Nets, p)
			}
		}
	}
	for _, m := range routes {
		if p, ok := onLink(m, nh); ok {
			h.Nets = append(h.Nets, p)
		}
		if p, ok := localRoute(m); ok {
			if p.IsSingleIP() {
				h.Addrs = append(h.Addrs, p.Addr())
			} else {
				h.Local = append(h.Local, p)
			}
		}
	}
	return h, nil
}

// localRoute is the destination of m when m is a local route (RTN_LOCAL,
// in any table) of a prefix beyond the loopback's, which the loopback
// class refuses anyway. A local default route (a transparent proxy's, in
// a table only marked packets use) is left out: it would refuse the
// internet.
func localRoute(m syscall.NetlinkMessage) (netip.Prefix, bool) {
	if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
		return netip.Prefix{}, false
	}
	rt := (*syscall.RtMsg)(unsafe.Pointer(&m.Data[0]))
	if rt.Type != syscall.RTN_LOCAL || rt.Dst_len == 0 {
		return netip.Prefix{}, false
	}
	attrs, err := syscall.ParseNetlinkRouteAttr(&m)
	if err != nil {
		return netip.Prefix{}, false
	}
	for _, a := range attrs {
		if a.Attr.Type != syscall.RTA_DST {
			continue
		}
		dst, ok := netip.AddrFromSlice(a.Value)
		if !ok || dst.Unmap().IsLoopback() {
			return netip.Prefix{}, false
		}
		p, err := dst.Prefix(int(rt.Dst_len))
		return p, err == nil
	}
	return netip.Prefix{}, false
}

// route is what vpnRoute reads of a unicast route.
type route struct {
	dst     netip.Addr
	bits    int
	oif     uint32   // the output device (RTA_OIF), 0 when none is named
	oifs    []uint32 // oif, or the devices of a multipath route's hops
	gateway bool     // through a gateway (RTA_GATEWAY or RTA_VIA)
	nhID    *uint32  // the nexthop object (RTA_NH_ID), nil when none
}

// parseRoute reads m when it is a unicast route of a table but local.
func parseRoute(m syscall.NetlinkMessage) (route, bool) {
	var r route
	if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
		return r, false
	}
	rt := (*syscall.RtMsg)(unsafe.Pointer(&m.Data[0]))
	if rt.Type != syscall.RTN_UNICAST || rt.Table == syscall.RT_TABLE_LOCAL {
		return r, false
	}
	attrs, err := syscall.ParseNetlinkRouteAttr(&m)
	if err != nil {
		return r, false
	}
	r.bits = int(rt.Dst_len)
	for _, a := range attrs {
		switch a.Attr.Type {
		case syscall.RTA_DST:
			r.dst, _ = netip.AddrFromSlice(a.Value)
		case syscall.RTA_OIF:
			if len(a.Value) == 4 {
				r.oif = binary.NativeEndian.Uint32(a.Value)
				r.oifs = append(r.oifs, r.oif)
			}
		case unix.RTA_MULTIPATH:
			for b := a.Value; len(b) >= unix.SizeofRtNexthop; {
				l := int(binary.NativeEndian.Uint16(b[0:2]))
				if l < unix.SizeofRtNexthop || l > len(b) {
					break
				}
				r.oifs = append(r.oifs, binary.NativeEndian.Uint32(b[4:8]))
				b = b[min(align4(l), len(b)):]
			}
		case syscall.RTA_GATEWAY, unix.RTA_VIA:
			r.gateway = true
		case rtaNHID:
			if len(a.Value) == 4 {
				id := binary.NativeEndian.Uint32(a.Value)
				r.nhID = &id
			}
		case syscall.RTA_TABLE:
			if len(a.Value) == 4 && binary.NativeEndian.Uint32(a.Value) == syscall.RT_TABLE_LOCAL {
				return r, false
			}
		}
	}
	return r, true
}

// vpnRoute is the destination of r when r is a route through a gateway
// on a device that carries no default route (defaults, by index), of a
// prefix of at least /8 (IPv6: /16): the networks a VPN pushes
// ("203.0.113.0/24 via 10.8.0.1 dev tun0", OpenVPN's), which may be
// public addresses only the host's side reaches. A full tunnel's halves
// (0.0.0.0/1 and 128.0.0.0/1) are wider, and a route through the
// default route's device (to the VPN's server, a static route of the
// LAN) is the internet's way or private anyway.
func vpnRoute(r route, defaults map[uint32]bool) (netip.Prefix, bool) {
	if !r.gateway || r.oif == 0 || defaults[r.oif] || !r.dst.IsValid() {
		return netip.Prefix{}, false
	}
	minBits := 8
	if r.dst.Is6() {
		minBits = 16
	}
	if r.bits < minBits {
		return netip.Prefix{}, false
	}
	p, err := r.dst.Prefix(r.bits)
	return p, err == nil
}

// rtaNHID is RTA_NH_ID: the route's nexthop object. With the kernel's
// nexthop_compat_mode off (as FRR advises), it is all such a route
// says of its way: no RTA_GATEWAY, no RTA_MULTIPATH.
const rtaNHID = 30

// onLink is the destination of m when m is an on-link unicast route. nh
// are the nexthop objects (nexthops).
func onLink(m syscall.NetlinkMessage, nh map[uint32]bool) (netip.Prefix, bool) {
	if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
		return netip.Prefix{}, false
	}
	rt := (*syscall.RtMsg)(unsafe.Pointer(&m.Data[0]))
	if rt.Type != syscall.RTN_UNICAST || rt.Table == syscall.RT_TABLE_LOCAL || rt.Dst_len == 0 {
		return netip.Prefix{}, false
	}
	attrs, err := syscall.ParseNetlinkRouteAttr(&m)
	if err != nil {
		return netip.Prefix{}, false
	}
	var dst netip.Addr
	gateway, direct := false, true
	var nhID *uint32
	for _, a := range attrs {
		switch a.Attr.Type {
		case syscall.RTA_GATEWAY, unix.RTA_VIA:
			gateway = true
		case unix.RTA_MULTIPATH:
			direct = multipathOnLink(a.Value)
		case rtaNHID:
			if len(a.Value) == 4 {
				id := binary.NativeEndian.Uint32(a.Value)
				nhID = &id
			}
		case syscall.RTA_DST:
			dst, _ = netip.AddrFromSlice(a.Value)
		case syscall.RTA_TABLE:
			if len(a.Value) == 4 && binary.NativeEndian.Uint32(a.Value) == syscall.RT_TABLE_LOCAL {
				return netip.Prefix{}, false
			}
		}
	}
	switch {
	case nhID != nil:
		// The object says (the kernel may add its gateway or hops for
		// compatibility, which say the same).
		direct = nh[*nhID]
	case gateway:
		direct = false
	}
	if !direct || !dst.IsValid() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(dst, int(rt.Dst_len)), true
}

// multipathOnLink reports whether a hop of an RTA_MULTIPATH value (struct
// rtnexthop, each followed by its attributes) has no gateway.
func multipathOnLink(b []byte) bool {
	for len(b) >= unix.SizeofRtNexthop {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < unix.SizeofRtNexthop || l > len(b) {
			return false
		}
		gateway := false
		forEachAttr(b[unix.SizeofRtNexthop:l], func(t uint16, _ []byte) {
			if t == syscall.RTA_GATEWAY || t == unix.RTA_VIA {
				gateway = true
			}
		})
		if !gateway {
			return true
		}
		b = b[min(align4(l), len(b)):]
	}
	return false
}

// forEachAttr calls f with the type (flags masked off) and value of each
// netlink attribute in b, up to the first that does not fit.
func forEachAttr(b []byte, f func(typ uint16, v []byte)) {
	for len(b) >= unix.SizeofNlAttr {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < unix.SizeofNlAttr || l > len(b) {
			return
		}
		f(binary.NativeEndian.Uint16(b[2:4])&nlaTypeMask, b[unix.SizeofNlAttr:l])
		b = b[min(align4(l), len(b)):]
	}
}

func align4(n int) int { return (n + 3) &^ 3 }

// nexthops are the kernel's nexthop objects by id, true for those that
// reach their destinations directly: a device and no gateway, or a
// group with such a member (blackholes reach nothing); and the devices
// (NHA_OIF) each object, or a group's members, go out of. A kernel
// without them (before 5.3) has none.
func nexthops() (map[uint32]bool, map[uint32][]uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, nil, os.NewSyscallError("socket(NETLINK_ROUTE)", err)
	}
	defer unix.Close(fd)
	req := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofNhmsg) // an nhmsg of zeros: every object
	binary.NativeEndian.PutUint32(req[0:4], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:6], unix.RTM_GETNEXTHOP)
	binary.NativeEndian.PutUint16(req[6:8], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:12], 1)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, nil, os.NewSyscallError("netlink RTM_GETNEXTHOP", err)
	}
	direct := map[uint32]bool{}
	devs := map[uint32][]uint32{}
	groups := map[uint32][]uint32{}
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, os.NewSyscallError("netlink RTM_GETNEXTHOP", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, nil, os.NewSyscallError("netlink RTM_GETNEXTHOP", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				for id, members := range groups {
					for _, mid := range members {
						if direct[mid] {
							direct[id] = true
						}
						devs[id] = append(devs[id], devs[mid]...)
					}
				}
				return direct, devs, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, nil, os.NewSyscallError("netlink RTM_GETNEXTHOP", unix.EIO)
				}
				errno := unix.Errno(-int32(binary.NativeEndian.Uint32(m.Data[0:4])))
				if errno == 0 {
					continue
				}
				if errno == unix.EOPNOTSUPP || errno == unix.EINVAL {
					return nil, nil, nil // no nexthop objects in this kernel
				}
				return nil, nil, os.NewSyscallError("netlink RTM_GETNEXTHOP", errno)
			case unix.RTM_NEWNEXTHOP:
			default:
				continue
			}
			if len(m.Data) < unix.SizeofNhmsg {
				continue
			}
			var id, oif uint32
			var haveID, gateway, blackhole bool
			var members []uint32
			forEachAttr(m.Data[unix.SizeofNhmsg:], func(t uint16, v []byte) {
				switch t {
				case unix.NHA_ID:
					if len(v) == 4 {
						id, haveID = binary.NativeEndian.Uint32(v), true
					}
				case unix.NHA_GATEWAY:
					gateway = true
				case unix.NHA_OIF:
					if len(v) == 4 {
						oif = binary.NativeEndian.Uint32(v)
					}
				case unix.NHA_BLACKHOLE:
					blackhole = true
				case unix.NHA_GROUP:
					for ; len(v) >= unix.SizeofNexthopGrp; v = v[unix.SizeofNexthopGrp:] {
						members = append(members, binary.NativeEndian.Uint32(v[0:4]))
					}
				}
			})
			switch {
			case !haveID:
			case members != nil:
				groups[id] = members
			default:
				direct[id] = !gateway && !blackhole
				if oif != 0 {
					devs[id] = []uint32{oif}
				}
			}
		}
	}
}

// nlaTypeMask keeps an attribute's type from its nla_type (without
// NLA_F_NESTED and NLA_F_NET_BYTEORDER).
const nlaTypeMask = 1<<14 - 1

// WatchHost keeps p's view of the host current (SetHost) from the calling
// thread's network namespace: it reads it now, and again each time the
// kernel says an address, a route or a nexthop object changed, until stop
// is called. An error reading the view at a change keeps the last one.
func WatchHost(p *Policy) (stop func(), err error) {
	// The re-reads run on the watcher's own thread, which must read the
	// namespace the caller's thread is in, not the process's.
	ns, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(ns)
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, os.NewSyscallError("socket(NETLINK_ROUTE)", err)
	}
	// RTNLGRP_NEXTHOP: replacing a nexthop object changes its routes,
	// with no route notification when nexthop_compat_mode is off.
	groups := uint32(unix.RTMGRP_IPV4_IFADDR|unix.RTMGRP_IPV6_IFADDR|unix.RTMGRP_IPV4_ROUTE|unix.RTMGRP_IPV6_ROUTE) | 1<<(unix.RTNLGRP_NEXTHOP-1)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind(NETLINK_ROUTE)", err)
	}
	// Read through Go's poller, so that Close ends a pending read.
	f := os.NewFile(uintptr(fd), "netlink-route")
	// The view is read once the socket is bound, so that no change falls
	// between the read and the first notification.
	h, err := HostNow()
	if err != nil {
		f.Close()
		return nil, err
	}
	p.SetHost(h)
	entered := make(chan error)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: a thread moved to another namespace ends with
		// the goroutine.
		runtime.LockOSThread()
		if err := enterNetNS(ns); err != nil {
			entered <- err
			return
		}
		entered <- nil
		buf := make([]byte, 64<<10)
		rc, _ := f.SyscallConn()
		// drain discards the notifications already queued: one read of
		// the view, which starts after them, covers them all.
		drain := func() {
			_ = rc.Read(func(fd uintptr) bool {
				for {
					if _, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT); err != nil {
						return true
					}
				}
			})
		}
		var last time.Time
		for {
			_, err := f.Read(buf)
			switch {
			case errors.Is(err, os.ErrClosed):
				return
			case err != nil && !errors.Is(err, syscall.ENOBUFS):
				// ENOBUFS: notifications were lost, which a new read
				// of the whole view makes up for. Anything else:
				// pause rather than spin.
				time.Sleep(100 * time.Millisecond)
			}
			// A host whose routes churn (a router, a busy container
			// host) sends notifications without pause: the view is read
			// at most every minReread, once for all that came meanwhile.
			if wait := minReread - time.Since(last); wait > 0 {
				time.Sleep(wait)
			}
			drain()
			last = time.Now()
			if h, err := HostNow(); err == nil {
				p.SetHost(h)
			}
		}
	}()
	if err := <-entered; err != nil {
		f.Close()
		<-done
		return nil, err
	}
	return func() { f.Close(); <-done }, nil
}

// minReread spaces the watcher's reads of the host's view.
const minReread = 50 * time.Millisecond

// enterNetNS moves the calling thread to the network namespace ns, when
// it is not there already (setns needs CAP_SYS_ADMIN over it, which
// rootfs without root lacks over the host's).
func enterNetNS(ns int) error {
	var want, have unix.Stat_t
	if err := unix.Fstat(ns, &want); err != nil {
		return err
	}
	if err := unix.Stat("/proc/thread-self/ns/net", &have); err != nil {
		return err
	}
	if want.Dev == have.Dev && want.Ino == have.Ino {
		return nil
	}
	return os.NewSyscallError("setns", unix.Setns(ns, unix.CLONE_NEWNET))
}
