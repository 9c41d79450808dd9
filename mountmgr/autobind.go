package mountmgr

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// # Auto-bind
//
// ResolveAutoBind follows what a command needs to start and returns it as
// read-only binds at the same paths, so that a server installed the usual
// ways (a venv, pyenv, nvm, ~/.cargo/bin, npx, uvx, pipx) starts with no
// --ro-bind. It follows, on the host:
//
//   - the executable through every symlink (each link and the target);
//   - its "#!" interpreter, recursively (the kernel allows four levels; we
//     allow eight), "env NAME" resolved through the PATH the server gets;
//   - for an ELF file, the loader (PT_INTERP) and the DT_NEEDED libraries
//     found through DT_RPATH / LD_LIBRARY_PATH / DT_RUNPATH ($ORIGIN
//     expanded); a library not found there is the system's, which the
//     runtime directories already hold;
//   - the installation prefix of every file in the chain that lies in a
//     bin/ or sbin/ directory (its parent: a venv, ~/.pyenv/versions/X,
//     ~/.nvm/versions/node/X) and a venv's base prefix (pyvenv.cfg "home");
//   - a launcher's cache (npm/npx, uv/uvx, pipx), see launcherCaches.
//
// A prefix is refused, and only the files themselves are bound, when it is
// "/", a top-level directory, the home directory or one of its ancestors, a
// credential directory or inside one, or when a look three levels down
// finds a credential file or directory (credentialNames) or more than
// scanLimit entries: "~/bin/server" binds the file, never "~", and a
// project's bin/ beside a .env binds the file, never the project.
//
// Nothing named through a file the server can write (AutoBindOptions.
// Writable: the read-write roots known at start) is bound: a server that
// rewrote a #! line, a symlink or a pyvenv.cfg in its root would otherwise
// choose what the next start shows it.

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
}

// AutoBind is what ResolveAutoBind found.
type AutoBind struct {
	// Binds are read-only binds (Overlay set for launcher caches), host
	// path = sandbox path, sorted by path, none beneath another.
	Binds []Bind
	// Env are K=V entries the launcher needs (where its cache is); they go
	// before --setenv, so the user can override them.
	Env []string
	// Refused are prefixes left out, each with the reason, for the log.
	Refused []string
}

// Paths lists the bound paths (overlays marked), for the one info line.
func (a *AutoBind) Paths() []string {
	var out []string
	for _, b := range a.Binds {
		p := b.Dest
		if b.Overlay {
			p += " (cache, private writes)"
		}
		out = append(out, p)
	}
	return out
}

type resolver struct {
	spec    *Spec
	opts    AutoBindOptions
	home    string
	check   bool // only walk and report what is missing; bind nothing
	visited map[string]bool
	files   map[string]bool
	dirs    map[string]bool
	libs    int
	out     AutoBind
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
	r := &resolver{spec: spec, opts: opts, home: filepath.Clean(home), visited: map[string]bool{}, files: map[string]bool{}, dirs: map[string]bool{}}
	if err := r.exec(exe, "COMMAND", 0, false); err != nil {
		return nil, err
	}
	r.launcherCaches(exe)
	r.finish()
	return &r.out, nil
}

// DiagnoseExec explains, in the sandbox (P2, after pivot_root), why exec of
// path failed with ENOENT: the first missing symlink target, interpreter or
// loader, as a *MissingError; nil when nothing is found missing.
func DiagnoseExec(path string, env []string) error {
	spec := &Spec{Env: env, RuntimeDirs: []string{}}
	r := &resolver{spec: spec, check: true, visited: map[string]bool{}, files: map[string]bool{}, dirs: map[string]bool{}}
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

// exec follows an executable: its symlinks, prefix, and #! or ELF.
func (r *resolver) exec(p, from string, depth int, taint bool) error {
	if depth > maxInterp {
		return fmt.Errorf("%w: %s: more than %d levels of #! interpreters", ErrCommandNotExecutable, p, maxInterp)
	}
	what := "#! interpreter"
	if depth == 0 {
		what = "command"
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
	if depth > 0 || !r.opts.InView {
		for _, l := range links {
			if r.refuseTainted(l, taint) {
				continue
			}
			r.addFile(l)
			r.addPrefix(l)
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

// shebang follows "#!INTERP [ARG]", and "env [-S] NAME" through the PATH.
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
			return r.exec(a, script, depth+1, taint)
		}
		for _, dir := range filepath.SplitList(r.envValue("PATH")) {
			if !filepath.IsAbs(dir) {
				continue
			}
			c := filepath.Join(dir, a)
			if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
				return r.exec(c, script, depth+1, taint)
			}
		}
		return &MissingError{What: "env", Path: a, From: script,
			Hint: "put its directory on the server's PATH with --setenv PATH=DIR:" + DefaultPath}
	}
	return nil
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
					r.addFile(l)
				}
			}
		}
	}
	needed, _ := f.DynString(elf.DT_NEEDED)
	rpath, _ := f.DynString(elf.DT_RPATH)
	runpath, _ := f.DynString(elf.DT_RUNPATH)
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
		for _, d := range dirs {
			lib := filepath.Join(d, name)
			if _, err := os.Stat(lib); err != nil {
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
				for _, l := range links {
					if !r.refuseTainted(l, taint) {
						r.addFile(l)
					}
				}
				if err := r.elf(final, false, taint); err != nil {
					return err
				}
			}
			break
		}
	}
	return nil
}

