package session

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/mcpbridge"
	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/mountmgr/kpath"
	"github.com/rootfs-dev/rootfs/rootset"
	"github.com/rootfs-dev/rootfs/vfs"
)

// MountError is the view's FUSE mount failing: the caller explains it (what the machine
// lacks, and the fix).
type MountError struct{ Err error }

func (e *MountError) Error() string { return e.Err.Error() }
func (e *MountError) Unwrap() error { return e.Err }

// Session is one wrapped server with its view, data path and bridge, between Start and Wait.
type Session struct {
	log     *zap.Logger
	grace   time.Duration
	srv     *mountmgr.Server
	br      *mcpbridge.Bridge
	sigs    chan os.Signal
	noRoots error
	vis     *visibility
	// release undoes the start, last step first (see onRelease).
	release []func()
}

// onRelease registers f to run when the session ends (Wait), or when Start fails after this
// point: what starts later stops earlier.
func (s *Session) onRelease(f func()) { s.release = append(s.release, f) }

func (s *Session) releaseAll() {
	for _, f := range slices.Backward(s.release) {
		f()
	}
	s.release = nil
}

// Start assembles the session in the daemon (P1): the plan, the view and its FUSE mount at a
// private mount point, the kernel data path, then the server in its sandbox whose / is the
// mount, and the bridge between the client's stdio and the server's. The order matters: the
// view holds the roots at start and is mounted before the server starts, so a server given a
// root finds it.
//
//	roots at start ─▶ table ─▶ view ─▶ FUSE mount (private to this namespace) ◀─ root binds
//	                                          │
//	client stdio ◀─▶ bridge ◀─▶ server stdio (sandbox whose / is the mount)
//
// After a Start that succeeded, the caller must call Wait once: it runs the bridge and
// releases everything. A Start that fails has released what it made.
func Start(ctx context.Context, o Options, log *zap.Logger) (_ *Session, err error) {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Session{log: log, grace: o.Grace}
	defer func() {
		if err != nil {
			s.releaseAll()
		}
	}()

	// What the session starts with, and the sandbox's spec.
	p, err := Resolve(&o, log)
	if err != nil {
		return nil, err
	}
	// The audit stream, which every plane below reports to.
	if s.vis, err = newVisibility(&o, log); err != nil {
		return nil, err
	}
	s.onRelease(s.vis.close)
	spec, initial := p.Spec, p.Initial()
	s.noRoots = p.NoRoots
	// The layers that keep the server's writes to a launcher cache, held
	// (locked) until the session ends.
	if !o.Sandbox.DiscardCacheWrites && layers(&o) == "" {
		for _, b := range spec.Binds {
			if b.Overlay {
				log.Warn("launcher cache: no state directory ($HOME and $XDG_STATE_HOME are unset) to keep the server's writes in; they vanish when the session ends", zap.String("cache", b.Dest))
			}
		}
	}
	s.onRelease(mountmgr.PrepareLayers(spec, log))

	// The view: the roots at start, under the session's rules, at a private mount point.
	written, err := p.writable.writeSet()
	if err != nil {
		return nil, err
	}
	s.onRelease(func() { written.Close() })
	placeholders := p.placeholders()
	kernelPath := kernelPathWanted(o.Strict, log)
	view := vfs.NewView(p.viewOptions(written, placeholders, kernelPath, s.vis.alog, log))
	s.onRelease(func() { view.Close() })
	mnt, cleanup, err := mountmgr.PrivateMountDir(hostPaths(initial)...)
	if err != nil {
		return nil, err
	}
	s.onRelease(cleanup)
	first, err := view.Install(initial)
	logSkipped(log, first)
	if err != nil {
		return nil, err
	}
	source := "start"
	if len(p.Static) == 0 && len(p.Pinned) == 0 {
		source = "cwd" // standing in until the client's roots arrive
	}
	s.vis.installed(source, first, nil)
	// The view owns first now (view.Close releases it).
	p.writable.startTable(first, p.Fallback)
	if err := p.writable.checkBindSources(spec.Binds); err != nil {
		return nil, err
	}
	if in := p.InView; in != nil {
		if e := first.Lookup(in.entry); e == nil || e.HostPath != in.host {
			return nil, fmt.Errorf("%w: COMMAND's root %s is not /%s in the view (a bind took the name); give COMMAND by its host path", ErrUsage, in.host, in.entry)
		}
	}
	var tmpKeep []string // host layout: /tmp/X that hold bind mount points, shown for good
	if spec.HostLayout {
		tmpKeep = kpath.TmpPlaceholders(placeholders)
		spec.Dir, spec.Env = serverDirEnv(first, spec.Env)
		spec.TmpRoots = union(kpath.TmpRoots(first.Entries()), tmpKeep)
	}
	m, err := view.Mount(mnt, vfs.MountOptions{})
	if err != nil {
		return nil, &MountError{Err: err}
	}
	s.onRelease(func() { m.Unmount() })
	spec.NewRoot = m.Dir()

	// Per-session services, which run beside the server for the length of the session: they
	// start here, after the mount and before the server, and stop (onRelease) after it. The
	// kernel data path is the first.
	binds := startRootBinds(m.Dir(), view, kernelPath, spec.HostLayout, o.Roots.ReadOnly, log)
	if binds != nil {
		s.onRelease(binds.Close) // before the unmount
	}

	// The server, in its sandbox. Signals are caught before it starts, so
	// none is lost; Wait passes them on.
	s.sigs = make(chan os.Signal, 4)
	signal.Notify(s.sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	s.onRelease(func() { signal.Stop(s.sigs) })
	sopts := mountmgr.ServerOptions{Stderr: os.Stderr, Logger: log}
	if binds != nil && kernelPath {
		sopts.AuditGroup = s.vis.kernelGroup() // nil without an audit log file
	}
	s.vis.reportSyscalls(&sopts)
	fast := newConnector()
	defer fast.started() // on every way out: no call waits longer than the start
	if spec.Net != nil {
		sopts.Connect = fast.connect // the network's fast path, once it runs
		sopts.ConnectBusy = fast.busy
	}
	if s.srv, err = mountmgr.StartServer(ctx, spec, sopts); err != nil {
		return nil, err
	}
	s.vis.syscallsUnreported(s.srv.SyscallsUnreported)
	log.Debug("server started", zap.Int("pid", s.srv.Pid()), zap.String("command", spec.Argv[0]), zap.Int("roots", len(first.Entries())))
	// The network: the engine on the sandbox's TUN device.
	if s.srv.Net != nil {
		switch {
		case s.srv.Net.TCPOnly():
			s.vis.tcpOnly = true // for status: the fast path and the resolver on lo
		case s.srv.Net.TUN == nil:
			spec.NoNetwork = true // for status: only loopback (startNetwork says why)
		}
		if !s.srv.Net.IPv6 && spec.Net != nil {
			spec.Net.Addr6 = netip.Prefix{} // for status: the sandbox could not have it
		}
		stopNet, err := startNetwork(o.Sandbox.Net, s.srv.Net, fast, s.vis.netRefused, log)
		fast.started()
		if err != nil {
			s.srv.Stdin.Close()
			s.srv.Stop(o.Grace)
			return nil, err
		}
		s.onRelease(stopNet)
	}
	s.vis.watchKernel(s.srv.Pid(), s.srv.AuditEvents)
	s.vis.serve(spec, &o, !kernelPath)
	if binds != nil && spec.HostLayout {
		if err := binds.Attach(s.srv.Pid(), spec.TmpRoots, tmpKeep); err != nil {
			log.Warn("roots below /tmp added later will not show in the server's /tmp", zap.Error(err))
		}
	}

	// The bridge, which installs the client's roots from now on.
	var installer mcpbridge.RootInstaller = view
	if binds != nil {
		installer = binds // each install, then the new entries' binds
	}
	if s.br, err = mcpbridge.New(p.bridgeOptions(s.srv, installer, s.vis, log)); err != nil {
		s.srv.Stdin.Close()
		s.srv.Stop(o.Grace)
		return nil, err
	}
	return s, nil
}

// Wait runs the bridge until the client or the server leaves, or ctx ends or SIGINT or SIGTERM
// arrives, then stops the server and releases the session. It returns the server's status, and
// the session's NoRoots when that is how it ended.
func (s *Session) Wait(ctx context.Context) (int, error) {
	defer s.releaseAll()
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case sig := <-s.sigs:
				if sig == syscall.SIGINT || sig == syscall.SIGTERM {
					s.log.Debug("signal: shutting down", zap.String("signal", sig.String()))
					cancel()
				}
				s.srv.Signal(sig)
			case <-bctx.Done():
				return
			}
		}
	}()

	runErr := s.br.Run(bctx)
	// Run has closed the server's stdin. Give the server its grace, then
	// SIGTERM, then SIGKILL: about 1s by default, well inside the ~2s that
	// clients allow before they kill rootfs.
	start := time.Now()
	code := s.srv.Stop(s.grace)
	switch {
	case s.noRoots != nil && errors.Is(runErr, s.noRoots):
		return code, runErr
	case errors.Is(runErr, mcpbridge.ErrClientClosed):
		s.log.Debug("client closed; server stopped", zap.Int("status", code), zap.Duration("took", time.Since(start)))
	case errors.Is(runErr, mcpbridge.ErrServerClosed):
		s.log.Debug("server closed", zap.Int("status", code))
	case runErr != nil && !errors.Is(runErr, context.Canceled):
		s.log.Warn("bridge stopped", zap.Error(runErr))
	}
	return code, nil
}

