package mountmgr

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// # Auto-bind
//
// ResolveAutoBind binds, read-only and at the same paths, what the command
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
// Nothing named through a file the server can write (AutoBindOptions.
// Writable: the read-write roots known at start) is bound: a server that
// rewrote a #! line, a symlink, a pyvenv.cfg or a .pth file in its root
// would otherwise choose what the next start shows it.
//
// Not followed: version-manager shims (~/.pyenv/shims/python is a script
// that asks pyenv which version to run, from files in the working
// directory): give the real interpreter's path, which "rootfs wrap" and
// "which -a" show.

// credentialNames are entry names that mark a directory as holding
// credentials: a prefix that contains one (three levels down at most) is
// not bound whole, and no path through one is ever auto-bound.
var credentialNames = map[string]bool{
	".ssh": true, ".aws": true, ".gnupg": true, ".gnupg2": true, ".azure": true, ".kube": true,
	".docker": true, ".netrc": true, ".git-credentials": true, ".npmrc": true, ".pypirc": true,
	".password-store": true, ".vault-token": true, ".config": true, "keyrings": true,
	"credentials": true, "credentials.toml": true, "credentials.json": true, "hosts.yml": true,
	"id_rsa": true, "id_ecdsa": true, "id_ed25519": true, "id_dsa": true, ".env": true,
}

func isCredentialName(n string) bool {
	return credentialNames[n] || strings.HasPrefix(n, ".env.")
}

const (
	scanDepth    = 3
	scanLimit    = 20000
	maxInterp    = 8
	maxLibraries = 512
)

// MissingError is a file a command needs that does not exist: a symlink's
// target, a "#!" interpreter, an ELF loader. It wraps ErrCommandNotFound.
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

func (e *MissingError) Unwrap() error { return ErrCommandNotFound }

// AutoBindOptions configure ResolveAutoBind.
type AutoBindOptions struct {
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
	// Bind.Layer is a layer per server, cache and host user, see layer.go);
	// "" means they vanish with the sandbox.
	Layers string
}

// AutoBind is what ResolveAutoBind found.
type AutoBind struct {
	// Binds are read-only binds (Overlay set for launcher caches, Symlink
	// for a symlink shown as one), host path = sandbox path, each with its
	// Reason, sorted by path, none beneath a bound directory.
	Binds []Bind
	// Env are K=V entries the launcher or interpreter needs (where its
	// cache is, PYTHONUSERBASE); they go before --setenv, so the user can
	// override them.
	Env []string
	// Refused are paths left out, each with the reason, for the log.
	Refused []string
}

// Paths lists the bound paths, each with its reason, for the one info
// line: "/opt/py/lib (interpreter lib)".
func (a *AutoBind) Paths() []string {
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
	spec     *Spec
	opts     AutoBindOptions
	home     string
	check    bool // only walk and report what is missing; bind nothing
	visited  map[string]bool
	items    map[string]item
	prefix   map[string]bool // installation prefixes already looked at
	sites    map[string]bool // site-packages directories whose .pth were read
	libs     int
	pthCount int // directories bound from .pth files
	out      AutoBind
}

func newResolver(spec *Spec, opts AutoBindOptions, home string) *resolver {
	return &resolver{spec: spec, opts: opts, home: home, visited: map[string]bool{}, items: map[string]item{},
		prefix: map[string]bool{}, sites: map[string]bool{}}
}

// ResolveAutoBind follows exe (the command's absolute host path) as the
// section comment above says. spec supplies the runtime directories (never
// bound: they are there already), the binds given by flags (not repeated)
// and the server's environment (PATH for "env NAME", LD_LIBRARY_PATH). The
// error is a *MissingError (127) when something named is missing, or wraps
// ErrCommandNotExecutable (126).
func ResolveAutoBind(spec *Spec, exe string, opts AutoBindOptions) (*AutoBind, error) {
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
	r := newResolver(spec, opts, filepath.Clean(home))
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
	spec := &Spec{Env: env, RuntimeDirs: []string{}}
	r := newResolver(spec, AutoBindOptions{}, "")
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
		return DefaultPath
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
	return nil, fmt.Errorf("%w: %s: too many levels of symbolic links", ErrCommandNotFound, p)
}

