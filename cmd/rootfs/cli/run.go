package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/mcpbridge"
	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/rootset"
	"github.com/rootfs-dev/rootfs/vfs"
)

// RunOptions are the flags of "rootfs run" beyond the roots.
type RunOptions struct {
	Allow            []string
	ROBinds          []string
	Binds            []string
	SetEnv           []string
	UnsetEnv         []string
	NoNetwork        bool
	AllowUnixSockets bool
	NoAutoBind       bool
	NoArgRoots       bool
	GitIdentity      bool
	ViewFlags
	TmpSize string
	Grace   time.Duration
	Strict  bool
	DryRun  bool
	// CacheWrites is where a server's writes to a launcher cache go:
	// "keep" (a layer per server in the state directory) or "discard"
	// (the sandbox's /tmp).
	CacheWrites string
}

// AddFlags registers the flags on f.
func (o *RunOptions) AddFlags(f *pflag.FlagSet) {
	f.StringArrayVar(&o.Allow, "allow", nil, "admit only client roots at or beneath `DIR` (repeatable; default: no restriction), e.g. --allow ~/src")
	f.StringArrayVar(&o.ROBinds, "ro-bind", nil, "also show host `SRC[:DST]` read-only in the sandbox (repeatable), e.g. --ro-bind ~/.npm")
	f.StringArrayVar(&o.Binds, "bind", nil, "also show host `SRC[:DST]` read-write in the sandbox (repeatable), e.g. --bind ~/.cache/uv")
	f.StringArrayVar(&o.SetEnv, "setenv", nil, "set `K=V` in the server's environment, or pass NAME's value from rootfs's own environment with --setenv NAME (an unset NAME is an error); repeatable; it starts from PATH, HOME=/tmp, LANG, TZ")
	f.StringArrayVar(&o.UnsetEnv, "unsetenv", nil, "remove `K` from the server's environment (repeatable)")
	f.BoolVar(&o.NoNetwork, "no-network", false, "give the server a network namespace with only loopback")
	f.BoolVar(&o.AllowUnixSockets, "allow-unix-sockets", false, "let the server make unix socket files in its roots, which host processes can connect to, and connect to host sockets there (refused by default as far as the kernel's Landlock can: making them from Linux 5.19, connecting from 7.1)")
	f.BoolVar(&o.NoAutoBind, "no-auto-bind", false, "do not bind what COMMAND needs (its symlinks, #! interpreters, ELF loader and libraries, install prefix, launcher cache); only the executable file is shown")
	f.BoolVar(&o.NoArgRoots, "no-arg-roots", false, "do not make the existing paths COMMAND's arguments name (server-filesystem ~/proj, --db=~/data/app.db) roots of the session; only --root and the client's roots")
	f.BoolVar(&o.GitIdentity, "git-identity", false, "pass git's user.name and user.email (GIT_AUTHOR_*, GIT_COMMITTER_*) and safe.directory=* (GIT_CONFIG_*) to the server, without showing ~/.gitconfig")
	o.ViewFlags.AddFlags(f)
	o.addLayoutFlag(f, "host")
	f.StringVar(&o.TmpSize, "tmp-size", "256m", "size cap of the server's private /tmp (tmpfs `SIZE`)")
	f.BoolVar(&o.Strict, "strict", false, "serve every file operation through the daemon (open files of a removed root fail with EIO at once) instead of letting the kernel serve what is below each root through a bind mount")
	f.BoolVar(&o.DryRun, "dry-run", false, "print the sandbox COMMAND would get (roots, runtime directories, auto-binds with their reasons, binds, environment; sizes in files) on stdout and start nothing")
	f.StringVar(&o.CacheWrites, "cache-writes", cacheWritesKeep, "where the server's writes to a launcher's cache (npx, uvx, pipx) go, which never changes the cache itself: `keep` (in a layer of this command line's own below ~/.local/state/rootfs/overlay, found again at its next start) or discard (in the sandbox's /tmp, gone when it ends)")
	setValues(f, "cache-writes", cacheWritesKeep, cacheWritesDiscard)
	f.DurationVar(&o.Grace, "grace", 500*time.Millisecond, "how long the server gets to exit after its stdin closes, and again after SIGTERM, before SIGKILL")
}

type runFlags struct {
	roots  RootsOptions
	run    RunOptions
	net    NetOptions // issue 23 (netflags.go)
	bridge mcpbridge.Options
	argv   []string
	// autoBind is what spec found, for --dry-run's "left out".
	autoBind *mountmgr.AutoBind
	// clientTaken: the client's stdin went to P1 or to the bridge, which
	// answer the client themselves; an error from here on is not refused
	// to it again (see refuseClient).
	clientTaken bool
}

