package resolve

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/rootfs-dev/rootfs/mountmgr/internal/spec"
)

// # Auto-bind
//
// AutoBind binds, read-only and at the same paths, what the command
// needs to start, so that a server installed the usual ways (a venv, pyenv,
// nvm, asdf, mise, conda, ~/.cargo/bin, a node global prefix, npx, uvx,
// pipx) starts with no --ro-bind. It binds what is needed, never what is
// near: a directory is bound only when an interpreter's own layout says the
// interpreter reads it, never an installation prefix whole, so PREFIX/notes
// and PREFIX/data stay out whatever they are called. Each bind carries its
// reason (Bind.Reason), which the one stderr line and --dry-run show.
//
// The rules, from how the kernel, the ELF loader, CPython and node find
// their files:
//
//   - command, interpreter: the executable and every "#!" interpreter
//     (recursively; the kernel allows four levels, we allow eight; "env
//     NAME" resolved through the PATH the server gets), each with every
//     symlink on the way. A symlink is shown as that symlink (Bind.Symlink),
//     not as a copy of its target: node resolves a script's modules from
//     its real path, CPython its prefix from its executable's.
//   - loader, library: for an ELF file, the loader (PT_INTERP) and the
//     DT_NEEDED libraries found through DT_RPATH / LD_LIBRARY_PATH /
//     DT_RUNPATH ($ORIGIN expanded); a library not found there is the
//     system's, which the runtime directories hold. Nothing else: a static
//     binary (~/.cargo/bin, ~/go/bin, a harness's WORK/bin) is its file.
//   - interpreter lib: an interpreter (a file named by "#!", or a command
//     named like one: python*, pypy*, node, ruby*, perl*, ...) that lies in
//     PREFIX/bin reads PREFIX's installation subtrees, found relative to
//     its own path (CPython's getpath looks for PREFIX/lib/pythonX.Y/os.py,
//     node for PREFIX/lib/node_modules, ruby for PREFIX/lib/ruby): bin,
//     lib, lib32, lib64, libexec, include and share, plus conda-meta and
//     ssl in a conda environment (conda-meta marks one; its OpenSSL reads
//     PREFIX/ssl) and conf and release in a JDK (release and lib/modules
//     mark one). That is a pyenv, asdf, mise, nvm or uv version directory,
//     a conda env or /opt/python. The prefix itself is refused when it is
//     the home directory or above it, a top-level directory or per-user
//     data (~/.local, ~/.cache): ~/bin/python binds no ~/lib.
//   - venv lib: a venv is PREFIX/pyvenv.cfg beside the interpreter's bin
//     (CPython reads it before anything else): pyvenv.cfg, bin, lib*,
//     include and share of the venv, and the base installation its "home"
//     key names, under the interpreter rule.
//   - .pth: every *.pth file in a bound site-packages names directories
//     that CPython's site module puts on sys.path (an editable install, a
//     uv workspace member, a vendored tree): each is bound, as are the
//     absolute paths in setuptools' __editable___*_finder.py MAPPING.
//   - user site: a python script in ~/.local/bin (pip --user) needs
//     ~/.local/lib/pythonX.Y/site-packages, found through PYTHONUSERBASE
//     (the server's HOME is /tmp): that directory alone is bound and
//     PYTHONUSERBASE set.
//   - package: a script run by node is bound with its package, the nearest
//     directory above it holding package.json, not above a node_modules
//     directory (node resolves require() and import from the script's real
//     path upwards): PREFIX/lib/node_modules/pkg, never PREFIX. A package
//     inside a project's node_modules (not a global PREFIX/lib/node_modules)
//     brings that node_modules, where npm hoists its dependencies.
//   - script: the script an interpreter command is given ("node
//     ~/tools/server.mjs"), followed as a "#!" script is.
//   - npm cache, uv cache, uv python, uv tools, pipx home: a launcher's
//     cache (npm/npx, uv/uvx, pipx), see launcherCaches.
//
// Every directory bind then passes the credential guard, the second line:
// it is refused, and only the files themselves are bound, when it is "/",
// a top-level directory, the home directory or one of its ancestors, a
// credential directory or inside one, or when a look three levels down
// finds a credential file or directory (credentialNames) or more than
// scanLimit entries.
//
// Nothing named through a file the server can write (Options.
// Writable: the read-write roots known at start) is bound: a server that
// rewrote a #! line, a symlink, a pyvenv.cfg or a .pth file in its root
// would otherwise choose what the next start shows it.
//
// Not followed: version-manager shims (~/.pyenv/shims/python is a script
// that asks pyenv which version to run, from files in the working
// directory): give the real interpreter's path, which "rootfs wrap" and
// "which -a" show.

