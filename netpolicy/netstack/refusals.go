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

// refusals writes one line per refusal, rate limited, and counts all.
type refusals struct {
	log   *zap.Logger
	total atomic.Int64
	// mu guards the fields that follow.
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int64
}

func newRefusals(log *zap.Logger) *refusals {
	return &refusals{log: log, tokens: refusalBurst}
}

// refuse records one refusal of what (a "tcp", "udp" or "dns" dst).
func (r *refusals) refuse(proto, dst string, d netpolicy.Decision) {
	n := r.total.Add(1)
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
