package netstack

// What the stack's TCP may hold for the sandbox, in all its connections
// together.
//
// gVisor sizes each endpoint's buffers on its own: receive moderation and
// send buffer auto-tuning grow a busy connection's up to the stack's
// maximum (8 MiB each way here, for one transfer's speed), and nothing
// ever takes that back. A sandbox that first runs fast transfers and then
// stalls them full (an upload to a peer that stops reading, a download it
// stops reading itself) had rootfs hold the maximum for every one of its
// connections: 140 MiB for 24 of them, 16 GiB at DefaultMaxFlows.
//
// So the endpoints share one budget (Options.MaxBuffers): with n live,
// each may hold budget/2n each way (at most maxShare, at least minShare).
// When one opens, the stack's maximum drops to the new share, and every
// live endpoint holding more is set down to it; when one closes, the
// maximum rises again and the auto-tuning grows what is busy. A buffer
// set down below what it holds keeps what it holds and takes nothing
// more until that drains; TCP makes the peer send again what was in
// flight, so a connection slows and loses nothing.

import (
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

const (
	// DefaultMaxBuffers is Options.MaxBuffers's default: 64 KiB each way
	// for every one of DefaultMaxFlows connections at once, 8 MiB each
	// way for up to 8 of them.
	DefaultMaxBuffers = 128 << 20
	// maxShare is the most an endpoint holds each way, as many as there
	// are: what one bulk transfer over the sandbox's link needs.
	maxShare = 8 << 20
	// minShare is the least: a few segments in flight, so that every
	// connection still moves. The budget holds when it is at least
	// 2 × minShare × MaxFlows.
	minShare = 16 << 10
	// defaultShare is where a new endpoint's buffers start.
	defaultShare = 128 << 10
)

// buffers shares a budget among the stack's live TCP endpoints.
type buffers struct {
	s      *stack.Stack
	budget int64
	mu     sync.Mutex
	eps    map[tcpip.Endpoint]struct{}
}

func newBuffers(s *stack.Stack, budget int64) *buffers {
	b := &buffers{s: s, budget: budget, eps: make(map[tcpip.Endpoint]struct{})}
	b.mu.Lock()
	b.setMax()
	b.mu.Unlock()
	return b
}

// add counts ep in, and sets every live endpoint down to the new share.
func (b *buffers) add(ep tcpip.Endpoint) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.eps[ep] = struct{}{}
	share := b.setMax()
	for o := range b.eps {
		ops := o.SocketOptions()
		// notify false: the endpoint's auto-tuning stays on, now under
		// the stack's lower maximum.
		if ops.GetReceiveBufferSize() > share {
			ops.SetReceiveBufferSize(share, false)
		}
		if ops.GetSendBufferSize() > share {
			ops.SetSendBufferSize(share, false)
		}
	}
}

// remove counts ep out.
func (b *buffers) remove(ep tcpip.Endpoint) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.eps, ep)
	b.setMax()
}

// setMax sets the stack's buffer range for the endpoints live now and
// returns their share; b.mu is held.
func (b *buffers) setMax() int64 {
	share := min(max(b.budget/int64(2*max(len(b.eps), 1)), minShare), maxShare)
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: int(min(defaultShare, share)), Max: int(share)}
	b.s.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv)
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: int(min(defaultShare, share)), Max: int(share)}
	b.s.SetTransportProtocolOption(tcp.ProtocolNumber, &snd)
	return share
}