const (
	scanDepth    = 3
	scanLimit    = 20000
	maxInterp    = 8
	maxLibraries = 512
)

// MissingError is a file a command needs that does not exist: a symlink's
// target, a "#!" interpreter, an ELF loader. It wraps mountmgr.ErrCommandNotFound.
type MissingError struct {
	What string // "symlink target", "#! interpreter", "ELF loader"
	Path string // what is missing
	From string // the file that names it
	Hint string // the fix, or ""
}

func (e *MissingError) Error() string {
	s := fmt.Sprintf("%s %s named by %s does not exist", e.What, e.Path, e.From)
	if e.What == "command" {
		s = e.Path + " does not exist"
	}
	if e.What == "env" {
		s = fmt.Sprintf("%s runs \"env %s\" but %s is not in the server's PATH", e.From, e.Path, e.Path)
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

func (e *MissingError) Unwrap() error { return spec.ErrCommandNotFound }

// Options configure AutoBind.
type Options struct {
	// Home is the user's home directory: never bound, nor any ancestor of
	// it. "" means $HOME from Lookup.
	Home string
	// Lookup reads rootfs's own environment (cache locations such as
	// npm_config_cache, UV_CACHE_DIR, XDG_CACHE_HOME); nil means os.LookupEnv.
	Lookup func(string) (string, bool)
	// Name is COMMAND as the user typed it ("npx"), for launcher detection.
	Name string
	// InView says the command itself is in the view (a file in a root):
	// its interpreters are followed, the command is not bound.
	InView bool
	// Writable are host directories the server may write (the read-write
	// static roots): nothing named through a file in them is bound.
	Writable []string
	// Args are COMMAND's arguments and Dir the directory it starts from:
	// when COMMAND is an interpreter (node, python, ...), the script its
	// first operand names is followed as a "#!" script is (the file, its
	// package), unless it lies in a writable root, which shows it.
	Args []string
	Dir  string
	// Layers is the directory below which the writes to a launcher
	// cache's overlay are kept across the server's restarts (LayerBase;
	// Bind.Layer is a layer per server, cache and host user, see internal/spec/layer.go);
	// "" means they vanish with the sandbox.
	Layers string
}

// Result is what AutoBind found.
type Result struct {
	// Binds are read-only binds (Overlay set for launcher caches, Symlink
	// for a symlink shown as one), host path = sandbox path, each with its
	// Reason, sorted by path, none beneath a bound directory.
	Binds []spec.Bind
	// Env are K=V entries the launcher or interpreter needs (where its
	// cache is, PYTHONUSERBASE); they go before --setenv, so the user can
	// override them.
	Env []string
	// Refused are paths left out, each with the reason, for the log.
	Refused []string
}

// Paths lists the bound paths, each with its reason, for the one info
// line: "/opt/py/lib (interpreter lib)".
func (a *Result) Paths() []string {
	var out []string
	for _, b := range a.Binds {
		why := b.Reason
		switch {
		case b.Overlay && b.Layer != "":
			why += ", writes kept in " + b.Layer
		case b.Overlay:
			why += ", writes vanish with the sandbox"
		}
		out = append(out, b.Dest+" ("+why+")")
	}
	return out
}

// item is one path to bind: a file, a directory or a symlink shown as one.
type item struct {
	dir     bool
	symlink string // the link's target, as read
	reason  string
}

type resolver struct {
	spec     *spec.Spec
	opts     Options
	home     string
	check    bool // only walk and report what is missing; bind nothing
	visited  map[string]bool
	items    map[string]item
	prefix   map[string]bool // installation prefixes already looked at
	sites    map[string]bool // site-packages directories whose .pth were read
	libs     int
	pthCount int // directories bound from .pth files
	out      Result
}

func newResolver(s *spec.Spec, opts Options, home string) *resolver {
	return &resolver{spec: s, opts: opts, home: home, visited: map[string]bool{}, items: map[string]item{},
		prefix: map[string]bool{}, sites: map[string]bool{}}
}

// AutoBind follows exe (the command's absolute host path) as the
// section comment above says. s (a mountmgr.Spec) supplies the runtime directories (never
// bound: they are there already), the binds given by flags (not repeated)
// and the server's environment (PATH for "env NAME", LD_LIBRARY_PATH). The
// error is a *MissingError (127) when something named is missing, or wraps
// mountmgr.ErrCommandNotExecutable (126).
func AutoBind(s *spec.Spec, exe string, opts Options) (*Result, error) {
	if opts.Lookup == nil {
		opts.Lookup = os.LookupEnv
	}
	home := opts.Home
	if home == "" {
		home, _ = opts.Lookup("HOME")
	}
	if home != "" {
		if r, err := filepath.EvalSymlinks(home); err == nil {
			home = r
		}
	}
	r := newResolver(s, opts, filepath.Clean(home))
	if err := r.exec(exe, "COMMAND", 0, false); err != nil {
		return nil, err
	}
	r.scriptArg(exe)
	r.launcherCaches(exe)
	r.finish()
	return &r.out, nil
}

// DiagnoseExec explains, in the sandbox (P2, after pivot_root), why exec of
// path failed with ENOENT: the first missing symlink target, interpreter or
// loader, as a *MissingError; nil when nothing is found missing.
func DiagnoseExec(path string, env []string) error {
	r := newResolver(&spec.Spec{Env: env, RuntimeDirs: []string{}}, Options{}, "")
	r.check = true
	r.opts.Lookup = func(string) (string, bool) { return "", false }
	err := r.exec(path, "COMMAND", 0, false)
	var me *MissingError
	if errors.As(err, &me) {
		return me
	}
	return nil
}

func (r *resolver) envValue(k string) string {
	for _, kv := range r.spec.Env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	if k == "PATH" {
		return spec.DefaultPath
	}
	return ""
}

// chain returns p, each symlink on the way and the final file, all absolute.
func chain(p, from string) ([]string, error) {
	out := []string{p}
	cur := p
	for i := 0; i < 40; i++ {
		fi, err := os.Lstat(cur)
		if err != nil {
			if i == 0 {
				return nil, &MissingError{What: "command", Path: cur, From: from}
			}
			return nil, &MissingError{What: "symlink target", Path: cur, From: out[len(out)-2] + " (a dangling symlink)"}
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			// Directories on the way may be symlinks too: the kernel
			// resolves them, and the bind must name the real file.
			if real, err := filepath.EvalSymlinks(cur); err == nil && real != cur {
				out = append(out, real)
			}
			return out, nil
		}
		t, err := os.Readlink(cur)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(cur), t)
		}
		cur = filepath.Clean(t)
		out = append(out, cur)
	}
	return nil, fmt.Errorf("%w: %s: too many levels of symbolic links", spec.ErrCommandNotFound, p)
}

