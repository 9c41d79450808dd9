// Package mcpbridge is the MCP side of `rootfs run`: it sits between the client's stdio and the
// wrapped server's stdio, owns roots, and passes everything else through byte for byte.
//
//	           ClientIn                                     ServerIn
//	client ───────────▶ clientLoop ──forward (bytes)──▶ toServer ───────────▶ server
//	       ◀─────────── toClient ◀──forward (bytes)── serverLoop ◀─────────── (stdio)
//	           ClientOut     │  ▲                          │         ServerOut
//	                         │  └── roots/list answers ◀───┘ (server's roots/list, from Installer.Table())
//	                         └──▶ Installer.Install(roots) ──▶ list_changed to the server
//
// The client loop owns initialize (edited), notifications/initialized,
// notifications/roots/list_changed, server/discover and the client's replies to rootfs's own
// roots/list. The server loop owns the server's roots/list and its cancels of those.
//
// # Framing
//
// Messages are newline-delimited JSON-RPC 2.0. Each line is validated as JSON and decoded only
// far enough to route it (id, method, presence of result/error); a message rootfs does not own
// is written to the other side exactly as it arrived, plus '\n'. Messages with duplicate
// top-level member names, a jsonrpc other than "2.0", or an id that is not a string or an integer
// are refused, so that what rootfs routes is what every peer parses; for the same reason every
// name rootfs looks up is decoded as a parser decodes it (escapes included), never searched for in
// the raw bytes. From the client, a line that
// is not JSON gets a -32700 reply and an invalid message a -32600 reply (id null); from the
// server, such lines (start-up banners) are dropped with a warning. A line over MaxLine is
// discarded without being buffered and reported the same way. 2025-03-26 batches (arrays) are
// split: if rootfs owns none of the elements the array is forwarded verbatim, otherwise the
// elements it does not own are forwarded as a new array and its own replies go back as one array.
//
// # Roots
//
// The client's initialize is forwarded with capabilities.roots set to {"listChanged":true}
// (edited in place; every other byte kept): the server always gets roots from rootfs. After the
// client's notifications/initialized, if the client declared roots, rootfs asks it for
// roots/list and installs them with Installer.Install. A -32601 answer, or no roots
// capability, uses Static instead. A client that does not answer within RootsTimeout leaves the
// view as it was (fail closed). On notifications/roots/list_changed rootfs fetches again (at most
// one fetch in flight and one queued), swaps, then tells the server with its own
// notifications/roots/list_changed. The server's roots/list is answered by rootfs from
// Installer.Table(), with in-view URIs; until the first roots are known (the client's answer, the
// static roots, or RootsTimeout) it waits, so it is never answered from the table the view starts
// with (the static roots, or the working directory standing in for them, and the pinned roots).
//
// The client's requests and notifications wait too (the hold), in order, from its initialized
// and from each list_changed that starts a fetch, until the server has been given the roots: the
// view swapped, the server's waiting roots/list answered, rootfs's list_changed sent, and then
// rootfs's ping to the server answered. The server reads in order, so by its pong it has read
// all of that; a server that asks roots/list when told sends it before the pong, and rootfs
// answers it and pings again. When the server fetched roots in that cycle, requests that may
// depend on them (all but ping and the tools, prompts and templates lists) wait RootsSettle more:
// servers such as server-filesystem take roots in asynchronously and answer what comes meanwhile
// with the roots they had, none at first. So a tool called right after initialized or
// list_changed finds the server with those roots, not none or the old ones. What the hold costs
// is bounded (see Limits); a fetch that times out (RootsTimeout) or a ping that does (2s; a
// server that never answered one is not pinged again) releases it; the client's responses to
// the server's requests are never held; when the client leaves, what is held is still
// delivered before the server's stdin is closed.
//
// rootfs's own requests to the client use string ids "rootfs-<64-bit random nonce>-<n>": a
// server cannot produce them without seeing them, and the server never sees them (a client
// message carrying one is never forwarded). Should a server learn the prefix anyway, its request
// with an id carrying it is refused with -32600 and its cancel of such an id dropped, neither
// forwarded: the client's answer would carry rootfs's id and be taken for the answer to rootfs's
// roots/list, and a cancel would stop the client answering it. Other server ids pass unchanged
// in both directions. Ids are compared by value, as the peers parse them ("\u0061" is "a", -0 is
// 0), never by spelling. rootfs's pings to the server use "rootfs-<another nonce>-<n>": the
// server sees those, so they share nothing with the ids the server must never learn. A server
// reply with such an id answers rootfs's ping and is not forwarded.
//
// # Era
//
// The 2026-07-28 era is not bridged yet: server/discover is answered with -32601 so dual-era
// clients fall back to initialize on the same process, and a request whose _meta names
// protocol version 2026-07-28 or later is refused with -32022 (data.supported lists the legacy
// versions), so a dual-era server never serves it statelessly, where it would fetch roots from
// the client through MRTR results around rootfs.
//
// # Limits
//
// Everything a peer can make rootfs hold is bounded, and a message past a bound is refused, never
// kept: a request gets a JSON-RPC error (code -32000, or -32600 for a malformed one) and its
// sender is served as before; a notification or a server's response is dropped and logged (the
// logs of one bound at its 1st, 2nd, 4th, 8th... refusal, so a flood does not flood stderr).
//
//   - A message: MaxLine bytes (16 MiB, go-sdk's limit), refused while it is read, unbuffered.
//   - A batch: 1024 elements (maxBatch); larger ones are refused whole before being split.
//   - The client's requests in flight to the server: 1024 (maxPending), each id at most 256 bytes
//     (maxIDLen; ids are counters or UUIDs). Without the id bound one entry could be a MaxLine.
//   - The server's roots/list waiting for the first roots: 64 (maxWaiters). That window lasts
//     until the client's roots are known, which a server can stretch by never answering
//     initialize; a server asks once or twice. Past it the server gets an error at once.
//     Answered ids remembered for late cancels: 256 (answeredMemory).
//   - Client messages held for the roots (see Roots): 256 (maxHeld) and MaxLine bytes in all: the
//     hold costs at most one message at the limit. Past it a request gets -32000 saying why, and
//     a notification is dropped and logged.
//   - Roots in one roots/list result: 1024 (maxRoots), each an entry with a descriptor open. A
//     result with more is refused whole: the view keeps what it had (none, before the first
//     answer, without static roots), and one warning names the bound.
//   - Messages rootfs made for a peer that does not read them: 4096 and 4 MiB per peer (ownLimit,
//     ownBytesLimit); past that they are dropped and logged.
//   - The server's requests to the client, and the client's answers to them, are forwarded
//     without keeping anything, so they need no table; rootfs's own roots/list to the client is
//     one in flight and one queued, however many list_changed arrive.
//
// So what a hostile peer can make rootfs hold is about 2 × MaxLine of line buffers, one MaxLine
// held, and a few MiB of tables and queues. The flood test (1M roots/list from a server that never
// answers initialize, through a bridge in its own process) checks peak RSS stays under 64 MiB.
//
// # Files
//
// wire.go and compose.go are the wire format and nothing else (no I/O, no state): wire.go what
// rootfs reads (the JSON scanner, the routing envelope and its typed id, msgID, one batch split
// for both directions, the params rootfs reads), compose.go what it writes (its replies, requests
// and notifications, one batch join for both directions, and the initialize edit). frame.go is
// the transport: bounded line reading and one write(2) per message. router.go reads each side
// and decides, per message, what to answer, forward or hold. Two small types keep the session's
// state, each under its own lock: forwarded.go (the client's requests in flight) and roots.go
// (the roots state machine: what the client declared, the fetch and its queue, the server's
// waiters), whose hold parts (the held messages, the ping that ends the hold, the settle) are
// in hold.go; rootsio.go is the Bridge's I/O for the roots, which that state machine decides and
// the Bridge carries out. limits.go holds the limits listed above. ended.go is what the client
// is told when no server will answer it: Refuse for a session that could not start, and the
// Bridge's answer to an initialize the server left unanswered (it waits at most ClientWait for
// one the client has not sent yet).
//
// # Concurrency and deadlocks
//
// One goroutine reads each side and writes what it forwards itself, straight to the other side's
// pipe (one write(2) per message, under that side's write lock): handing messages to a writer
// goroutine would cost a thread wakeup per message, which is most of the latency a bridge adds.
// A forward blocks while the other side does not read (backpressure to its sender). Messages
// rootfs makes itself never block: they are queued and written by the next forward to that side
// or by a goroutine started for them, so a reader never waits on the writer of the other
// direction. Without that, a server blocked writing its stdout while rootfs blocked writing its
// stdin (answering the server's roots/list) would deadlock.
// A server that stops reading its stdin does stall the client's forwarded traffic (and with it
// rootfs's reading of the client, so a client EOF is noticed only once the write completes); the
// caller's SIGTERM handling cancels Run's context, which closes the server's stdin regardless.
// Run waits for a handler in progress before it returns, so nothing calls the Installer afterwards.
// A forward to the server is part of the client loop's handler (Run closes the server's stdin
// first, which ends a stuck write); the server loop forwards to the client after its handler,
// since Run never closes the client's stdout. Held messages are forwarded by whoever ends the
// hold: a timer, or, when the server's pong ends it, a goroutine of its own (the server loop
// must keep reading the server); relMu keeps two releases from interleaving.
package mcpbridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rootfs-dev/rootfs/rootset"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
)

