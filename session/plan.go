package session

// The policy of a session: which roots it starts with, where the command
// is, what the sandbox is given.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/mountmgr/resolve"
	"github.com/rootfs-dev/rootfs/rootset"
)

// Plan is what a session starts with, resolved from its Options before anything is mounted:
// the same value previews the session (--dry-run) and starts it.
type Plan struct {
	// Static are the roots given on the command line (RootOptions.Static).
	Static []rootset.Root
	// Fallback is what the bridge installs when the client declares no roots: Static, or
	// the working directory standing in for them (none when that is / or the home
	// directory, which are never served whole).
	Fallback []rootset.Root
	// Pinned are the roots COMMAND's arguments name, installed with every set.
	Pinned []rootset.Root
	// NoRoots, when not nil, is how the session ends if the client declares no roots and
	// there is nothing else to show.
	NoRoots error
	// Spec is the sandbox's spec. Start fills in NewRoot, and in host layout Dir, HOME and
	// TmpRoots from the view's first table.
	Spec *mountmgr.Spec
	// InView, when not nil, is COMMAND run from the view (a path inside a root).
	InView *ViewCommand
	// AutoBind is what auto-bind found (nil with NoAutoBind), for --dry-run's "left out".
	AutoBind *resolve.Result

	opts     *Options
	writable Writable
}

// ViewCommand is a COMMAND that runs from the view: its path there, and the entry it is in
// with that entry's host path when the command was resolved (Start checks that the view
// placed the entry the same way).
type ViewCommand struct {
	Path        string
	entry, host string
}

// Resolve decides what a session of o starts with: its roots, COMMAND resolved on the host or
// in the view of the roots at start, then (unless NoAutoBind) what COMMAND needs to start,
// then the environment. It mounts nothing and starts nothing; log gets what it decided.
func Resolve(o *Options, log *zap.Logger) (*Plan, error) {
	if log == nil {
		log = zap.NewNop()
	}
	p := &Plan{opts: o, Static: o.Roots.Static, Fallback: o.Roots.Static}
	var err error
	if p.Pinned, err = argRoots(o); err != nil {
		return nil, err
	}
	if len(p.Static) == 0 {
		p.Fallback, p.NoRoots = fallbackRoots(log)
		if len(p.Pinned) > 0 {
			p.NoRoots = nil // the arguments' roots are something to show
		}
	}
	if err := p.buildSpec(log); err != nil {
		return nil, err
	}
	return p, nil
}

// Initial are the roots the view starts with: Fallback and Pinned.
func (p *Plan) Initial() []rootset.Root { return rootset.UnionRoots(p.Fallback, p.Pinned) }

// buildSpec builds the sandbox's spec (NewRoot is filled in at start): everything the server
// is given beside its roots. A plane that changes what the server is given adds its part here,
// so that the preview shows it too.
func (p *Plan) buildSpec(log *zap.Logger) error {
	o := p.opts
	env, err := mountmgr.BuildEnvLookup(os.LookupEnv, o.Sandbox.SetEnv, o.Sandbox.UnsetEnv)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	binds, err := parseBinds(&o.Sandbox)
	if err != nil {
		return err
	}
	spec := &mountmgr.Spec{Env: env, Binds: binds, NoNetwork: o.Sandbox.NoNetwork, AllowUnixSockets: o.Sandbox.AllowUnixSockets,
		TmpSize: o.Sandbox.TmpSize, HostLayout: o.Roots.Layout == rootset.LayoutHost}
	pol, err := NetPolicy(o.Sandbox.NoNetwork, o.Sandbox.Net, nil)
	if err != nil {
		return err
	}
	spec.Net = netSpec(pol) // the sandbox's own network, unless --host-network or --no-network
	p.Spec = spec
	p.writable = newWritable(o)
	hostExe, err := p.resolveCommand()
	if err != nil {
		return err
	}
	argv0 := hostExe
	if p.InView != nil {
		argv0 = p.InView.Path
	}
	spec.Argv = append([]string{argv0}, o.Command[1:]...)
	spec.CommandInView = p.InView != nil
	var pre []string // environment entries that SetEnv may override
	if !o.Sandbox.NoAutoBind {
		cwd, _ := os.Getwd()
		ab, err := resolve.AutoBind(spec, hostExe, resolve.Options{Name: o.Command[0], InView: p.InView != nil,
			Writable: p.writable.forAutoBind(), Args: o.Command[1:], Dir: cwd, Layers: layers(o)})
		if err != nil {
			return err
		}
		spec.Binds = append(spec.Binds, ab.Binds...)
		spec.AutoBind = true
		p.AutoBind = ab
		pre = append(pre, ab.Env...)
		if len(ab.Binds) > 0 || len(ab.Refused) > 0 {
			log.Info("auto-bind: added read-only what the command needs", zap.Strings("added", ab.Paths()), zap.Strings("left_out", ab.Refused))
		}
	}
	if o.Sandbox.GitIdentity {
		gi, err := gitIdentity()
		if err != nil {
			return fmt.Errorf("%w: --git-identity: %v", ErrUsage, err)
		}
		pre = append(pre, gi...)
	}
	if len(pre) > 0 {
		if spec.Env, err = mountmgr.BuildEnvLookup(os.LookupEnv, append(pre, o.Sandbox.SetEnv...), o.Sandbox.UnsetEnv); err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
	}
	p.writable.binds = writableBinds(spec.Binds)
	return nil
}

