package netstack

import (
	"encoding/binary"
	"sync"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/rawfile"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/stopfd"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// tunLink is the engine's link endpoint on a TUN queue made with
// IFF_VNET_HDR (internal/linux.CreateTUN): every packet, both ways, starts
// with a struct virtio_net_hdr. gVisor's fdbased endpoint only speaks that
// header on sockets, so this one does it for the TUN:
//
//   - Out (to the sandbox): TCP segments leave with a partial checksum
//     (VIRTIO_NET_HDR_F_NEEDS_CSUM, gVisor's host GSO), so neither the stack
//     nor the sandbox's kernel sums 64 KiB segments: the kernel takes a
//     CHECKSUM_PARTIAL packet it delivers locally as checked.
//   - In (from the sandbox): with TUNSETOFFLOAD(TUN_F_CSUM|TSO), the
//     sandbox's kernel leaves its checksums partial too; the stack does not
//     check them (RX checksum offload, as before).
//   - Packets are delivered from the reading goroutine, with no hand-over
//     to processor goroutines.
type tunLink struct {
	fd   int
	stop stopfd.StopFD
	mtu  uint32

	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher
	wg         sync.WaitGroup
}

const (
	vnetHdrSize        = 10 // struct virtio_net_hdr
	vnetFlagNeedsCsum  = 1  // VIRTIO_NET_HDR_F_NEEDS_CSUM
	vnetGSOTCPv4       = 1  // VIRTIO_NET_HDR_GSO_TCPV4
	vnetGSOTCPv6       = 4  // VIRTIO_NET_HDR_GSO_TCPV6
	tunLinkGSOMaxBytes = 1<<16 - 1
)

func newTUNLink(fd int, mtu uint32) (*tunLink, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, err
	}
	sf, err := stopfd.New()
	if err != nil {
		return nil, err
	}
	return &tunLink{fd: fd, stop: sf, mtu: mtu}, nil
}

// hasVnetHdr reports whether the TUN queue fd was made with IFF_VNET_HDR.
func hasVnetHdr(fd int) bool {
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return false
	}
	if err := unix.IoctlIfreq(fd, unix.TUNGETIFF, ifr); err != nil {
		return false
	}
	return ifr.Uint16()&unix.IFF_VNET_HDR != 0
}

func (l *tunLink) MTU() uint32                             { return l.mtu }
func (l *tunLink) SetMTU(mtu uint32)                       { l.mtu = mtu }
func (l *tunLink) MaxHeaderLength() uint16                 { return 0 }
func (l *tunLink) LinkAddress() tcpip.LinkAddress          { return "" }
func (l *tunLink) SetLinkAddress(tcpip.LinkAddress)        {}
func (l *tunLink) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareNone }
func (l *tunLink) AddHeader(*stack.PacketBuffer)           {}
func (l *tunLink) ParseHeader(*stack.PacketBuffer) bool    { return true }
func (l *tunLink) Close()                                  {}
func (l *tunLink) SetOnCloseAction(func())                 {}
func (l *tunLink) Wait()                                   { l.wg.Wait() }

// Capabilities: received checksums are not checked (the sandbox's kernel
// checked or left them partial); sent ones are the stack's, but for TCP,
// which sends them partial through GSO.
func (l *tunLink) Capabilities() stack.LinkEndpointCapabilities {
	return stack.CapabilityRXChecksumOffload
}

// GSOMaxSize and SupportedGSO make the stack's TCP send segments up to
// 64 KiB with a partial checksum, for the kernel to finish.
func (l *tunLink) GSOMaxSize() uint32               { return tunLinkGSOMaxBytes }
func (l *tunLink) SupportedGSO() stack.SupportedGSO { return stack.HostGSOSupported }

func (l *tunLink) IsAttached() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.dispatcher != nil
}

func (l *tunLink) Attach(d stack.NetworkDispatcher) {
	l.mu.Lock()
	if d == nil {
		if l.dispatcher != nil {
			l.stop.Stop()
			l.dispatcher = nil
		}
		l.mu.Unlock()
		l.wg.Wait()
		return
	}
	defer l.mu.Unlock()
	if l.dispatcher != nil {
		return
	}
	l.dispatcher = d
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.readLoop(d)
	}()
}

// readLoop delivers the sandbox's packets until the link is stopped or
// the queue fails.
func (l *tunLink) readLoop(d stack.NetworkDispatcher) {
	var hdr [vnetHdrSize]byte
	buf := make([]byte, 1<<16)
	iov := []unix.Iovec{rawfile.IovecFromBytes(hdr[:]), rawfile.IovecFromBytes(buf)}
	for {
		n, errno := rawfile.BlockingReadvUntilStopped(l.stop.EFD, l.fd, iov)
		if n <= 0 || errno != 0 {
			if errno == unix.EINTR || errno == unix.EAGAIN {
				continue
			}
			return
		}
		n -= vnetHdrSize
		if n <= 0 {
			continue
		}
		var proto tcpip.NetworkProtocolNumber
		switch header.IPVersion(buf[:n]) {
		case header.IPv4Version:
			proto = header.IPv4ProtocolNumber
		case header.IPv6Version:
			proto = header.IPv6ProtocolNumber
		default:
			continue
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(buf[:n])})
		d.DeliverNetworkPacket(proto, pkt)
		pkt.DecRef()
	}
}

// WritePackets writes each packet with its virtio_net_hdr, one writev
// each; a full queue drops the rest, as a NIC does.
func (l *tunLink) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	n := 0
	for _, pkt := range pkts.AsSlice() {
		if err := l.writePacket(pkt); err != nil {
			if n == 0 {
				return 0, err
			}
			break
		}
		n++
	}
	return n, nil
}

func (l *tunLink) writePacket(pkt *stack.PacketBuffer) tcpip.Error {
	var hdr [vnetHdrSize]byte
	if g := pkt.GSOOptions; g.Type != stack.GSONone {
		binary.LittleEndian.PutUint16(hdr[2:], uint16(pkt.HeaderSize())) // hdr_len
		if g.NeedsCsum {
			hdr[0] = vnetFlagNeedsCsum
			binary.LittleEndian.PutUint16(hdr[6:], g.L3HdrLen)   // csum_start: no link header on a TUN
			binary.LittleEndian.PutUint16(hdr[8:], g.CsumOffset) // csum_offset
		}
		if pkt.Data().Size() > int(g.MSS) {
			switch g.Type {
			case stack.GSOTCPv4:
				hdr[1] = vnetGSOTCPv4
			case stack.GSOTCPv6:
				hdr[1] = vnetGSOTCPv6
			default:
				return &tcpip.ErrNotSupported{}
			}
			binary.LittleEndian.PutUint16(hdr[4:], g.MSS) // gso_size
		}
	}
	views := pkt.AsSlices()
	var arr [8]unix.Iovec
	iov := arr[:0]
	max := len(views) + 1
	iov = rawfile.AppendIovecFromBytes(iov, hdr[:], max)
	for _, v := range views {
		iov = rawfile.AppendIovecFromBytes(iov, v, max)
	}
	if errno := rawfile.NonBlockingWriteIovec(l.fd, iov); errno != 0 {
		return tcpip.TranslateErrno(errno)
	}
	return nil
}