// exec follows an executable: its symlinks, its prefix when it is an
// interpreter, and its #! or ELF headers.
func (r *resolver) exec(p, from string, depth int, taint bool) error {
	if depth > maxInterp {
		return fmt.Errorf("%w: %s: more than %d levels of #! interpreters", ErrCommandNotExecutable, p, maxInterp)
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
		return fmt.Errorf("%w: %s is a directory", ErrCommandNotExecutable, final)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%w: %s is not executable (mode %04o): chmod +x it", ErrCommandNotExecutable, final, fi.Mode().Perm())
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
		return fmt.Errorf("%w: %v", ErrCommandNotExecutable, err)
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
		return fmt.Errorf("%w: %s: empty #! line", ErrCommandNotExecutable, script)
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
			Hint: "put its directory on the server's PATH with --setenv PATH=DIR:" + DefaultPath}
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

// elf follows an ELF file's loader and its libraries outside the system's.
func (r *resolver) elf(p string, isExec, taint bool) error {
	f, err := elf.Open(p)
	if err != nil {
		return nil // not ours to judge: exec will say
	}
	defer f.Close()
	if isExec {
		for _, prog := range f.Progs {
			if prog.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err != nil {
				continue
			}
			interp := strings.TrimRight(string(b), "\x00")
			links, err := chain(interp, p)
			if err != nil {
				var me *MissingError
				if errors.As(err, &me) {
					me.What = "ELF loader"
				}
				return err
			}
			for _, l := range links {
				if !r.refuseTainted(l, taint) {
					r.addFile(l, "loader")
				}
			}
		}
	}
	needed, rpath, runpath := dynStrings(f)
	origin := filepath.Dir(p)
	var dirs []string
	split := func(list []string) {
		for _, l := range list {
			for _, d := range strings.Split(l, ":") {
				d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
				if filepath.IsAbs(d) {
					dirs = append(dirs, filepath.Clean(d))
				}
			}
		}
	}
	if len(runpath) == 0 {
		split(rpath)
	}
	split([]string{r.envValue("LD_LIBRARY_PATH")})
	split(runpath)
	for _, name := range needed {
		if strings.Contains(name, "/") || r.libs >= maxLibraries {
			continue
		}
		if name == "." || name == ".." {
			continue // a directory, never a library
		}
		for _, d := range dirs {
			lib := filepath.Join(d, name)
			if fi, err := os.Stat(lib); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			links, err := chain(lib, p)
			if err != nil {
				break
			}
			final := links[len(links)-1]
			if !r.visited[final] {
				r.visited[final] = true
				r.libs++
				// A library in a read-write root (found through
				// LD_LIBRARY_PATH or an RPATH) is the server's to
				// rewrite: what it names is tainted too.
				libTaint := taint
				for _, l := range links {
					libTaint = libTaint || r.untrusted(l)
				}
				for _, l := range links {
					if !r.refuseTainted(l, libTaint) {
						r.addFile(l, "library")
					}
				}
				if err := r.elf(final, false, libTaint); err != nil {
					return err
				}
			}
			break
		}
	}
	return nil
}

// maxDynString bounds one string read from .dynstr.
const maxDynString = 4096

// dynStrings returns an ELF file's DT_NEEDED, DT_RPATH and DT_RUNPATH
// strings, reading each from .dynstr where .dynamic points: elf.File.
// DynString loads the whole string table, 5 MB for node, three times,
// which was most of rootfs run's start-up.
func dynStrings(f *elf.File) (needed, rpath, runpath []string) {
	dyn, str := f.Section(".dynamic"), f.Section(".dynstr")
	if dyn == nil || str == nil || dyn.Type != elf.SHT_DYNAMIC {
		needed, _ = f.DynString(elf.DT_NEEDED)
		rpath, _ = f.DynString(elf.DT_RPATH)
		runpath, _ = f.DynString(elf.DT_RUNPATH)
		return needed, rpath, runpath
	}
	data, err := dyn.Data()
	if err != nil {
		return nil, nil, nil
	}
	read := func(off uint64) (string, bool) {
		if off >= str.Size {
			return "", false
		}
		buf := make([]byte, min(uint64(maxDynString), str.Size-off))
		n, _ := str.ReadAt(buf, int64(off))
		s, _, ok := strings.Cut(string(buf[:n]), "\x00")
		return s, ok
	}
	entry := 16
	if f.Class == elf.ELFCLASS32 {
		entry = 8
	}
	for i := 0; i+entry <= len(data); i += entry {
		var tag, val uint64
		if f.Class == elf.ELFCLASS32 {
			tag, val = uint64(f.ByteOrder.Uint32(data[i:])), uint64(f.ByteOrder.Uint32(data[i+4:]))
		} else {
			tag, val = f.ByteOrder.Uint64(data[i:]), f.ByteOrder.Uint64(data[i+8:])
		}
		var list *[]string
		switch elf.DynTag(tag) {
		case elf.DT_NULL:
			return needed, rpath, runpath
		case elf.DT_NEEDED:
			list = &needed
		case elf.DT_RPATH:
			list = &rpath
		case elf.DT_RUNPATH:
			list = &runpath
		default:
			continue
		}
		if s, ok := read(val); ok {
			*list = append(*list, s)
		}
	}
	return needed, rpath, runpath
}

// untrusted reports whether the server may write p: it lies in one of
// AutoBindOptions.Writable (the read-write roots).
//
// p is checked as named and with its directory resolved: a host directory
// that is a symlink into a root (~/tools -> ~/proj/tools) holds files the
// server can rewrite under a name that does not look like the root.
func (r *resolver) untrusted(p string) bool {
	in := func(p string) bool {
		for _, d := range r.opts.Writable {
			if p == d || strings.HasPrefix(p, d+"/") {
				return true
			}
		}
		return false
	}
	if in(p) {
		return true
	}
	if len(r.opts.Writable) == 0 {
		return false
	}
	d, err := filepath.EvalSymlinks(filepath.Dir(p))
	return err == nil && in(filepath.Join(d, filepath.Base(p)))
}

// refuseTainted says (and records) that p, named through a file the
// server can write, is not bound: a server that rewrote a #! line, a
// symlink or pyvenv.cfg in its root would otherwise choose what the next
// start shows it. Paths in the roots themselves are in the view anyway.
func (r *resolver) refuseTainted(p string, taint bool) bool {
	if !taint || r.check || r.underRuntime(p) || r.untrusted(p) {
		return taint
	}
	r.out.Refused = append(r.out.Refused, p+" (named by a file in a read-write root; --ro-bind it, or make the root --read-only)")
	return true
}

func (r *resolver) underRuntime(p string) bool {
	return r.spec.underRuntime(p) || r.spec.underBinds(p)
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

// prefixSubtrees are the entries of an installation prefix an interpreter
// reads; extra ones apply when a marker says which kind it is.
var prefixSubtrees = []string{"bin", "lib", "lib32", "lib64", "libexec", "include", "share"}

// interpreterPrefix binds what an interpreter at p reads of its prefix
// (p in PREFIX/bin): the venv's subtrees and its base installation's when
// PREFIX/pyvenv.cfg says it is a venv, PREFIX's subtrees otherwise.
func (r *resolver) interpreterPrefix(p string) {
	if r.check || r.underRuntime(p) {
		return
	}
	dir := filepath.Dir(p)
	if b := filepath.Base(dir); b != "bin" && b != "sbin" {
		return
	}
	prefix := filepath.Dir(dir)
	cfg := filepath.Join(prefix, "pyvenv.cfg")
	if _, err := os.Stat(cfg); err == nil {
		if !r.installPrefix(prefix, "venv lib") {
			return
		}
		r.addFile(cfg, "venv lib")
		// The venv names its base interpreter's directory; the standard
		// library lives under that prefix (a --copies venv has no link
		// to it in its chain).
		if home := pyvenvHome(cfg); home != "" {
			if r.untrusted(cfg) {
				r.out.Refused = append(r.out.Refused, home+" (named by "+cfg+", which the server can write; --ro-bind it)")
				return
			}
			if filepath.Base(home) == "bin" {
				home = filepath.Dir(home)
			}
			if !r.underRuntime(home) {
				r.installPrefix(home, "interpreter lib")
			}
		}
		return
	}
	r.installPrefix(prefix, "interpreter lib")
}

// installPrefix binds prefix's subtrees (prefixSubtrees and the markers'
// own) for reason, once per prefix; it reports whether prefix may be
// followed at all.
func (r *resolver) installPrefix(prefix, reason string) bool {
	if r.prefix[prefix] {
		return true
	}
	r.prefix[prefix] = true
	if why := r.prefixRefusal(prefix); why != "" {
		r.out.Refused = append(r.out.Refused, prefix+" ("+why+"; only the files the command names are bound)")
		return false
	}
	subs := append([]string(nil), prefixSubtrees...)
	if isDir(filepath.Join(prefix, "conda-meta")) {
		subs = append(subs, "conda-meta", "ssl")
	}
	if isFile(filepath.Join(prefix, "release")) && isFile(filepath.Join(prefix, "lib", "modules")) {
		subs = append(subs, "conf", "release") // a JDK
	}
	for _, s := range subs {
		p := filepath.Join(prefix, s)
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0: // lib64 -> lib
			t, err := os.Readlink(p)
			if err != nil || r.underRuntime(p) || hasCredentialElem(p) {
				continue
			}
			r.items[p] = item{symlink: t, reason: reason}
			if real, err := filepath.EvalSymlinks(p); err == nil && strings.HasPrefix(real, prefix+"/") && isDir(real) {
				r.addDir(real, reason)
			}
		case fi.IsDir():
			r.addDir(p, reason)
		default:
			r.addFile(p, reason)
		}
	}
	r.sitePackages(prefix)
	return true
}

// prefixRefusal says why prefix is no installation to take subtrees of,
// or "": the subtrees of ~ (~/lib, ~/share) or ~/.local (~/.local/share
// holds keyrings and trash) are someone's files, not an installation.
func (r *resolver) prefixRefusal(prefix string) string {
	if !filepath.IsAbs(prefix) || strings.Count(prefix, "/") < 2 {
		return "/ or a top-level directory"
	}
	if r.home != "" && r.home != "." && (prefix == r.home || strings.HasPrefix(r.home, prefix+"/")) {
		return "the home directory or above it"
	}
	if hasCredentialElem(prefix) {
		return "inside a credential directory"
	}
	if r.perUserData(prefix) {
		return "per-user data, not an installation"
	}
	return ""
}

func (r *resolver) perUserData(dir string) bool {
	if r.home == "" {
		return false
	}
	switch rel, _ := filepath.Rel(r.home, dir); rel {
	case ".local", ".local/share", ".local/state", ".cache", "snap", "Library":
		return true
	}
	return false
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// maxPth bounds the .pth files read per site-packages directory, and
// the directories taken from them in all.
const (
	maxPth     = 256
	maxPthDirs = 64
	maxPthSize = 64 << 10
)

// sitePackages reads the .pth files of prefix's site-packages
// (lib*/python*/site-packages) and binds the directories they name.
func (r *resolver) sitePackages(prefix string) {
	for _, pat := range []string{"lib/python*/site-packages", "lib64/python*/site-packages", "lib/pypy*/site-packages", "lib/site-packages"} {
		matches, _ := filepath.Glob(filepath.Join(prefix, pat))
		for _, m := range matches {
			r.pthDirs(m)
		}
	}
}

// pthDirs binds the directories that site's .pth files put on sys.path
// (a line that is a path, relative to site; "import" lines run code and
// name nothing), and the paths of setuptools' editable finders. Nothing is
// taken from a .pth file the server can write.
func (r *resolver) pthDirs(site string) {
	if real, err := filepath.EvalSymlinks(site); err == nil {
		site = real
	}
	if r.sites[site] {
		return
	}
	r.sites[site] = true
	ents, err := os.ReadDir(site)
	if err != nil {
		return
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		var dirs []string
		switch {
		case strings.HasSuffix(name, ".pth"):
			dirs = pthLines(filepath.Join(site, name), site)
		case strings.HasPrefix(name, "__editable___") && strings.HasSuffix(name, "_finder.py"):
			dirs = finderPaths(filepath.Join(site, name))
		default:
			continue
		}
		if n++; n > maxPth {
			r.out.Refused = append(r.out.Refused, site+fmt.Sprintf(" (more than %d .pth files; the rest are not followed)", maxPth))
			return
		}
		from := filepath.Join(site, name)
		for _, d := range dirs {
			if r.pthCount >= maxPthDirs {
				return
			}
			if r.untrusted(from) {
				r.out.Refused = append(r.out.Refused, d+" (named by "+from+", which the server can write; --ro-bind it)")
				continue
			}
			if !isDir(d) || r.untrusted(d) {
				continue // nothing to show, or in a root already
			}
			r.pthCount++
			r.addDir(d, ".pth")
		}
	}
}

// pthLines returns the existing directories a .pth file names.
func pthLines(p, site string) []string {
	b, err := readSmall(p)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "import ") || strings.HasPrefix(l, "import\t") {
			continue
		}
		if !filepath.IsAbs(l) {
			l = filepath.Join(site, l)
		}
		out = append(out, filepath.Clean(l))
	}
	return out
}

