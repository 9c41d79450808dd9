package cli

// The policy of a rootfs run session: which roots it starts with, where
// the command is, what the server can write, where it starts.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/mountmgr/resolve"
	"github.com/rootfs-dev/rootfs/rootset"
)

// startRoots returns the session's roots at start: the --root and
// --roots-file roots, the roots the server's arguments name (pinned: in
// every set, see argroots.go), and what the bridge uses when the client
// declares none (the static roots, or the working directory standing in
// for them). noRoots is how the session ends when the client declares
// none and there is nothing else to show.
func (rf *runFlags) startRoots(log *zap.Logger) (static, pinned, fallback []rootset.Root, noRoots error, err error) {
	if static, err = rf.roots.StaticRoots(); err != nil {
		if errors.Is(err, errMissingRoot) {
			return nil, nil, nil, nil, err
		}
		return nil, nil, nil, nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if pinned, err = rf.argRoots(); err != nil {
		return nil, nil, nil, nil, err
	}
	fallback = static
	if len(static) == 0 {
		fallback, noRoots = fallbackRoots(log)
		if len(pinned) > 0 {
			noRoots = nil // the arguments' roots are something to show
		}
	}
	return static, pinned, fallback, noRoots, nil
}

// allowDirs are the --allow directories, resolved: client roots arrive
// after the server has started, but only at or beneath these, so whatever
// lies there is the server's to write in this session or an earlier one.
func (rf *runFlags) allowDirs() []string {
	var out []string
	for _, a := range rf.run.Allow {
		if abs, err := filepath.Abs(a); err == nil {
			if r, err := filepath.EvalSymlinks(abs); err == nil {
				out = append(out, r)
			}
		}
	}
	return out
}

// viewPath is a COMMAND that runs from the view: its path there, the entry
// it is in, and that entry's host path when the command was resolved.
type viewPath struct {
	path, entry, host string
}

// resolveCommand finds COMMAND: on the host's PATH, or by its path, which
// may be inside the view ("/<entry>/bin/server", or a host path inside a
// static root, which then runs from the view). It returns the host path
// (to read its #! and ELF headers), for a command in the view, where, and
// the host directories the server will be able to write from the start (the
// static roots, or the working directory that stands in for them).
func (rf *runFlags) resolveCommand(spec *mountmgr.Spec, static []rootset.Root) (string, *viewPath, []string, error) {
	name := rf.argv[0]
	hostExe, hostErr := resolve.Command(name, os.Getenv("PATH"))
	if hostErr == nil {
		// A version manager's shim cannot run in the sandbox (the manager
		// and its version files are not there): run what it would run.
		cwd, _ := os.Getwd()
		real, _, err := resolve.Shim(hostExe, os.Environ(), cwd)
		if err != nil {
			return "", nil, nil, commandError(err)
		}
		hostExe = real
	}
	if len(static) == 0 {
		// The working directory stands in for the roots, unless it is /
		// or the home directory, which are never served (fallbackRoots):
		// then nothing the server can write is known at start, and
		// install prefixes under the home directory (nvm, pyenv) are
		// followed as usual.
		var writable []string
		if dir, ok, _ := workdirRoot(); ok {
			writable = []string{dir}
		}
		return hostExe, nil, writable, commandError(hostErr)
	}
	// The table the view will start with, named as it will be (the
	// placeholders known so far are reserved; runDaemon checks the name
	// again once the auto-binds have added theirs).
	t := rootset.BuildTable(static, rf.tableOptions(spec))
	defer t.Close()
	var writable []string
	for _, e := range t.Entries() {
		writable = append(writable, e.HostPath)
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
				return hostExe, &viewPath{path: vp, entry: e.ViewPath, host: e.HostPath}, writable, nil
			}
		}
		return hostExe, nil, writable, nil
	}
	if !errors.Is(hostErr, mountmgr.ErrCommandNotFound) || !filepath.IsAbs(name) {
		return "", nil, nil, commandError(hostErr)
	}
	clean := filepath.Clean(name)
	for _, e := range t.Entries() {
		rest, ok := strings.CutPrefix(clean, e.InView())
		if e.Covered || !ok || rest != "" && (!e.IsDir || rest[0] != '/') {
			continue
		}
		host := e.HostPath + rest
		if _, err := resolve.Command(host, ""); err != nil {
			return "", nil, nil, commandError(fmt.Errorf("%w (in the view: %s)", err, clean))
		}
		return host, &viewPath{path: clean, entry: e.ViewPath, host: e.HostPath}, writable, nil
	}
	return "", nil, nil, commandError(hostErr)
}