// addFlags registers the flags of "rootfs run" on f.
func (rf *runFlags) addFlags(f *pflag.FlagSet) {
	rf.roots.AddFlags(f)
	rf.run.AddFlags(f)
	rf.net.AddFlags(f)
	rf.bridge.AddFlags(f)
}

func parseRunFlags(args []string, stderr io.Writer) (*runFlags, error) {
	f := pflag.NewFlagSet("run", pflag.ContinueOnError)
	f.SetInterspersed(false)
	var rf runFlags
	rf.addFlags(f)
	if err := parseFlags(f, args, runUsage, stderr); err != nil {
		return nil, err
	}
	rf.argv = f.Args()
	if len(rf.argv) == 0 {
		return nil, fmt.Errorf("%w: no COMMAND; usage: rootfs run [flags] -- COMMAND [ARG...]", ErrUsage)
	}
	if _, err := rf.run.layout(); err != nil {
		return nil, err
	}
	if err := checkCacheWrites(rf.run.CacheWrites); err != nil {
		return nil, err
	}
	if _, err := rf.net.policy(rf.run.NoNetwork, nil); err != nil { // issue 23: bad patterns fail in P0
		return nil, err
	}
	return &rf, nil
}

// The values of --cache-writes.
const (
	cacheWritesKeep    = "keep"
	cacheWritesDiscard = "discard"
)

func checkCacheWrites(v string) error {
	if v != cacheWritesKeep && v != cacheWritesDiscard {
		return fmt.Errorf("%w: --cache-writes %q: want %s or %s", ErrUsage, v, cacheWritesKeep, cacheWritesDiscard)
	}
	return nil
}

// layers is the directory below which the writes to launcher caches are
// kept (mountmgr.LayerBase), or "" with --cache-writes discard.
func (rf *runFlags) layers() string {
	if rf.run.CacheWrites == cacheWritesDiscard {
		return ""
	}
	return mountmgr.LayerBase(os.Getenv("HOME"), os.Getenv("XDG_STATE_HOME"))
}

// runCommand is "rootfs run". In the process the client started (P0) it
// checks the command line and re-executes rootfs into a private mount
// namespace (P1, see mountmgr); P1 runs this function again and does the work
// in runDaemon. P0 exits with P1's status, which is the server's. stdout
// is written only by --dry-run, where no protocol runs: otherwise it is
// the client's, and P1 hands it to the bridge.
//
// When rootfs cannot start the server, in P0 (flags, COMMAND not found,
// preflight) or in P1 before the bridge runs (the view's mount, the
// sandbox, the exec), the process that fails answers the client's
// initialize with the error (refuseClient) before it exits with its usual
// status and stderr line.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	// A client that dies closes rootfs's stdout, and often the pipe of its
	// stderr. A write there must fail with EPIPE, which the bridge takes
	// for the client leaving (the server gets end of input, then its
	// grace), not kill the daemon with SIGPIPE, the Go runtime's default
	// for fds 1 and 2, and the server with it. Notify, not Ignore: an
	// ignored signal would stay ignored across the server's exec.
	epipe := make(chan os.Signal, 1)
	signal.Notify(epipe, syscall.SIGPIPE)
	defer signal.Stop(epipe)
	var rf *runFlags
	log := zap.NewNop()
	defer func() { // registered after signal.Stop, so it runs before it: the answer may meet EPIPE
		if err == nil || errors.Is(err, errHelp) || rf != nil && (rf.clientTaken || rf.run.DryRun) {
			return
		}
		maxLine := 0
		if rf != nil {
			maxLine = rf.bridge.MaxLine
		}
		refuseClient(os.Stdin, stdout, err, maxLine, log)
	}()
	rf, err = parseRunFlags(args, stderr)
	if err != nil {
		return err
	}
	if log, err = newLogger(rf.roots.LogLevel, stderr); err != nil {
		log = zap.NewNop()
		return err
	}
	defer log.Sync()
	if mountmgr.InDaemon() {
		return runDaemon(ctx, rf, log)
	}
	// Refuse what cannot work before paying for namespaces.
	if _, err := rf.roots.StaticRoots(); err != nil {
		if errors.Is(err, errMissingRoot) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err := rf.precheck(); err != nil { // 127/126 and bad --setenv before any namespace
		return err
	}
	if _, err := rf.argRoots(); err != nil {
		return err
	}
	if rf.run.DryRun {
		return rf.dryRun(stdout)
	}
	if os.Geteuid() != 0 {
		// Without root, what the sandbox needs may be forbidden (user
		// namespaces, /dev/fuse); say so in one line with the fix.
		if err := mountmgr.PreflightError(mountmgr.Preflight()); err != nil {
			return err
		}
	}
	code, err := mountmgr.RunDaemon(mountmgr.DaemonOptions{Args: append([]string{"run"}, args...), Logger: log})
	if err != nil {
		return err
	}
	rf.clientTaken = true // P1 ran, and answered the client or bridged it
	return &ExitError{Code: code}
}

