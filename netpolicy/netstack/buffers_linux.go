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
// So the endpoints share one budget B (Options.MaxBuffers): with n live
// out of at most N (MaxFlows), each may hold B / (2 n H(N)) each way,
// H(N) = 1 + 1/2 + ... + 1/N (at most maxShare, at least minShare). When
// one opens, the stack's maximum drops to the new share, and every live
// endpoint holding more is set down to it; when one closes, the maximum
// rises again and the auto-tuning grows what is busy.
//
// A buffer set down below what it holds keeps what it holds (TCP never
// takes back a window it advertised); it takes nothing more until that
// drains, and a connection slows but loses nothing. That is why the
// share is divided by H(N), not just by n: the most a sandbox can make
// the stack hold is to fill each connection as it opens and never drain
// it, the k-th then holding the share of k connections, and those shares
// add up to B H(n)/H(N) ≤ B. Out-of-order segments (up to three quarters
// of a receive buffer more) and the minShare floor (2 N minShare) come on
// top. Closed connections count until their endpoint is done
// (stackConn.finish).

import (
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

const (
	// DefaultMaxBuffers is Options.MaxBuffers's default: with
	// DefaultMaxFlows, each way 8 MiB for 1 connection, 1 MiB for 8,
	// 64 KiB (minShare) from 136 on.
	DefaultMaxBuffers = 128 << 20
	// maxShare is the most an endpoint holds each way, as many as there
	// are: what one bulk transfer over the sandbox's link needs.
	maxShare = 8 << 20
	// minShare is the least, so that every connection still moves.
	minShare = 64 << 10
	// defaultShare is where a new endpoint's buffers start.
	defaultShare = 128 << 10
)

// buffers shares a budget among the stack's live TCP endpoints.
type buffers struct {
	s *stack.Stack
	// per is the budget divided by 2 H(MaxFlows): a share is per/n.
	per int64
	mu  sync.Mutex
	eps map[tcpip.Endpoint]struct{}
}

func newBuffers(s *stack.Stack, budget int64, maxFlows int) *buffers {
	h := 0.0
	for k := 1; k <= maxFlows; k++ {
		h += 1 / float64(k)
	}
	b := &buffers{s: s, per: int64(float64(budget) / (2 * h)), eps: make(map[tcpip.Endpoint]struct{})}
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
	share := min(max(b.per/int64(max(len(b.eps), 1)), minShare), maxShare)
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: int(min(defaultShare, share)), Max: int(share)}
	b.s.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv)
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: int(min(defaultShare, share)), Max: int(share)}
	b.s.SetTransportProtocolOption(tcp.ProtocolNumber, &snd)
	return share
}