// RootInstaller is the bridge's one way to touch files: it installs roots, under the view's own
// rules, and says what is installed. The bridge never opens a path itself; whatever sits behind
// this seam (vfs.View, or mountmgr.RootBinds, which installs into the view and then lays the
// kernel's binds) decides what a root becomes.
type RootInstaller interface {
	// Table returns the current table (immutable, never nil).
	Table() *rootset.Table
	// Install builds a table from roots under the view's rules and swaps it in (see
	// vfs.View.Install). On error the view keeps what it served, except when only the kernel's
	// invalidation failed. The table is returned either way, for its Skipped roots. It is called
	// from the bridge's reader goroutine, never from a FUSE handler.
	Install([]rootset.Root) (*rootset.Table, error)
}

// Options configures a Bridge. ClientIn, ClientOut, ServerIn, ServerOut and Installer are required.
type Options struct {
	ClientIn  io.Reader      // the client's messages (rootfs's stdin)
	ClientOut io.Writer      // to the client (rootfs's stdout: nothing else may write to it)
	ServerIn  io.WriteCloser // the server's stdin; closed by Run before it returns
	ServerOut io.Reader      // the server's stdout

	// Installer receives the roots; every root it leaves out is logged with its reason.
	Installer RootInstaller
	// Static are the roots used when the client has no roots capability or answers roots/list
	// with -32601 (from --root / --roots-file). Empty: the view stays empty and rootfs warns.
	Static []rootset.Root
	// Pinned are roots installed with every set, the client's or Static: the directories the
	// server's own arguments name, which the server checks when it starts and keeps (see
	// run's argument roots). They count as roots for NoRoots.
	Pinned []rootset.Root
	// NoRoots, when not nil, is how Run ends if the client turns out to declare no roots (no
	// roots capability, or -32601 to roots/list) and Static is empty: the caller had nothing to
	// fall back to and refuses rather than serve an empty view. Run returns it unwrapped, after
	// the usual client-side shutdown (the server's stdin is closed). Nil: the view stays empty
	// and rootfs warns once.
	NoRoots error

	// ServerExit, when not nil, tells how the server ended, for the errors that answer the
	// client's requests it left unanswered (initialize included): their message names the exit
	// status and the server's last line of stderr. Run calls it at most once, after the server
	// closed its stdout, and it may wait briefly (a second or so) for the server to exit. Nil:
	// the messages say only that the server exited.
	ServerExit func() ExitInfo

	// RootsTimeout bounds the wait for the client's roots/list answer and the server's wait for
	// the first roots. Zero means 10s.
	RootsTimeout time.Duration
	// ClientWait bounds the wait for the client's initialize when the server ended before
	// answering one. Zero means ClientWait.
	ClientWait time.Duration
	// RootsSettle is how long, once the server has fetched new roots, the client's requests that
	// may depend on them keep waiting (see "# Roots"): servers such as server-filesystem take roots
	// in asynchronously and answer what arrives meanwhile without them. Zero: no wait (the
	// --roots-settle flag's default is DefaultRootsSettle).
	RootsSettle time.Duration
	// MaxLine is the largest message accepted, in bytes, either way. Zero means DefaultMaxLine.
	MaxLine int
	// Logger receives logs (stderr); nil means zap.NewNop().
	Logger *zap.Logger

	// Installed, when not nil, is told of each install the bridge makes: where the roots came
	// from ("client", or "static" for the roots it falls back on), the table the installer
	// built (nil when Install failed) and Install's error. It runs on the bridge's goroutine,
	// before the server hears of the change: it must not block.
	Installed func(source string, t *rootset.Table, err error)
	// ClientInfo, when not nil, is told the client's name and version from its initialize.
	ClientInfo func(name, version string)
}

