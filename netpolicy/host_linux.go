package netpolicy

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HostNow reads the host's side from the calling thread's network
// namespace: its interfaces' addresses, and the networks it reaches
// directly, which are the on-link routes of every table but local (a
// unicast route with no gateway: the LAN, a VPN's networks) and the
// networks of its addresses.
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
	for _, family := range []int{syscall.AF_INET, syscall.AF_INET6} {
		rib, err := syscall.NetlinkRIB(syscall.RTM_GETROUTE, family)
		if err != nil {
			return h, os.NewSyscallError("netlink RTM_GETROUTE", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(rib)
		if err != nil {
			return h, os.NewSyscallError("netlink RTM_GETROUTE", err)
		}
		for _, m := range msgs {
			if p, ok := onLink(m); ok {
				h.Nets = append(h.Nets, p)
			}
		}
	}
	return h, nil
}

// onLink is the destination of m when m is an on-link unicast route.
func onLink(m syscall.NetlinkMessage) (netip.Prefix, bool) {
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
	for _, a := range attrs {
		switch a.Attr.Type {
		case syscall.RTA_GATEWAY, unix.RTA_MULTIPATH, unix.RTA_VIA:
			return netip.Prefix{}, false
		case syscall.RTA_DST:
			dst, _ = netip.AddrFromSlice(a.Value)
		case syscall.RTA_TABLE:
			if len(a.Value) == 4 && *(*uint32)(unsafe.Pointer(&a.Value[0])) == syscall.RT_TABLE_LOCAL {
				return netip.Prefix{}, false
			}
		}
	}
	if !dst.IsValid() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(dst, int(rt.Dst_len)), true
}

// WatchHost keeps p's view of the host current (SetHost) from the calling
// thread's network namespace: it reads it now, and again each time the
// kernel says an address or a route changed, until stop is called. An
// error reading the view at a change keeps the last one.
func WatchHost(p *Policy) (stop func(), err error) {
	h, err := HostNow()
	if err != nil {
		return nil, err
	}
	p.SetHost(h)
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, os.NewSyscallError("socket(NETLINK_ROUTE)", err)
	}
	groups := uint32(unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR | unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind(NETLINK_ROUTE)", err)
	}
	// Read through Go's poller, so that Close ends a pending read.
	f := os.NewFile(uintptr(fd), "netlink-route")
	// The view is read again before the change is first looked at: a
	// change between HostNow and the bind would be missed otherwise.
	if h, err := HostNow(); err == nil {
		p.SetHost(h)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
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
			if h, err := HostNow(); err == nil {
				p.SetHost(h)
			}
		}
	}()
	return func() { f.Close(); <-done }, nil
}
