package netstack

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// Refusal lines: at most refusalBurst at once, then one every
// refusalEvery; a refusal the same as one shown within refusalRepeat
// (the A and AAAA questions for one name, a client's retries) gets no
// line of its own. The lines not shown are counted and the next line
// says how many.
const (
	refusalBurst  = 20
	refusalEvery  = 200 * time.Millisecond
	refusalRepeat = 5 * time.Second
	// refusalRecent bounds the refusals remembered for refusalRepeat;
	// past it those older than refusalRepeat are forgotten, or all when
	// none is, and a repeat may then be shown again.
	refusalRecent = 256
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
	now   func() time.Time
	// mu guards the fields that follow.
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int64
	shown   map[Refusal]time.Time // lines shown within refusalRepeat
}

func newRefusals(log *zap.Logger, hook func(Refusal)) *refusals {
	return &refusals{log: log, hook: hook, tokens: refusalBurst, now: time.Now, shown: map[Refusal]time.Time{}}
}

// repeatLocked says whether k was shown within refusalRepeat of now; if
// not, it remembers k as shown now. r.mu is held.
func (r *refusals) repeatLocked(k Refusal, now time.Time) bool {
	if at, ok := r.shown[k]; ok && now.Sub(at) < refusalRepeat {
		return true
	}
	if len(r.shown) >= refusalRecent {
		for old, at := range r.shown {
			if now.Sub(at) >= refusalRepeat {
				delete(r.shown, old)
			}
		}
		if len(r.shown) >= refusalRecent {
			clear(r.shown)
		}
	}
	r.shown[k] = now
	return false
}

// refuse records one refusal of what (a "tcp", "udp" or "dns" dst).
func (r *refusals) refuse(proto, dst string, d netpolicy.Decision) {
	n := r.total.Add(1)
	if r.hook != nil {
		r.hook(Refusal{Proto: proto, Dst: dst, Decision: d})
	}
	r.mu.Lock()
	now := r.now()
	r.tokens = min(refusalBurst, r.tokens+float64(now.Sub(r.last))/float64(refusalEvery))
	r.last = now
	if r.tokens < 1 || r.repeatLocked(Refusal{Proto: proto, Dst: dst, Decision: d}, now) {
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