// Sentinel errors returned by Run, wrapped with the cause; the caller branches on which side ended.
var (
	// ErrClientClosed: the client closed rootfs's stdin (or its stdout broke). The server's
	// stdin has been closed; the caller now waits for the server, then SIGTERM, then SIGKILL.
	ErrClientClosed = errors.New("client closed the connection")
	// ErrServerClosed: the server closed its stdout (or its stdin broke). The client's pending
	// requests have been answered with errors, and so has its initialize if it came within
	// ClientWait (a server that ends before the client spoke); the caller exits with the
	// server's status.
	ErrServerClosed = errors.New("server closed the connection")
)

// Error codes rootfs sends (JSON-RPC 2.0 / MCP).
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInternalError  = -32603
	// codeUnsupportedProtocolVersion is 2026-07-28's UnsupportedProtocolVersion (mcp.CodeUnsupportedProtocolVersion).
	codeUnsupportedProtocolVersion = -32022
)

// DefaultRootsSettle is --roots-settle's default. server-filesystem took one root in 12ms after
// reading it at the median, 80ms at the 90th percentile and 420ms at worst, over 100 sessions
// four at a time on 2 cores at load 10; a few milliseconds when the machine is quiet.
const DefaultRootsSettle = 250 * time.Millisecond

const (
	defaultRootsTimeout = 10 * time.Second
	// flushTimeout bounds how long Run waits to deliver what is queued when a side ends
	// (clients kill rootfs about 2 s after closing its stdin).
	flushTimeout = 500 * time.Millisecond
	// answeredMemory is how many rootfs-answered server roots/list ids are remembered so that
	// a late notifications/cancelled for one of them is swallowed.
	answeredMemory = 256
	// pingTimeout bounds the wait for the server's answer to rootfs's ping after a swap (see
	// "# Roots"). Servers answer ping at once (the spec requires it); one that ignores it holds
	// the client's messages this long, once.
	pingTimeout = 2 * time.Second
)