// untrusted reports whether the server may write p: it lies in one of
// AutoBindOptions.Writable (the read-write roots).
func (r *resolver) untrusted(p string) bool {
	for _, d := range r.opts.Writable {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
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

// addFile binds one file (a symlink path gets its target's content).
func (r *resolver) addFile(p string) {
	if r.check || r.underRuntime(p) || hasCredentialElem(p) {
		return
	}
	r.files[p] = true
}

// addPrefix binds the installation prefix of a file in bin/ or sbin/, and
// a venv's base prefix.
func (r *resolver) addPrefix(p string) {
	if r.check {
		return
	}
	dir := filepath.Dir(p)
	if b := filepath.Base(dir); b != "bin" && b != "sbin" {
		return
	}
	prefix := filepath.Dir(dir)
	if r.dirs[prefix] {
		return
	}
	if !r.addDir(prefix) {
		return
	}
	// A venv names its base interpreter's directory; the standard library
	// lives under that prefix.
	if home := pyvenvHome(filepath.Join(prefix, "pyvenv.cfg")); home != "" {
		if filepath.Base(home) == "bin" {
			home = filepath.Dir(home)
		}
		r.addDir(home)
	}
}

// addDir binds dir read-only when it is safe to show whole (see the
// section comment); it reports whether it did (or the runtime has it).
func (r *resolver) addDir(dir string) bool {
	dir = filepath.Clean(dir)
	if r.underRuntime(dir) {
		return true
	}
	if reason := r.unsafeDir(dir); reason != "" {
		r.out.Refused = append(r.out.Refused, dir+" ("+reason+")")
		return false
	}
	r.dirs[dir] = true
	return true
}

// unsafeDir says why dir may not be bound whole, or "".
func (r *resolver) unsafeDir(dir string) string {
	if !filepath.IsAbs(dir) || strings.Count(dir, "/") < 2 {
		return "/ or a top-level directory"
	}
	if r.home != "" && r.home != "." && (dir == r.home || strings.HasPrefix(r.home, dir+"/")) {
		return "the home directory or above it"
	}
	if hasCredentialElem(dir) {
		return "inside a credential directory"
	}
	if r.home != "" {
		switch rel, _ := filepath.Rel(r.home, dir); rel {
		case ".local", ".local/share", ".local/state", ".cache", "snap", "Library":
			// Per-user data (pip --user, XDG data and state), not an
			// installation: history, keyrings, trash and the like.
			return "per-user data, not an installation"
		}
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
// installed), so the cache is the read-only lower layer of an overlay
// whose writable layer lives in the sandbox's private /tmp and vanishes
// with it: a warm cache starts without a download, a cold one downloads
// into memory each time, as before.
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
	cache := func(dir, envName string, overlay bool, extraEnv ...string) {
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
			r.out.Binds = append(r.out.Binds, Bind{Source: dir, Dest: dir, ReadOnly: true, Overlay: overlay})
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
		cache(npmCache, "npm_config_cache", true, "npm_config_prefer_offline=true", "npm_config_update_notifier=false")
	case names["uvx"] || names["uv"]:
		cache(first(get("UV_CACHE_DIR"), filepath.Join(cacheHome, "uv")), "UV_CACHE_DIR", true)
		// uv takes locks in its Python and tool directories too.
		cache(first(get("UV_PYTHON_INSTALL_DIR"), filepath.Join(dataHome, "uv", "python")), "UV_PYTHON_INSTALL_DIR", true)
		cache(first(get("UV_TOOL_DIR"), filepath.Join(dataHome, "uv", "tools")), "UV_TOOL_DIR", true)
	case names["pipx"]:
		cache(first(get("PIPX_HOME"), filepath.Join(dataHome, "pipx")), "PIPX_HOME", true)
	}
}

// finish turns the sets into sorted binds, none beneath a bound directory.
func (r *resolver) finish() {
	all := map[string]bool{} // path -> is a directory
	for f := range r.files {
		all[f] = false
	}
	for d := range r.dirs {
		all[d] = true
	}
	var paths []string
	for p := range all {
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
			if all[q] && q != p && strings.HasPrefix(p, q+"/") {
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
		binds = append(binds, Bind{Source: p, Dest: p, ReadOnly: true})
	}
	r.out.Binds = append(binds, r.out.Binds...)
	sort.Slice(r.out.Binds, func(i, j int) bool { return r.out.Binds[i].Dest < r.out.Binds[j].Dest })
}