// finderPaths returns the absolute paths quoted in the MAPPING line of a
// setuptools editable finder ("MAPPING: dict[str, str] = {'pkg':
// '/home/me/proj/src/pkg'}"): the package directories it imports from.
func finderPaths(p string) []string {
	b, err := readSmall(p)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "MAPPING") {
			continue
		}
		for _, q := range []string{"'", `"`} {
			parts := strings.Split(l, q)
			for i := 1; i < len(parts); i += 2 {
				if filepath.IsAbs(parts[i]) {
					out = append(out, filepath.Clean(parts[i]))
				}
			}
		}
	}
	return out
}

func readSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxPthSize))
}

// userSite binds the user site of a python script in ~/.local/bin
// (pip install --user): PYTHONUSERBASE points CPython at it, since the
// server's HOME is not the user's.
func (r *resolver) userSite(script string) {
	if r.home == "" {
		return
	}
	base := filepath.Join(r.home, ".local")
	if filepath.Dir(script) != filepath.Join(base, "bin") {
		return
	}
	sites, _ := filepath.Glob(filepath.Join(base, "lib", "python*", "site-packages"))
	if len(sites) == 0 {
		return
	}
	for _, s := range sites {
		r.addDir(s, "user site")
		r.pthDirs(s)
	}
	r.out.Env = append(r.out.Env, "PYTHONUSERBASE="+base)
}

