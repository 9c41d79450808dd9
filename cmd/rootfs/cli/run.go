package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/mcpbridge"
	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/session"
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
	f.StringVar(&o.CacheWrites, "cache-writes", cacheWritesKeep, "where the server's writes to a launcher's cache (npx, uvx, pipx) go, which never changes the cache itself: `keep` (in a layer of this command line's own below ~/.local/state/rootfs/overlay, found again at its next start) or discard (in the sandbox's /tmp, gone when it ends)")
	setValues(f, "cache-writes", cacheWritesKeep, cacheWritesDiscard)
	f.DurationVar(&o.Grace, "grace", 500*time.Millisecond, "how long the server gets to exit after its stdin closes, and again after SIGTERM, before SIGKILL")
}

type runFlags struct {
	roots  RootsOptions
	run    RunOptions
	net    NetOptions // netflags.go
	bridge mcpbridge.Options
	argv   []string
	// preview is --dry-run: the CLI prints the session's plan and starts
	// nothing, so it is no option of the session's.
	preview bool
	// clientTaken: the client's stdin went to P1 or to the bridge, which
	// answer the client themselves; an error from here on is not refused
	// to it again (see refuseClient).
	clientTaken bool
}

// addFlags registers the flags of "rootfs run" on f.
func (rf *runFlags) addFlags(f *pflag.FlagSet) {
	rf.roots.AddFlags(f)
	rf.run.AddFlags(f)
	f.BoolVar(&rf.preview, "dry-run", false, "print the sandbox COMMAND would get (roots, runtime directories, auto-binds with their reasons, binds, environment; sizes in files) on stdout and start nothing")
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
	// Bad network patterns fail here, in P0.
	if _, err := session.NetPolicy(rf.run.NoNetwork, rf.net.options(), nil); err != nil {
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
		if err == nil || errors.Is(err, errHelp) || rf != nil && (rf.clientTaken || rf.preview) {
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
	opts, err := rf.options()
	if err != nil {
		return err
	}
	if mountmgr.InDaemon() {
		return runDaemon(ctx, rf, opts, log)
	}
	// Refuse what cannot work before paying for namespaces: a bad
	// --setenv or bind, COMMAND not on the host (127/126), an argument
	// root rootfs will not show.
	if err := session.Check(&opts); err != nil {
		return runError(err)
	}
	if rf.preview {
		return rf.dryRun(stdout, &opts)
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

// options are the session's options from the flags. The static roots are
// read here, in P0 and again in P1: a root that does not exist is refused
// before anything starts.
func (rf *runFlags) options() (session.Options, error) {
	static, err := rf.roots.StaticRoots()
	if err != nil {
		if errors.Is(err, errMissingRoot) {
			return session.Options{}, err
		}
		return session.Options{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	layout, _ := rf.run.layout() // checked by parseRunFlags
	r := &rf.run
	bridge := rf.bridge
	bridge.ClientIn, bridge.ClientOut = os.Stdin, os.Stdout
	return session.Options{
		Command: rf.argv,
		Roots: session.RootOptions{Static: static, Named: rf.roots.Roots, RootsFile: rf.roots.RootsFile != "",
			ReadOnly: rf.roots.ReadOnly, Allow: r.Allow, Layout: layout, NoArgRoots: r.NoArgRoots},
		Sandbox: session.SandboxOptions{Binds: r.Binds, ROBinds: r.ROBinds, SetEnv: r.SetEnv, UnsetEnv: r.UnsetEnv,
			NoNetwork: r.NoNetwork, Net: rf.net.options(), AllowUnixSockets: r.AllowUnixSockets, TmpSize: r.TmpSize, NoAutoBind: r.NoAutoBind,
			GitIdentity: r.GitIdentity, DiscardCacheWrites: r.CacheWrites == cacheWritesDiscard},
		View:     r.ViewFlags.Options(rf.roots.ReadOnly, nil),
		Strict:   r.Strict,
		Bridge:   bridge,
		Grace:    r.Grace,
		AuditLog: r.AuditLog,
	}, nil
}

// runDaemon is P1: the session (view, data path, sandbox, bridge) runs
// here, and its server's status becomes rootfs's.
func runDaemon(ctx context.Context, rf *runFlags, opts session.Options, log *zap.Logger) error {
	s, err := session.Start(ctx, opts, log)
	if err != nil {
		return runError(err)
	}
	rf.clientTaken = true // the bridge answers the client from here on
	code, err := s.Wait(ctx)
	if err != nil {
		return err // the client declared no roots: one line, and run's usage status (125)
	}
	return &ExitError{Code: code}
}

// runError gives a session's error its exit status: the sandbox's exec
// failure and COMMAND not found (127) or not executable (126); a failed
// FUSE mount says what the machine lacks; anything else is rootfs's own
// failure (125, see exitCode).
func runError(err error) error {
	var ee *mountmgr.ExecError
	var me *session.MountError
	switch {
	case errors.As(err, &me):
		return fuseMountError(me.Err, false)
	case errors.As(err, &ee):
		return &ExitError{Code: ee.Code, Err: err}
	case errors.Is(err, mountmgr.ErrCommandNotFound):
		return &ExitError{Code: 127, Err: err}
	case errors.Is(err, mountmgr.ErrCommandNotExecutable):
		return &ExitError{Code: 126, Err: err}
	}
	return err
}