// exec follows an executable: its symlinks, its prefix when it is an
// interpreter, and its #! or ELF headers.
func (r *resolver) exec(p, from string, depth int, taint bool) error {
	if depth > maxInterp {
		return fmt.Errorf("%w: %s: more than %d levels of #! interpreters", spec.ErrCommandNotExecutable, p, maxInterp)
	}
	what, reason := "#! interpreter", "interpreter"
	if depth == 0 {
		what, reason = "command", "command"
	}
	links, err := chain(p, from)
	if err != nil {
		var me *MissingError
		if errors.As(err, &me) && me.What == "command" {
			me.What = what
		}
		return err
	}
	final := links[len(links)-1]
	for _, l := range links {
		taint = taint || r.untrusted(l)
	}
	if r.visited[final] {
		return nil
	}
	r.visited[final] = true
	fi, err := os.Stat(final)
	if err != nil {
		return &MissingError{What: what, Path: final, From: from}
	}
	if fi.IsDir() {
		return fmt.Errorf("%w: %s is a directory", spec.ErrCommandNotExecutable, final)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%w: %s is not executable (mode %04o): chmod +x it", spec.ErrCommandNotExecutable, final, fi.Mode().Perm())
	}
	interp := depth > 0 || isInterpreterName(filepath.Base(p)) || isInterpreterName(filepath.Base(final))
	if depth > 0 || !r.opts.InView {
		for _, l := range links {
			if r.refuseTainted(l, taint) {
				continue
			}
			r.addFile(l, reason)
			if interp {
				r.interpreterPrefix(l)
			}
		}
	}
	f, err := os.Open(final)
	if err != nil {
		return fmt.Errorf("%w: %v", spec.ErrCommandNotExecutable, err)
	}
	head := make([]byte, 256)
	n, _ := f.Read(head)
	f.Close()
	head = head[:n]
	switch {
	case n >= 2 && head[0] == '#' && head[1] == '!':
		return r.shebang(final, head, depth, taint)
	case n >= 4 && string(head[:4]) == elf.ELFMAG:
		return r.elf(final, true, taint)
	}
	return nil
}