// refuseClient answers the client's initialize, if it sends one within
// mcpbridge.ClientWait, with a JSON-RPC error whose message says in one
// line why the server did not start and how to fix it (err, the line
// rootfs also prints on stderr), so that the client shows the reason rather
// than "Connection closed". A terminal on in is a person, not a client:
// nothing is read.
func refuseClient(in *os.File, out io.Writer, err error, maxLine int, log *zap.Logger) {
	if fi, serr := in.Stat(); serr != nil || fi.Mode()&os.ModeCharDevice != 0 {
		return
	}
	if mcpbridge.Refuse(in, out, "rootfs: cannot start the server: "+err.Error(), mcpbridge.ClientWait, maxLine) {
		log.Debug("answered the client's initialize with the error")
	}
}

func commandError(err error) error {
	switch {
	case errors.Is(err, mountmgr.ErrCommandNotFound):
		return &ExitError{Code: 127, Err: err}
	case errors.Is(err, mountmgr.ErrCommandNotExecutable):
		return &ExitError{Code: 126, Err: err}
	}
	return err
}

// precheck refuses, in P0, what P1 would refuse anyway: a bad --setenv
// or bind, and a COMMAND that is not on the host (unless it may be a path
// inside the view, which only P1 can tell once the static roots are known).
func (rf *runFlags) precheck() error {
	if _, err := mountmgr.BuildEnvLookup(os.LookupEnv, rf.run.SetEnv, rf.run.UnsetEnv); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if _, err := rf.binds(); err != nil {
		return err
	}
	name := rf.argv[0]
	if _, err := mountmgr.ResolveCommand(name, os.Getenv("PATH")); err != nil {
		inView := errors.Is(err, mountmgr.ErrCommandNotFound) && filepath.IsAbs(name) &&
			(len(rf.roots.Roots) > 0 || rf.roots.RootsFile != "")
		if !inView {
			return commandError(err)
		}
	}
	return nil
}

func (rf *runFlags) binds() ([]mountmgr.Bind, error) {
	var out []mountmgr.Bind
	for _, list := range []struct {
		specs []string
		ro    bool
	}{{rf.run.ROBinds, true}, {rf.run.Binds, false}} {
		for _, s := range list.specs {
			b, err := mountmgr.ParseBind(s, list.ro)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrUsage, err)
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// spec builds the sandbox spec from the flags (NewRoot is filled in later):
// COMMAND resolved on the host or in the view of the static roots, then
// (unless --no-auto-bind) what it needs to start, then the environment.
func (rf *runFlags) spec(static []rootset.Root, log *zap.Logger) (*mountmgr.Spec, *viewPath, error) {
	env, err := mountmgr.BuildEnvLookup(os.LookupEnv, rf.run.SetEnv, rf.run.UnsetEnv)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	binds, err := rf.binds()
	if err != nil {
		return nil, nil, err
	}
	spec := &mountmgr.Spec{Env: env, Binds: binds, NoNetwork: rf.run.NoNetwork, AllowUnixSockets: rf.run.AllowUnixSockets,
		TmpSize: rf.run.TmpSize, HostLayout: rf.hostLayout()}
	if pol, err := rf.net.policy(rf.run.NoNetwork, nil); err == nil { // issue 23: the sandbox's own network
		spec.Net = netSpec(pol)
	}
	hostExe, inView, writable, err := rf.resolveCommand(spec, static)
	if err != nil {
		return nil, nil, err
	}
	writable = append(writable, rf.allowDirs()...)
	if rf.roots.ReadOnly {
		writable = nil
	}
	argv0 := hostExe
	if inView != nil {
		argv0 = inView.path
	}
	spec.Argv = append([]string{argv0}, rf.argv[1:]...)
	spec.CommandInView = inView != nil
	var pre []string // environment entries that --setenv may override
	if !rf.run.NoAutoBind {
		cwd, _ := os.Getwd()
		ab, err := mountmgr.ResolveAutoBind(spec, hostExe, mountmgr.AutoBindOptions{Name: rf.argv[0], InView: inView != nil, Writable: writable, Args: rf.argv[1:], Dir: cwd, Layers: rf.layers()})
		if err != nil {
			return nil, nil, commandError(err)
		}
		spec.Binds = append(spec.Binds, ab.Binds...)
		spec.AutoBind = true
		rf.autoBind = ab
		pre = append(pre, ab.Env...)
		if len(ab.Binds) > 0 || len(ab.Refused) > 0 {
			log.Info("auto-bind: added read-only what the command needs", zap.Strings("added", ab.Paths()), zap.Strings("left_out", ab.Refused))
		}
	}
	if rf.run.GitIdentity {
		gi, err := gitIdentity()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: --git-identity: %v", ErrUsage, err)
		}
		pre = append(pre, gi...)
	}
	if len(pre) > 0 {
		if spec.Env, err = mountmgr.BuildEnvLookup(os.LookupEnv, append(pre, rf.run.SetEnv...), rf.run.UnsetEnv); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrUsage, err)
		}
	}
	return spec, inView, nil
}