// nodePackage binds the package a node script belongs to: the nearest
// directory above it with a package.json, not above a node_modules
// directory, nor the home directory or above. Node resolves the script's
// imports from its real path, so the package's own node_modules and
// files are what it needs; a script in no package is its file alone.
func (r *resolver) nodePackage(script string) {
	real, err := filepath.EvalSymlinks(script)
	if err != nil {
		return
	}
	for d := filepath.Dir(real); strings.Count(d, "/") >= 2; d = filepath.Dir(d) {
		if r.home != "" && (d == r.home || strings.HasPrefix(r.home, d+"/")) {
			return
		}
		if isFile(filepath.Join(d, "package.json")) {
			if r.underRuntime(d) || r.untrusted(d) {
				return
			}
			// In a node_modules tree npm hoists the package's
			// dependencies beside it: node finds them there, so the
			// tree is what it reads (a package outside one has its
			// own node_modules inside).
			for nm := filepath.Dir(d); strings.Count(nm, "/") >= 2; nm = filepath.Dir(nm) {
				if filepath.Base(nm) == "node_modules" {
					// (PREFIX/lib/node_modules is a global prefix, where
					// each package holds its own dependencies: the
					// package alone, not every global package.)
					if filepath.Base(filepath.Dir(nm)) != "lib" && r.unsafeDir(nm) == "" {
						r.addDir(nm, "package")
						return
					}
					break
				}
			}
			r.addDir(d, "package")
			return
		}
		if filepath.Base(filepath.Dir(d)) == "node_modules" || filepath.Base(d) == "node_modules" {
			return
		}
	}
}