// interpreterNames are the base names (before any version digits) of
// commands that read an installation prefix at run time, so that
// "~/venv/bin/python -m server" and "~/.nvm/.../bin/node server.js" get
// their prefix's subtrees although they are the command, not a #! line.
var interpreterNames = []string{"python", "pypy", "node", "nodejs", "bun", "deno", "ruby", "perl", "php", "lua", "luajit", "Rscript", "R", "julia", "java", "erl", "elixir", "guile", "tclsh", "wish"}

func isInterpreterName(n string) bool {
	return slices.Contains(interpreterNames, strings.TrimRight(n, "0123456789."))
}

// isNodeName says whether an interpreter runs JavaScript the node way
// (module resolution from the script's real path upwards).
func isNodeName(n string) bool {
	switch strings.TrimRight(n, "0123456789.") {
	case "node", "nodejs", "bun":
		return true
	}
	return false
}

// shebang follows "#!INTERP [ARG]", and "env [-S] NAME" through the PATH;
// then the script's own needs from the interpreter that runs it.
func (r *resolver) shebang(script string, head []byte, depth int, taint bool) error {
	line, _, _ := strings.Cut(string(head[2:]), "\n")
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return fmt.Errorf("%w: %s: empty #! line", spec.ErrCommandNotExecutable, script)
	}
	interp := fields[0]
	if err := r.exec(interp, script, depth+1, taint); err != nil {
		return err
	}
	if filepath.Base(interp) != "env" {
		r.scriptNeeds(script, interp, taint)
		return nil
	}
	// env [-S] [-i] [NAME=V]... NAME: the kernel passes "-S node --flag"
	// as one argument; split it as env -S does.
	var args []string
	for _, f := range fields[1:] {
		args = append(args, strings.Fields(f)...)
	}
	for _, a := range args {
		if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
			continue
		}
		if strings.Contains(a, "/") {
			if err := r.exec(a, script, depth+1, taint); err != nil {
				return err
			}
			r.scriptNeeds(script, a, taint)
			return nil
		}
		for _, dir := range filepath.SplitList(r.envValue("PATH")) {
			if !filepath.IsAbs(dir) {
				continue
			}
			c := filepath.Join(dir, a)
			if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
				if err := r.exec(c, script, depth+1, taint); err != nil {
					return err
				}
				r.scriptNeeds(script, c, taint)
				return nil
			}
		}
		return &MissingError{What: "env", Path: a, From: script,
			Hint: "put its directory on the server's PATH with --setenv PATH=DIR:" + spec.DefaultPath}
	}
	return nil
}