// runDaemon is P1: it owns the view, the bridge and the sandbox.
//
//	static roots ─▶ table ─▶ view ─▶ FUSE mount (private to this namespace)
//	                                      │
//	client stdio ◀─▶ bridge ◀─▶ server stdio (sandbox whose / is the mount)
//
// The order matters: the view is populated with the static roots and
// mounted before the server starts, so a server given /<entry> finds it.
func runDaemon(ctx context.Context, rf *runFlags, log *zap.Logger) (err error) {
	_, pinned, bridgeStatic, noRoots, err := rf.startRoots(log)
	if err != nil {
		return err
	}
	initial := rootset.UnionRoots(bridgeStatic, pinned)
	spec, inView, err := rf.spec(initial, log)
	if err != nil {
		return err
	}
	// The layers that keep the server's writes to a launcher cache, held
	// (locked) until the session ends.
	if rf.run.CacheWrites == cacheWritesKeep && rf.layers() == "" {
		for _, b := range spec.Binds {
			if b.Overlay {
				log.Warn("launcher cache: no state directory ($HOME and $XDG_STATE_HOME are unset) to keep the server's writes in; they vanish when the session ends", zap.String("cache", b.Dest))
			}
		}
	}
	releaseLayers := mountmgr.PrepareLayers(spec, log)
	defer releaseLayers()
	// What the server can write, or could earlier, is never resolved
	// through: the writable roots of every table, and read-write binds.
	written, err := writtenSet(spec)
	if err != nil {
		return err
	}
	defer written.Close()
	vopts := rf.run.Options(rf.roots.ReadOnly, log)
	vopts.Placeholders = mountmgr.Placeholders(spec)
	vopts.Allow, vopts.Written = rf.run.Allow, written
	var tmpKeep []string // host layout: /tmp/X that hold bind mount points, shown for good
	if spec.HostLayout {
		vopts.Placeholders = outsideRoots(vopts.Placeholders, initial)
		tmpKeep = mountmgr.TmpPlaceholders(vopts.Placeholders)
		vopts.Beneath = []string{"tmp"} // the sandbox shows roots below its own /tmp
	}
	kernelPath := !rf.run.Strict
	if kernelPath {
		if err := mountmgr.KernelPathSupported(); err != nil {
			log.Info("this kernel cannot serve roots through bind mounts (needs Linux 5.12); every file operation goes through the daemon, as with --strict", zap.Error(err))
			kernelPath = false
		}
	}
	vopts.BoundEntries = kernelPath
	view := vfs.NewView(vopts)
	defer view.Close()

	var rootPaths []string
	for _, r := range initial {
		if p, err := rootset.ParseRoot(r.URI); err == nil {
			rootPaths = append(rootPaths, p)
		}
	}
	mnt, cleanup, err := mountmgr.PrivateMountDir(rootPaths...)
	if err != nil {
		return err
	}
	defer cleanup()
	first, err := view.Install(initial)
	logSkipped(log, first)
	if err != nil {
		return err
	}
	// The view owns first now (view.Close, deferred, releases it).
	if err := checkBindSources(spec.Binds, rf.serverWritable(spec, first, bridgeStatic)); err != nil {
		return err
	}
	if inView != nil {
		if e := first.Lookup(inView.entry); e == nil || e.HostPath != inView.host {
			return fmt.Errorf("%w: COMMAND's root %s is not /%s in the view (a bind took the name); give COMMAND by its host path", ErrUsage, inView.host, inView.entry)
		}
	}
	if spec.HostLayout {
		spec.Dir, spec.Env = serverDirEnv(first, spec.Env)
		spec.TmpRoots = union(mountmgr.TmpRoots(first.Entries()), tmpKeep)
	}
	m, err := view.Mount(mnt, vfs.MountOptions{})
	if err != nil {
		return fuseMountError(err, false)
	}
	defer m.Unmount()
	var binds *mountmgr.RootBinds
	if kernelPath || spec.HostLayout {
		// Before the sandbox starts: its copy of the view must become a
		// slave of this one, so the binds laid later reach it. Under
		// --strict in host layout only the roots below /tmp need it.
		binds, err = mountmgr.NewRootBinds(m.Dir(), view, mountmgr.RootBindsOptions{ReadOnly: rf.roots.ReadOnly, Logger: log, NoRootBinds: !kernelPath})
		if err != nil && !kernelPath {
			log.Warn("roots below /tmp cannot be shown in the server's /tmp here", zap.Error(err))
			binds = nil
		} else if err != nil {
			// A host that refuses the mount calls (a container's seccomp
			// profile, say): the daemon serves everything, as --strict.
			log.Info("roots cannot be served through bind mounts here; every file operation goes through the daemon, as with --strict", zap.Error(err))
			binds = nil
		} else {
			defer binds.Close() // before the unmount
		}
	}

	spec.NewRoot = m.Dir()

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	srv, err := mountmgr.StartServer(ctx, spec, mountmgr.ServerOptions{Stderr: os.Stderr, Logger: log})
	if err != nil {
		var ee *mountmgr.ExecError
		if errors.As(err, &ee) {
			return &ExitError{Code: ee.Code, Err: err}
		}
		return err
	}
	// ---- issue 23: the sandbox's network (netflags.go); one block, to re-home with runDaemon ----
	if srv.Net != nil {
		stopNet, err := rf.net.startNetwork(srv.Net, log)
		if err != nil {
			srv.Stdin.Close()
			srv.Stop(rf.run.Grace)
			return err
		}
		defer stopNet()
	}
	// ---- end of issue 23's block ----
	log.Debug("server started", zap.Int("pid", srv.Pid()), zap.String("command", spec.Argv[0]), zap.Int("roots", len(first.Entries())))
	if binds != nil && spec.HostLayout {
		if err := binds.Attach(srv.Pid(), spec.TmpRoots, tmpKeep); err != nil {
			log.Warn("roots below /tmp added later will not show in the server's /tmp", zap.Error(err))
		}
	}

	bopts := rf.bridge
	bopts.ClientIn, bopts.ClientOut = os.Stdin, os.Stdout
	bopts.ServerIn, bopts.ServerOut = srv.Stdin, srv.Stdout
	bopts.View, bopts.Static, bopts.Pinned, bopts.NoRoots, bopts.Logger = view, bridgeStatic, pinned, noRoots, log
	bopts.ServerExit = func() mcpbridge.ExitInfo {
		// The server closed its stdout, usually as it exits.
		code, _ := srv.WaitFor(time.Second) // -1 while it runs on
		return mcpbridge.ExitInfo{Status: code, LastStderr: srv.LastStderr()}
	}
	if binds != nil {
		bopts.View = binds // each install, then the new entries' binds
	}
	br, err := mcpbridge.New(bopts)
	if err != nil {
		srv.Stdin.Close()
		srv.Stop(rf.run.Grace)
		return err
	}

	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case sig := <-sigs:
				if sig == syscall.SIGINT || sig == syscall.SIGTERM {
					log.Debug("signal: shutting down", zap.String("signal", sig.String()))
					cancel()
				}
				srv.Signal(sig)
			case <-bctx.Done():
				return
			}
		}
	}()

	rf.clientTaken = true
	runErr := br.Run(bctx)
	// Run has closed the server's stdin. Give the server its grace, then
	// SIGTERM, then SIGKILL: about 1s by default, well inside the ~2s that
	// clients allow before they kill rootfs.
	start := time.Now()
	code := srv.Stop(rf.run.Grace)
	switch {
	case noRoots != nil && errors.Is(runErr, noRoots):
		return runErr // one line, and run's usage status (125)
	case errors.Is(runErr, mcpbridge.ErrClientClosed):
		log.Debug("client closed; server stopped", zap.Int("status", code), zap.Duration("took", time.Since(start)))
	case errors.Is(runErr, mcpbridge.ErrServerClosed):
		log.Debug("server closed", zap.Int("status", code))
	case runErr != nil && !errors.Is(runErr, context.Canceled):
		log.Warn("bridge stopped", zap.Error(runErr))
	}
	return &ExitError{Code: code}
}