// Check refuses, before any namespace, what Start would refuse anyway: a bad SetEnv or bind,
// a COMMAND that is not on the host (unless it may be a path inside the view, which only
// Resolve can tell), and an argument root rootfs will not show.
func Check(o *Options) error {
	if _, err := mountmgr.BuildEnvLookup(os.LookupEnv, o.Sandbox.SetEnv, o.Sandbox.UnsetEnv); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if _, err := parseBinds(&o.Sandbox); err != nil {
		return err
	}
	name := o.Command[0]
	if _, err := resolve.Command(name, os.Getenv("PATH")); err != nil {
		inView := errors.Is(err, mountmgr.ErrCommandNotFound) && filepath.IsAbs(name) &&
			(len(o.Roots.Named) > 0 || o.Roots.RootsFile)
		if !inView {
			return err
		}
	}
	_, err := argRoots(o)
	return err
}

// parseBinds reads the binds: read-only ones first.
func parseBinds(o *SandboxOptions) ([]mountmgr.Bind, error) {
	var out []mountmgr.Bind
	for _, list := range []struct {
		specs []string
		ro    bool
	}{{o.ROBinds, true}, {o.Binds, false}} {
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

// layers is the directory below which the writes to launcher caches are kept
// (mountmgr.LayerBase), or "" when they are discarded or there is no state directory.
func layers(o *Options) string {
	if o.Sandbox.DiscardCacheWrites {
		return ""
	}
	return mountmgr.LayerBase(os.Getenv("HOME"), os.Getenv("XDG_STATE_HOME"))
}

// resolveCommand finds COMMAND: on the host's PATH, or by its path, which may be inside the
// view ("/<entry>/bin/server", or a host path inside a root at start, which then runs from
// the view). It returns the host path (to read its #! and ELF headers), sets InView for a
// command in the view, and records the roots at start in the writable set.
func (p *Plan) resolveCommand() (string, error) {
	name := p.opts.Command[0]
	hostExe, hostErr := resolve.Command(name, os.Getenv("PATH"))
	if hostErr == nil {
		// A version manager's shim cannot run in the sandbox (the manager
		// and its version files are not there): run what it would run.
		cwd, _ := os.Getwd()
		real, _, err := resolve.Shim(hostExe, os.Environ(), cwd)
		if err != nil {
			return "", err
		}
		hostExe = real
	}
	start := p.Initial()
	if len(start) == 0 {
		// The working directory stands in for the roots, unless it is /
		// or the home directory, which are never served (fallbackRoots):
		// then nothing the server can write is known at start, and
		// install prefixes under the home directory (nvm, pyenv) are
		// followed as usual.
		if dir, ok, _ := workdirRoot(); ok {
			p.writable.roots = []string{dir}
		}
		return hostExe, hostErr
	}
	// The table the view will start with, named as it will be (the
	// placeholders known so far are reserved; Start checks the name
	// again once the auto-binds have added theirs).
	o := p.opts.tableOptions()
	o.Reserved = mountmgr.ReservedNames(p.Spec)
	t := rootset.BuildTable(start, o)
	defer t.Close()
	for _, e := range t.Entries() {
		p.writable.roots = append(p.writable.roots, e.HostPath)
	}
	if hostErr == nil {
		real := hostExe
		if d, err := filepath.EvalSymlinks(filepath.Dir(hostExe)); err == nil {
			real = filepath.Join(d, filepath.Base(hostExe))
		}
		for _, e := range t.Entries() {
			if e.Covered {
				continue // the entry it lies in finds it
			}
			if real == e.HostPath || e.IsDir && strings.HasPrefix(real, e.HostPath+"/") {
				vp := e.InView() + strings.TrimPrefix(real, e.HostPath)
				p.InView = &ViewCommand{Path: vp, entry: e.ViewPath, host: e.HostPath}
				return hostExe, nil
			}
		}
		return hostExe, nil
	}
	if !errors.Is(hostErr, mountmgr.ErrCommandNotFound) || !filepath.IsAbs(name) {
		return "", hostErr
	}
	clean := filepath.Clean(name)
	for _, e := range t.Entries() {
		rest, ok := strings.CutPrefix(clean, e.InView())
		if e.Covered || !ok || rest != "" && (!e.IsDir || rest[0] != '/') {
			continue
		}
		host := e.HostPath + rest
		if _, err := resolve.Command(host, ""); err != nil {
			return "", fmt.Errorf("%w (in the view: %s)", err, clean)
		}
		p.InView = &ViewCommand{Path: clean, entry: e.ViewPath, host: e.HostPath}
		return host, nil
	}
	return "", hostErr
}

// tableOptions are the rules every table of the session is built with: the view's (which adds
// the writable set and its placeholders' names) and the previews made before it exists.
func (o *Options) tableOptions() rootset.TableOptions {
	t := rootset.TableOptions{Allow: o.Roots.Allow, ReadOnly: o.Roots.ReadOnly, Layout: o.Roots.Layout}
	if o.Roots.Layout == rootset.LayoutHost {
		t.Beneath = []string{"tmp"} // the sandbox shows roots below its own /tmp
	}
	return t
}

// placeholders are the mount points the view shows for the sandbox's own mounts. In host
// layout those inside a root at start are left out: the sandbox mounts those binds through
// the root itself, and a mount point there would push the root off its own path.
func (p *Plan) placeholders() []rootset.Placeholder {
	ps := mountmgr.Placeholders(p.Spec)
	if !p.Spec.HostLayout {
		return ps
	}
	var dirs []string
	for _, r := range p.Initial() {
		if path, err := rootset.ParseRoot(r.URI); err == nil && path != "/" {
			dirs = append(dirs, strings.TrimPrefix(path, "/")+"/")
		}
	}
	out := ps[:0:0]
	for _, ph := range ps {
		inside := false
		for _, d := range dirs {
			inside = inside || strings.HasPrefix(ph.Name, d)
		}
		if !inside {
			out = append(out, ph)
		}
	}
	return out
}

// PreviewTable is the table the view will start with, named as Start names it. The caller
// closes it.
func (p *Plan) PreviewTable() *rootset.Table {
	o := p.opts.tableOptions()
	if p.Spec.HostLayout {
		for _, ph := range p.placeholders() {
			o.Reserved = append(o.Reserved, ph.Name)
		}
	} else {
		o.Reserved = mountmgr.ReservedNames(p.Spec)
	}
	return rootset.BuildTable(p.Initial(), o)
}

// Dir is where the server starts when the view's first table is t: "/" in flat layout, and in
// host layout as serverDirEnv says.
func (p *Plan) Dir(t *rootset.Table) string {
	if !p.Spec.HostLayout {
		return "/"
	}
	dir, _ := serverDirEnv(t, nil)
	return dir
}

// gitIdentity reads user.name and user.email from the user's git
// configuration and returns them as the environment git reads, plus
// safe.directory=*: inside the sandbox the only repositories are the
// roots, which change while the server runs, and git refuses a repository
// owned by another user (root serving a user's checkout) without it.
func gitIdentity() ([]string, error) {
	get := func(key string) (string, error) {
		out, err := exec.Command("git", "config", "--get", key).Output()
		v := strings.TrimSpace(string(out))
		if err != nil || v == "" {
			return "", fmt.Errorf("git config %s is not set (git config --global %s VALUE)", key, key)
		}
		return v, nil
	}
	name, err := get("user.name")
	if err != nil {
		return nil, err
	}
	email, err := get("user.email")
	if err != nil {
		return nil, err
	}
	return []string{
		"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email,
		"GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email,
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*",
	}, nil
}

// fallbackRoots is the root used when no static root is given: the
// directory rootfs was started in (clients start servers in the project),
// in the view from the server's first instruction until the client's own
// roots replace it, and kept when the client declares none; never / or
// the home directory, which would hand the server everything.
func fallbackRoots(log *zap.Logger) ([]rootset.Root, error) {
	cwd, ok, err := workdirRoot()
	if err != nil {
		return nil, fmt.Errorf("%w: no roots: the client declares none, no --root was given, and the working directory is unknown (%v); give --root DIR", ErrUsage, err)
	}
	if !ok {
		what := "/"
		if cwd != "/" {
			what = "your home directory"
		}
		// Not refused yet: the client may still send roots. The bridge
		// refuses (NoRoots) once it is clear that it sends none.
		log.Debug("no --root, and started in "+what+", which is never a root: a client that declares no roots is refused; pass --root DIR", zap.String("dir", cwd))
		return nil, fmt.Errorf("%w: no roots: the client declares none, no --root was given, and rootfs was started in %s (%s), which it will not serve whole; give --root DIR", ErrUsage, cwd, what)
	}
	log.Debug("no --root: the working directory is a root until the client sends its own", zap.String("dir", cwd))
	return []rootset.Root{{URI: cwd}}, nil
}

// workdirRoot returns the working directory, resolved, and whether it may
// stand in for the roots: never / or the home directory itself.
func workdirRoot() (dir string, ok bool, err error) {
	cwd, err := os.Getwd()
	if err != nil {
		return "", false, err
	}
	home, _ := os.UserHomeDir()
	if r, err := filepath.EvalSymlinks(home); err == nil {
		home = r
	}
	if r, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = r
	}
	return cwd, cwd != "/" && cwd != home, nil
}