// Bridge routes one MCP session. Create it with New; Run it once.
//
// Its state is in small types, each with its own lock: the peers' writers (peerWriter), the
// client's requests in flight (forwarded), the roots state machine (rootsState) and the client's
// initialize (initState); none of those locks is held while another is taken. The wire format
// is in wire.go. Lock order: hmu, then relMu, then any one of the small types' locks.
type Bridge struct {
	opts   Options
	log    *zap.Logger
	prefix string // "rootfs-<nonce>-": every id rootfs sends to the client starts with it
	// srvPrefix ("rootfs-<another nonce>-") starts every id rootfs sends to the server: the
	// server sees it, so it shares nothing with prefix, which the server must never see.
	srvPrefix string

	toClient *peerWriter
	toServer *peerWriter
	pending  *forwarded  // the client's requests forwarded to the server, not yet answered
	roots    *rootsState // fetch, queue, hold, waiters
	init     *initState  // the client's initialize, for a server that ends before answering it
	exitMsg  func() string

	life lifecycle
	// relMu serialises the releases of held messages, which may start on the client loop, a
	// timer or a goroutine of their own, so that they reach the server in order.
	relMu sync.Mutex
	// hmu is held (shared) while a line or timer is handled and taken exclusively by Run before it
	// returns, so that no handler touches the Installer after Run returned.
	hmu sync.RWMutex

	refused refusals
}

// lifecycle is how far Run has got, for the loops, handlers and timers that must stop with it.
// Its channels are made by New and never replaced.
type lifecycle struct {
	ran     atomic.Bool
	ended   chan endCause // first side to end
	closing chan struct{} // closed when Run starts shutting down
	done    chan struct{} // closed when Run returns
}

