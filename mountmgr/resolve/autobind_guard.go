package resolve

// The second line: what auto-bind never binds, whatever a rule found (see
// autobind.go's section comment), and what the server could have named.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

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

// untrusted reports whether the server may write p: it lies in one of
// Options.Writable (the read-write roots).
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