// addDir binds dir read-only when it is safe to show whole (see the
// section comment); it reports whether it did (or the runtime has it).
func (r *resolver) addDir(dir, reason string) bool {
	dir = filepath.Clean(dir)
	if r.underRuntime(dir) {
		return true
	}
	if it, ok := r.items[dir]; ok && it.dir {
		return true
	}
	if reason := r.unsafeDir(dir); reason != "" {
		r.out.Refused = append(r.out.Refused, dir+" ("+reason+")")
		return false
	}
	r.items[dir] = item{dir: true, reason: reason}
	return true
}

// unsafeDir says why dir may not be bound whole, or "". The mount follows
// symlinks, so dir is judged under its real name too (/alias -> ~).
func (r *resolver) unsafeDir(dir string) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		if why := r.unsafePath(real); why != "" {
			return why
		}
	}
	return r.unsafePath(dir)
}

func (r *resolver) unsafePath(dir string) string {
	if !filepath.IsAbs(dir) || strings.Count(dir, "/") < 2 {
		return "/ or a top-level directory"
	}
	if r.home != "" && r.home != "." && (dir == r.home || strings.HasPrefix(r.home, dir+"/")) {
		return "the home directory or above it"
	}
	if hasCredentialElem(dir) {
		return "inside a credential directory"
	}
	if r.perUserData(dir) {
		// Per-user data (pip --user, XDG data and state), not an
		// installation: history, keyrings, trash and the like.
		return "per-user data, not an installation"
	}
	if name, n := scanCredentials(dir); name != "" {
		return "holds " + name
	} else if n > scanLimit {
		return fmt.Sprintf("more than %d entries to check", scanLimit)
	}
	return ""
}

