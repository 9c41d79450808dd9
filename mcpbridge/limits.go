package mcpbridge

import (
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/rootset"
)

// Limits on what a peer can make rootfs hold (see "Limits" in the package doc). They are
// variables so that the flood test's negative control can lift one in a child process.
var (
	// maxWaiters bounds the server's roots/list requests waiting for the first roots. A server
	// asks once or twice; the window lasts until the client's first roots are known, which a
	// server can stretch by never answering initialize.
	maxWaiters = 64
	// maxPending bounds the client's requests forwarded to the server and not yet answered.
	// Interactive clients keep a handful in flight; 1024 leaves room for a busy agent.
	maxPending = 1024
	// maxIDLen bounds, in bytes as sent, an id rootfs keeps (a client request it forwards, a
	// server roots/list it answers): ids are counters or UUIDs. Without it one kept id could be
	// a whole MaxLine.
	maxIDLen = 256
	// maxHeld bounds the client messages held while the first roots are fetched (their bytes
	// are bounded by MaxLine: at most one message at the limit is ever held).
	maxHeld = 256
	// maxRoots bounds the roots of one roots/list result from the client: each becomes an
	// entry of the view, with a descriptor held open. A result with more is refused whole,
	// and the view keeps what it had. It is the bound of a roots file too.
	maxRoots = rootset.MaxRoots
	// maxBatch bounds the elements of one batch (2025-03-26), either way.
	maxBatch = 1024
	// ownBytesLimit bounds, per peer, the bytes of messages rootfs made itself that wait for
	// that peer to read (ownLimit bounds their number).
	ownBytesLimit = 4 << 20
)

// codeLimit is the JSON-RPC error code of a refusal past a limit (implementation-defined
// server error range).
const codeLimit = -32000

// refusalLog logs the refusals of one limit at counts 1, 2, 4, 8, ... so that a flood of refused
// messages does not become a flood of log lines.
type refusalLog struct{ n atomic.Int64 }

func (r *refusalLog) add(log *zap.Logger, msg string, fields ...zap.Field) {
	n := r.n.Add(1)
	if n&(n-1) == 0 {
		log.Warn(msg, append(fields, zap.Int64("refused_so_far", n))...)
	}
}
