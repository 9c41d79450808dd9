package resolve

// What an interpreter reads of its installation: prefixes, venvs, .pth
// files, the user site, a node package (see autobind.go's section comment).

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

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