// hostLayout reports whether --layout is host.
func (rf *runFlags) hostLayout() bool {
	l, _ := rf.run.layout()
	return l == rootset.LayoutHost
}

// tableOptions are the rules the view will build its tables with, for a
// preview before it exists.
func (rf *runFlags) tableOptions(spec *mountmgr.Spec) rootset.TableOptions {
	o := rootset.TableOptions{Allow: rf.run.Allow, Reserved: mountmgr.ReservedNames(spec)}
	if rf.hostLayout() {
		o.Layout, o.Beneath = rootset.LayoutHost, []string{"tmp"}
	}
	return o
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

// writtenSet starts the session's record of what the server can write with
// the read-write binds (nil under control.NoWriteSet).
func writtenSet(spec *mountmgr.Spec) (*rootset.WriteSet, error) {
	if control.On(control.NoWriteSet) {
		return nil, nil
	}
	w := rootset.NewWriteSet(0)
	for _, b := range spec.Binds {
		if b.ReadOnly {
			continue
		}
		if err := w.AddPath(b.Source); err != nil {
			w.Close()
			return nil, fmt.Errorf("--bind %s: %w", b.Source, err)
		}
	}
	return w, nil
}

// serverWritable lists the host directories the server of this session,
// or of an earlier one started the same way, could write: read-write
// binds, the writable static roots (or the working directory standing in
// for them) and the --allow directories, beneath which every client root
// lies.
func (rf *runFlags) serverWritable(spec *mountmgr.Spec, static *rootset.Table, fallback []rootset.Root) []string {
	var out []string
	for _, b := range spec.Binds {
		if !b.ReadOnly {
			out = append(out, b.Source)
		}
	}
	if !rf.roots.ReadOnly {
		for _, e := range static.Entries() {
			if e.IsDir {
				out = append(out, e.HostPath)
			}
		}
		if len(static.Entries()) == 0 {
			for _, r := range fallback {
				if p, err := rootset.ParseRoot(r.URI); err == nil {
					out = append(out, p)
				}
			}
		}
	}
	return append(out, rf.allowDirs()...)
}

// checkBindSources refuses a bind whose source is reached through a
// symlink in a directory the server can write or could earlier (see
// serverWritable), as BuildTable refuses such a root: a server that
// replaced ~/proj/cache by a link to ~/.ssh would otherwise have
// "--ro-bind ~/proj/cache" show it the keys at the next start. The kernel
// resolves the source again when the sandbox mounts it, before this
// session's server runs.
func checkBindSources(binds []mountmgr.Bind, writable []string) error {
	if control.On(control.NoWriteSet) || len(writable) == 0 {
		return nil
	}
	written := rootset.NewWriteSet(0)
	defer written.Close()
	for _, d := range writable {
		_ = written.AddPath(d) // one that cannot be opened holds nothing to follow
	}
	for _, b := range binds {
		if b.Symlink != "" {
			continue // shown as a link: nothing is resolved or mounted
		}
		t := rootset.BuildTable([]rootset.Root{{URI: b.Source}}, rootset.TableOptions{Written: written, ReadOnly: true})
		skipped := t.Skipped()
		t.Close()
		for _, s := range skipped {
			if errors.Is(s.Reason, rootset.ErrWritableSymlink) {
				return fmt.Errorf("%w: bind source %s: %v", ErrUsage, b.Source, s.Reason)
			}
		}
	}
	return nil
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

// outsideRoots drops the mount points that lie inside a static root (host
// layout): the sandbox mounts those binds through the root itself, and a
// mount point there would push the root off its own path.
func outsideRoots(ps []rootset.Placeholder, static []rootset.Root) []rootset.Placeholder {
	var dirs []string
	for _, r := range static {
		if p, err := rootset.ParseRoot(r.URI); err == nil && p != "/" {
			dirs = append(dirs, strings.TrimPrefix(p, "/")+"/")
		}
	}
	out := ps[:0:0]
	for _, p := range ps {
		inside := false
		for _, d := range dirs {
			inside = inside || strings.HasPrefix(p.Name, d)
		}
		if !inside {
			out = append(out, p)
		}
	}
	return out
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