// kernelPathWanted says whether the kernel serves what is below each root (bind mounts): not
// under strict, nor on a kernel that cannot.
func kernelPathWanted(strict bool, log *zap.Logger) bool {
	if strict {
		return false
	}
	if err := kpath.KernelPathSupported(); err != nil {
		log.Info("this kernel cannot serve roots through bind mounts (needs Linux 5.12); every file operation goes through the daemon, as with --strict", zap.Error(err))
		return false
	}
	return true
}

// viewOptions are the view's options: the caller's speed and freshness, the session's table
// rules, writable set and placeholders, and whether the kernel serves the entries.
func (p *Plan) viewOptions(written *rootset.WriteSet, placeholders []rootset.Placeholder, kernelPath bool, alog *audit.Log, log *zap.Logger) vfs.Options {
	v := p.opts.View
	v.Audit = alog
	v.TableOptions = p.opts.tableOptions()
	v.Written = written
	v.Placeholders = placeholders
	v.BoundEntries = kernelPath
	v.Logger = log
	return v
}

// startRootBinds starts the kernel data path over the mount at dir: a bind of each root's
// pinned descriptor over its entry (kernelPath), and in host layout the server's view of the
// roots below /tmp. It must start before the server: the sandbox's copy of the view becomes a
// slave of this one, so the binds laid later reach it. Nil when neither is wanted or the host
// refuses the mount calls; the daemon then serves everything, as with --strict.
func startRootBinds(dir string, view *vfs.View, kernelPath, hostLayout, readOnly bool, log *zap.Logger) *kpath.RootBinds {
	if !kernelPath && !hostLayout {
		return nil
	}
	binds, err := kpath.NewRootBinds(dir, view, kpath.RootBindsOptions{ReadOnly: readOnly, Logger: log, NoRootBinds: !kernelPath})
	switch {
	case err != nil && !kernelPath:
		log.Warn("roots below /tmp cannot be shown in the server's /tmp here", zap.Error(err))
		return nil
	case err != nil:
		// A host that refuses the mount calls (a container's seccomp
		// profile, say): the daemon serves everything, as --strict.
		log.Info("roots cannot be served through bind mounts here; every file operation goes through the daemon, as with --strict", zap.Error(err))
		return nil
	}
	return binds
}