// refusals are the refusals past each limit, for rate-limited logs.
type refusals struct {
	waiters refusalLog // the server's roots/list past maxWaiters
	pending refusalLog // the client's requests past maxPending
	held    refusalLog // the client's messages past the hold's bounds
	batch   refusalLog // batches past maxBatch, either way
	own     refusalLog // rootfs's own messages dropped for a peer that does not read
}

type endCause struct {
	client bool
	err    error
}

// AddFlags registers the bridge's tunables (--roots-timeout, --roots-settle, --max-line) on f, with
// their defaults.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.DurationVar(&o.RootsTimeout, "roots-timeout", defaultRootsTimeout,
		"how long to wait for the client's roots/list answer before keeping the previous view")
	f.DurationVar(&o.RootsSettle, "roots-settle", DefaultRootsSettle,
		"how long requests that may use new roots wait once the server has fetched them, for servers that take roots in asynchronously (0: not at all)")
	f.IntVar(&o.MaxLine, "max-line", DefaultMaxLine, "largest MCP message accepted, in bytes")
}

// New checks opts and returns a Bridge.
func New(opts Options) (*Bridge, error) {
	switch {
	case opts.ClientIn == nil || opts.ClientOut == nil:
		return nil, errors.New("mcpbridge: ClientIn and ClientOut are required")
	case opts.ServerIn == nil || opts.ServerOut == nil:
		return nil, errors.New("mcpbridge: ServerIn and ServerOut are required")
	case opts.Installer == nil:
		return nil, errors.New("mcpbridge: Installer is required")
	}
	if opts.RootsTimeout <= 0 {
		opts.RootsTimeout = defaultRootsTimeout
	}
	if opts.ClientWait <= 0 {
		opts.ClientWait = ClientWait
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	var nonce [16]byte // two: one for the ids rootfs sends the client, one for the server
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("mcpbridge: random id nonce: %w", err)
	}
	prefix := "rootfs-" + hex.EncodeToString(nonce[:8]) + "-"
	srvPrefix := "rootfs-" + hex.EncodeToString(nonce[8:]) + "-"
	b := &Bridge{
		opts:      opts,
		log:       log,
		prefix:    prefix,
		srvPrefix: srvPrefix,
		pending:   newForwarded(),
		init:      newInitState(),
		life: lifecycle{
			ended:   make(chan endCause, 4),
			done:    make(chan struct{}),
			closing: make(chan struct{}),
		},
	}
	b.roots = newRootsState(prefix, srvPrefix, opts.RootsTimeout, opts.RootsSettle, opts.MaxLine, rootsHooks{
		fetchTimeout:   b.fetchTimedOut,
		waiterTimeout:  b.waiterTimedOut,
		barrierTimeout: b.barrierTimedOut,
		settled:        b.releaseHeldLocked,
	})
	b.exitMsg = sync.OnceValue(func() string {
		if opts.ServerExit == nil {
			return "rootfs: the server exited before answering"
		}
		return opts.ServerExit().message()
	})
	return b, nil
}