// scriptArg follows the script an interpreter command is given ("node
// ~/tools/server.mjs", "python3 -u srv.py"): its file and what scriptNeeds
// adds. "-m", "-c" and "-e" name no script; other options are skipped.
func (r *resolver) scriptArg(exe string) {
	i := ScriptOperand(exe, r.opts.Args)
	if i < 0 || r.check {
		return
	}
	{
		p := r.opts.Args[i]
		if !filepath.IsAbs(p) {
			if r.opts.Dir == "" {
				return
			}
			p = filepath.Join(r.opts.Dir, p)
		}
		p = filepath.Clean(p)
		if !isFile(p) || r.untrusted(p) || r.underRuntime(p) {
			return
		}
		r.addFile(p, "script")
		if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
			r.addFile(real, "script")
		}
		r.scriptNeeds(p, exe, false)
	}
}

// ScriptOperand returns the index in args of the script an interpreter
// command runs ("node ~/tools/server.mjs", "python3 -u srv.py"), or -1:
// when exe is no interpreter, or "-m", "-c" or "-e" name no script. That
// operand is code, which auto-bind shows read-only with what it needs,
// not a directory the user hands the server.
func ScriptOperand(exe string, args []string) int {
	name := filepath.Base(exe)
	if real, err := filepath.EvalSymlinks(exe); err == nil && !isInterpreterName(name) {
		name = filepath.Base(real)
	}
	if !isInterpreterName(name) {
		return -1
	}
	for i, a := range args {
		switch {
		case a == "-m" || a == "-c" || a == "-e" || a == "--eval" || a == "-p" || a == "--print":
			return -1
		case strings.HasPrefix(a, "-"):
			continue
		}
		return i
	}
	return -1
}

// scriptNeeds adds what a script needs from the interpreter that runs it:
// its package (node), the user site (a pip --user script).
func (r *resolver) scriptNeeds(script, interp string, taint bool) {
	if r.check || taint {
		return
	}
	name := filepath.Base(interp)
	if real, err := filepath.EvalSymlinks(interp); err == nil {
		name = filepath.Base(real)
	}
	switch {
	case isNodeName(name) || isNodeName(filepath.Base(interp)):
		r.nodePackage(script)
	case strings.HasPrefix(name, "python") || strings.HasPrefix(filepath.Base(interp), "python"):
		r.userSite(script)
	}
}

func (r *resolver) underRuntime(p string) bool {
	return r.spec.UnderRuntime(p) || r.spec.UnderBinds(p)
}

// addFile binds one file, or shows a symlink as itself. A directory is
// never bound here (an ELF loader or library path can name one): only
// addDir binds directories, after its checks.
func (r *resolver) addFile(p, reason string) {
	if r.check || r.underRuntime(p) || hasCredentialElem(p) {
		return
	}
	if _, ok := r.items[p]; ok {
		return
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(p)
		if err != nil {
			return
		}
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return // a link to a directory is shown by what binds the directory
		}
		r.items[p] = item{symlink: t, reason: reason}
		return
	}
	if fi.IsDir() {
		return
	}
	r.items[p] = item{reason: reason}
}

// finish turns the items into sorted binds, none beneath a bound
// directory or an overlay.
func (r *resolver) finish() {
	var paths []string
	for p := range r.items {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	covered := func(p string) bool {
		for _, b := range r.out.Binds {
			if strings.HasPrefix(p, b.Dest+"/") || p == b.Dest {
				return true
			}
		}
		for _, q := range paths {
			if r.items[q].dir && q != p && strings.HasPrefix(p, q+"/") {
				return true
			}
		}
		return false
	}
	var binds []spec.Bind
	for _, p := range paths {
		if covered(p) {
			continue
		}
		it := r.items[p]
		binds = append(binds, spec.Bind{Source: p, Dest: p, ReadOnly: true, Symlink: it.symlink, Reason: it.reason})
	}
	r.out.Binds = append(binds, r.out.Binds...)
	sort.Slice(r.out.Binds, func(i, j int) bool { return r.out.Binds[i].Dest < r.out.Binds[j].Dest })
}