func hasCredentialElem(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if isCredentialName(e) {
			return true
		}
	}
	return false
}

// scanCredentials looks scanDepth levels into dir for a credential name;
// it returns the first found (relative), or "" and the entries seen.
func scanCredentials(dir string) (string, int) {
	type item struct {
		path  string
		depth int
	}
	queue := []item{{dir, 0}}
	seen := 0
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		ents, err := os.ReadDir(it.path)
		if err != nil {
			continue
		}
		for _, e := range ents {
			seen++
			if seen > scanLimit {
				return "", seen
			}
			p := filepath.Join(it.path, e.Name())
			if isCredentialName(e.Name()) {
				rel, _ := filepath.Rel(dir, p)
				return rel, seen
			}
			if e.IsDir() && it.depth+1 < scanDepth {
				queue = append(queue, item{p, it.depth + 1})
			}
		}
	}
	return "", seen
}

// pyvenvHome returns the "home" key of a pyvenv.cfg, or "".
func pyvenvHome(cfg string) string {
	f, err := os.Open(cfg)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.TrimSpace(k) == "home" {
			v = strings.TrimSpace(v)
			if filepath.IsAbs(v) {
				return filepath.Clean(v)
			}
		}
	}
	return ""
}

// launcherCaches adds the cache of a launcher that fetches packages
// (npx/npm exec, uvx/uv, pipx), so that it starts from the user's cache.
//
// A cache is never shared read-write: npx installs into <cache>/_npx as
// plain files that the user later runs outside any sandbox, so a server
// that could write there could plant code in every other npx package.
// Launchers must write, though (npx takes a lock file and records what it
// installed), and so do servers that keep their data beside their code
// (server-memory), so the cache is the read-only lower layer of an
// overlay whose writable layer is kept per server below opts.Layers (see
// layer.go), or, with no Layers, lives in the sandbox's /tmp and vanishes
// with it. A warm cache starts without a download; a cold one downloads
// into the server's layer (or into memory, each time).
func (r *resolver) launcherCaches(exe string) {
	names := map[string]bool{filepath.Base(r.opts.Name): true, filepath.Base(exe): true}
	for v := range r.visited {
		names[filepath.Base(v)] = true
	}
	get := func(k string) string {
		v, _ := r.opts.Lookup(k)
		return v
	}
	dataHome := get("XDG_DATA_HOME")
	if dataHome == "" && r.home != "" {
		dataHome = filepath.Join(r.home, ".local", "share")
	}
	cacheHome := get("XDG_CACHE_HOME")
	if cacheHome == "" && r.home != "" {
		cacheHome = filepath.Join(r.home, ".cache")
	}
	first := func(vals ...string) string {
		for _, v := range vals {
			if v != "" {
				return v
			}
		}
		return ""
	}
	cache := func(dir, reason, envName string, overlay bool, extraEnv ...string) {
		if dir == "" || !filepath.IsAbs(dir) {
			return
		}
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		} else {
			return // no cache yet: the launcher downloads into /tmp as before
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return
		}
		if r.home != "" && (dir == r.home || strings.HasPrefix(r.home, dir+"/")) || hasCredentialElem(dir) || strings.Count(dir, "/") < 2 {
			r.out.Refused = append(r.out.Refused, dir+" (cache in an unsafe place)")
			return
		}
		if !r.underRuntime(dir) {
			b := Bind{Source: dir, Dest: dir, ReadOnly: true, Overlay: overlay, Reason: reason}
			if overlay && r.opts.Layers != "" {
				b.Layer = layerDir(r.opts.Layers, hostUID(), append([]string{r.opts.Name}, r.opts.Args...), reason, dir)
			}
			r.out.Binds = append(r.out.Binds, b)
		}
		if envName != "" {
			r.out.Env = append(r.out.Env, envName+"="+dir)
		}
		r.out.Env = append(r.out.Env, extraEnv...)
	}
	switch {
	case names["npx"] || names["npm"] || names["npx-cli.js"] || names["npm-cli.js"]:
		npmCache := first(get("npm_config_cache"), get("NPM_CONFIG_CACHE"))
		if npmCache == "" && r.home != "" {
			npmCache = filepath.Join(r.home, ".npm")
		}
		// prefer-offline: take what the cache has without asking the
		// registry first (npx revalidates every start otherwise, which
		// is seconds online and a hang with --no-network).
		cache(npmCache, "npm cache", "npm_config_cache", true, "npm_config_prefer_offline=true", "npm_config_update_notifier=false")
	case names["uvx"] || names["uv"]:
		cache(first(get("UV_CACHE_DIR"), filepath.Join(cacheHome, "uv")), "uv cache", "UV_CACHE_DIR", true)
		// uv takes locks in its Python and tool directories too.
		cache(first(get("UV_PYTHON_INSTALL_DIR"), filepath.Join(dataHome, "uv", "python")), "uv python", "UV_PYTHON_INSTALL_DIR", true)
		cache(first(get("UV_TOOL_DIR"), filepath.Join(dataHome, "uv", "tools")), "uv tools", "UV_TOOL_DIR", true)
	case names["pipx"]:
		cache(first(get("PIPX_HOME"), filepath.Join(dataHome, "pipx")), "pipx home", "PIPX_HOME", true)
	}
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
	var binds []Bind
	for _, p := range paths {
		if covered(p) {
			continue
		}
		it := r.items[p]
		binds = append(binds, Bind{Source: p, Dest: p, ReadOnly: true, Symlink: it.symlink, Reason: it.reason})
	}
	r.out.Binds = append(binds, r.out.Binds...)
	sort.Slice(r.out.Binds, func(i, j int) bool { return r.out.Binds[i].Dest < r.out.Binds[j].Dest })
}