// bridgeOptions are the bridge's: the caller's limits and client side, the server's stdio, the
// installer, and the roots it falls back on.
func (p *Plan) bridgeOptions(srv *mountmgr.Server, installer mcpbridge.RootInstaller, vis *visibility, log *zap.Logger) mcpbridge.Options {
	b := p.opts.Bridge
	b.ServerIn, b.ServerOut = srv.Stdin, srv.Stdout
	b.Installer, b.Static, b.Pinned, b.NoRoots, b.Logger = installer, p.Fallback, p.Pinned, p.NoRoots, log
	b.Installed, b.ClientInfo = vis.installed, vis.client
	b.ServerExit = func() mcpbridge.ExitInfo {
		// The server closed its stdout, usually as it exits.
		code, _ := srv.WaitFor(time.Second) // -1 while it runs on
		x := mcpbridge.ExitInfo{Status: code, LastStderr: srv.LastStderr()}
		if srv.Net != nil && srv.Net.Unavailable != "" && !srv.Net.TCPOnly() {
			// A server that needed the network fails with its own words
			// (npm's EAI_AGAIN); the client shows only this message.
			x.Note = noNetworkNote
		}
		return x
	}
	return b
}

// hostPaths are the host paths of roots, for those that name one.
func hostPaths(roots []rootset.Root) []string {
	var out []string
	for _, r := range roots {
		if p, err := rootset.ParseRoot(r.URI); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func logSkipped(log *zap.Logger, t *rootset.Table) {
	for _, s := range t.Skipped() {
		log.Warn("root left out", s.Root.LogField(), zap.String("reason", s.Reason.Error()))
	}
	for _, e := range t.Entries() {
		if e.Displaced != nil {
			log.Warn("root not at its own path", zap.String("entry", e.InView()), zap.String("host", e.HostPath), zap.String("reason", e.Displaced.Error()))
			continue
		}
		log.Debug("root", zap.String("entry", e.InView()), zap.String("host", e.HostPath))
	}
}

// union is a and the elements of b not in a.
func union(a, b []string) []string {
	for _, x := range b {
		if !slices.Contains(a, x) {
			a = append(a, x)
		}
	}
	return a
}

// serverDirEnv returns, in host layout, the server's working directory
// (rootfs's own when a root shows it at its own path, as a client that
// starts a server in the project expects; else the first directory root,
// where it is in the view; "/" when there is none)
// and its environment with HOME set to the home directory when that is
// itself a root at its own path (HOME stays /tmp otherwise: the rest of
// the home directory is not there).
func serverDirEnv(t *rootset.Table, env []string) (string, []string) {
	dir := "/"
	for _, e := range t.Entries() {
		if e.IsDir {
			dir = e.InView()
			break
		}
	}
	if cwd, err := os.Getwd(); err == nil {
		for _, e := range t.Entries() {
			if e.IsDir && e.Displaced == nil && (cwd == e.InView() || strings.HasPrefix(cwd, e.InView()+"/")) {
				dir = cwd
				break
			}
		}
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return dir, env
	}
	home = filepath.Clean(home)
	for _, e := range t.Entries() {
		if e.IsDir && e.Displaced == nil && e.InView() == home {
			out := make([]string, 0, len(env))
			for _, kv := range env {
				if kv == "HOME=/tmp" { // the default; a --setenv HOME stays
					kv = "HOME=" + home
				}
				out = append(out, kv)
			}
			return dir, out
		}
	}
	return dir, env
}