// Run routes messages until one side ends or ctx is done, and returns an error wrapping
// ErrClientClosed or ErrServerClosed (or ctx.Err()). It always closes ServerIn before returning.
// It does not close ClientIn or wait for a read blocked on it: the caller exits or closes it.
// The bridge never starts or signals processes.
func (b *Bridge) Run(ctx context.Context) error {
	if !b.life.ran.CompareAndSwap(false, true) {
		return errors.New("mcpbridge: Run called twice")
	}
	defer close(b.life.done)
	b.toClient = newPeerWriter(b.opts.ClientOut, func(err error) {
		b.end(true, fmt.Errorf("writing to the client: %w", err))
	})
	b.toServer = newPeerWriter(b.opts.ServerIn, func(err error) {
		b.end(false, fmt.Errorf("writing to the server: %w", err))
	})
	go b.clientLoop()
	go b.serverLoop()

	var cause endCause
	select {
	case cause = <-b.life.ended:
	case <-ctx.Done():
		cause = endCause{client: true, err: ctx.Err()}
	}
	if !cause.client {
		// Nothing more reaches the server; the client loop still runs, to answer an
		// initialize that has not come yet with why the server ended.
		b.toServer.stopNow()
		b.opts.ServerIn.Close()
		b.awaitInitialize(ctx)
	}
	close(b.life.closing)
	b.stopTimers()
	start := time.Now()
	defer func() {
		// Queues are stopped by now, so a handler blocked on one has returned or will.
		b.hmu.Lock()
		//lint:ignore SA2001 a barrier: wait for the handlers in progress
		b.hmu.Unlock()
	}()
	if cause.client {
		// Deliver what the server should still see (a last notification, and what was held
		// for the roots: the hold delays the client's messages, it never drops them), then
		// close its stdin: that is the spec's first shutdown step. Also flush replies to the
		// client (a server/discover probe followed by EOF must get its answer).
		b.flushHeld(flushTimeout)
		b.toServer.closeAfterDrain(flushTimeout)
		b.toServer.stopNow()
		cerr := b.opts.ServerIn.Close()
		b.toClient.closeAfterDrain(flushTimeout)
		b.toClient.stopNow()
		b.log.Debug("client side ended", zap.Error(cause.err), zap.Duration("shutdown", time.Since(start)),
			zap.NamedError("close_server_stdin", cerr))
		if errors.Is(cause.err, context.Canceled) || errors.Is(cause.err, context.DeadlineExceeded) ||
			b.opts.NoRoots != nil && errors.Is(cause.err, b.opts.NoRoots) {
			return cause.err
		}
		return fmt.Errorf("%w: %v", ErrClientClosed, cause.err)
	}
	b.failPending()
	b.toClient.closeAfterDrain(flushTimeout)
	b.toClient.stopNow()
	b.log.Debug("server side ended", zap.Error(cause.err), zap.Duration("shutdown", time.Since(start)))
	return fmt.Errorf("%w: %v", ErrServerClosed, cause.err)
}

func (b *Bridge) end(client bool, err error) {
	select {
	case b.life.ended <- endCause{client: client, err: err}:
	default:
	}
}

func (b *Bridge) isDone() bool {
	select {
	case <-b.life.closing:
		return true
	default:
		return false
	}
}

func (b *Bridge) stopTimers() { b.roots.stopTimers() }

// awaitInitialize runs when the server has ended: unless the client's initialize is already
// forwarded (failPending answers it), it has the client loop answer the next requests with why
// the server ended, and waits at most ClientWait for an initialize among them, so the client
// shows the reason rather than a closed connection.
func (b *Bridge) awaitInitialize(ctx context.Context) {
	if !b.init.serverGone(b.exitMsg()) {
		return
	}
	t := time.NewTimer(b.opts.ClientWait)
	defer t.Stop()
	for {
		select {
		case <-b.init.settled:
			return
		case c := <-b.life.ended:
			if c.client {
				return
			}
		case <-t.C:
			b.log.Debug("the server ended and the client sent no initialize to tell it why", zap.Duration("waited", b.opts.ClientWait))
			return
		case <-ctx.Done():
			return
		}
	}
}

// flushHeld forwards every held message, in order, waiting at most d (a forward the server does
// not take ends when Run closes its stdin).
func (b *Bridge) flushHeld(d time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.relMu.Lock()
		defer b.relMu.Unlock()
		for _, m := range b.roots.drainHeld() {
			if b.toServer.forward(m) != nil {
				return
			}
		}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// failPending answers every forwarded client request the server left unanswered.
func (b *Bridge) failPending() {
	ids := b.pending.drain()
	if len(ids) == 0 {
		return
	}
	msg := b.exitMsg()
	for _, id := range ids {
		b.sendClient(errorReply(id, codeInternalError, msg, nil))
	}
	if len(ids) > 0 {
		b.log.Warn("server exited with requests pending; answered them with errors", zap.Int("requests", len(ids)))
	}
}

// sendClient queues a message rootfs made itself (never blocks).
func (b *Bridge) sendClient(msg []byte) {
	if err := b.toClient.send(msg); err != nil && !errors.Is(err, errQueueStopped) {
		b.refused.own.add(b.log, "dropped a message to the client", zap.Error(err))
	}
}

func (b *Bridge) sendServer(msg []byte) {
	if err := b.toServer.send(msg); err != nil && !errors.Is(err, errQueueStopped) {
		b.refused.own.add(b.log, "dropped a message to the server", zap.Error(err))
	}
}
