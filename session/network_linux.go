package session

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/internal/seccomp"
	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/netpolicy"
	"github.com/rootfs-dev/rootfs/netpolicy/netstack"
)

// connector hands the sandbox's connect(2)s (ServerOptions.Connect) to
// the engine's fast path. The server starts before the engine, so a call
// made in between waits for startNetwork (at most readyWait): without a
// TUN the fast path is the only way out, and a call let run would meet
// no route. Without an engine they run as made.
type connector struct {
	eng   atomic.Pointer[netstack.Engine]
	ready chan struct{} // closed by started
	once  sync.Once
}

// readyWait bounds how long a connect(2) waits for the engine.
const readyWait = 10 * time.Second

func newConnector() *connector { return &connector{ready: make(chan struct{})} }

// started says the engine runs (stored in eng), or never will.
func (c *connector) started() { c.once.Do(func() { close(c.ready) }) }

func (c *connector) connect(call *seccomp.Call) seccomp.Answer {
	select {
	case <-c.ready:
	default:
		t := time.NewTimer(readyWait)
		select {
		case <-c.ready:
		case <-t.C:
		}
		t.Stop()
	}
	if e := c.eng.Load(); e != nil {
		return e.SeccompConnect(call)
	}
	return seccomp.Answer{Continue: true}
}

// busy answers a connect(2) beyond those connect answers at once; it
// must not wait.
func (c *connector) busy(call *seccomp.Call) seccomp.Answer {
	if e := c.eng.Load(); e != nil {
		return e.SeccompBusy(call)
	}
	return seccomp.Answer{Continue: true}
}

// shortSlice is P1's scheduler slice while the server has a network.
const shortSlice = 100 * time.Microsecond

// startNetwork runs, in P1, the engine on the sandbox's TUN device and
// relays its localhost ports, and gives the engine to fast. The returned
// stop closes it all; files are the engine's from here, also on error.
// Refusals also go to refused (the audit stream), when it is not nil.
func startNetwork(o NetOptions, files *mountmgr.NetFiles, fast *connector, refused func(netstack.Refusal), log *zap.Logger) (stop func(), err error) {
	if files.TUN == nil && !files.TCPOnly() {
		log.Warn("network: the server has no network (as with --no-network): the sandbox cannot use /dev/net/tun here; "+tunFix+" to share the host's, unfiltered",
			zap.String("error", files.Unavailable))
		files.Close()
		return func() {}, nil
	}
	if files.TCPOnly() {
		// TCP and DNS still go through rootfs, by the fast path and the
		// resolver on lo; the rest has no route.
		log.Info("network: no /dev/net/tun here, so TCP and DNS only: UDP (QUIC, which falls back to TCP) and ping have no route; "+tunFix2,
			zap.String("error", files.Unavailable))
	}
	pol, err := NetPolicy(false, o, nil)
	if err != nil {
		files.Close()
		return nil, err
	}
	// P1 answers each of the server's connect(2) calls and relays its
	// bytes: short scheduler slices let it run as soon as it wakes, also
	// while the machine is busy, which about halves what the fast path
	// adds to a connection's set-up p99 under load (BENCHMARKS.md). The
	// server was started before this, so it keeps the kernel's default.
	if err := linux.ShortSlice(shortSlice); err != nil {
		log.Debug("network: short scheduler slices", zap.Error(err))
	}
	// The host's addresses and on-link networks, kept current: a host
	// gains addresses while the server runs (IPv6 temporary addresses, a
	// VPN coming up).
	stopWatch, err := netpolicy.WatchHost(pol)
	if err != nil {
		h, _ := netpolicy.HostNow()
		pol.SetHost(h)
		stopWatch = func() {}
		log.Warn("network: the host's addresses are read once, not followed", zap.Error(err))
	}
	eng, err := netstack.New(files.TUN, netstack.Options{Policy: pol, Logger: log, Refused: refused, Upstream: o.DNS, IPv6: files.IPv6})
	if err != nil {
		stopWatch()
		files.Close()
		return nil, err
	}
	if files.Relay != nil {
		nl, err := net.FileListener(files.Relay)
		files.Relay.Close()
		tl, ok := nl.(*net.TCPListener)
		switch {
		case err != nil || !ok:
			log.Warn("network: no fast path: the relay listener", zap.Error(err))
		default:
			if err := eng.ServeRelay(tl); err != nil {
				log.Warn("network: no fast path", zap.Error(err))
			} else {
				fast.eng.Store(eng)
			}
		}
	}
	if files.DNS != nil {
		if err := serveDNS(eng, files); err != nil {
			log.Warn("network: the resolver on lo", zap.Error(err))
		}
	}
	for _, l := range files.Local {
		nl, err := net.FileListener(l.File)
		l.File.Close()
		if err != nil {
			log.Warn("network: localhost port", zap.Uint16("port", l.Port), zap.Error(err))
			continue
		}
		eng.ServeLocal(nl, l.Port)
	}
	// An --allow-net name that does not resolve now is worth a warning,
	// not a failure (it may later); off the start-up path.
	go func() {
		for _, r := range pol.NameRules() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			if _, err := net.DefaultResolver.LookupNetIP(ctx, "ip", r.Name); err != nil {
				log.Warn("network: an allowed name does not resolve now", zap.String("rule", r.Text), zap.Error(err))
			}
			cancel()
		}
	}()
	return func() {
		fast.eng.Store(nil)
		st := eng.Stats()
		eng.Close()
		stopWatch()
		log.Debug("network: stopped", zap.Int64("tcp", st.TCPAllowed), zap.Int64("tcp_fast", st.TCPFast), zap.Int64("udp", st.UDPAllowed), zap.Int64("dns", st.DNSAnswered), zap.Int64("refused", st.Refused), zap.Int64("localhost", st.Local))
	}, nil
}

// serveDNS gives the engine the resolver's sockets on lo (no TUN).
func serveDNS(eng *netstack.Engine, files *mountmgr.NetFiles) error {
	pc, err := net.FilePacketConn(files.DNS)
	files.DNS.Close()
	nl, lerr := net.FileListener(files.DNSTCP)
	files.DNSTCP.Close()
	u, ok := pc.(*net.UDPConn)
	tl, tok := nl.(*net.TCPListener)
	if err != nil || lerr != nil || !ok || !tok {
		for _, c := range []io.Closer{pc, nl} {
			if c != nil {
				c.Close()
			}
		}
		return errors.Join(err, lerr, errors.New("not a UDP socket and a TCP listener"))
	}
	eng.ServeDNS(u, tl)
	return nil
}
