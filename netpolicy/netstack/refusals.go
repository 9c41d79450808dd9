package netstack

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// Refusal lines: at most refusalBurst at once, then one every
// refusalEvery; the lines not shown are counted and the next line says
// how many.
const (
	refusalBurst = 20
	refusalEvery = 200 * time.Millisecond
)

// Refusal is one connection, datagram or DNS name the policy refused.
type Refusal struct {
	Proto    string // "tcp", "udp" or "dns"
	Dst      string // the destination, or the name asked
	Decision netpolicy.Decision
}

// refusals writes one line per refusal, rate limited, counts all, and
// gives each to hook (Options.Refused) unthrottled.
type refusals struct {
	log   *zap.Logger
	hook  func(Refusal)
	total atomic.Int64
	// mu guards the fields that follow.
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int64
}

func newRefusals(log *zap.Logger, hook func(Refusal)) *refusals {
	return &refusals{log: log, hook: hook, tokens: refusalBurst}
}

// refuse records one refusal of what (a "tcp", "udp" or "dns" dst).
func (r *refusals) refuse(proto, dst string, d netpolicy.Decision) {
	n := r.total.Add(1)
	if r.hook != nil {
		r.hook(Refusal{Proto: proto, Dst: dst, Decision: d})
	}
	r.mu.Lock()
	now := time.Now()
	r.tokens = min(refusalBurst, r.tokens+float64(now.Sub(r.last))/float64(refusalEvery))
	r.last = now
	if r.tokens < 1 {
		r.dropped++
		r.mu.Unlock()
		return
	}
	r.tokens--
	dropped := r.dropped
	r.dropped = 0
	r.mu.Unlock()
	fields := []zap.Field{zap.String("proto", proto), zap.String("dst", dst), zap.String("reason", d.Reason)}
	if d.Hint != "" {
		fields = append(fields, zap.String("allow_with", d.Hint))
	}
	fields = append(fields, zap.Int64("refused", n))
	if dropped > 0 {
		fields = append(fields, zap.Int64("not_shown", dropped))
	}
	r.log.Warn("network: refused", fields...)
}
