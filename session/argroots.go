package session

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/mountmgr/resolve"
	"github.com/rootfs-dev/rootfs/rootset"
)

// # Roots from the server's arguments
//
// A server configured with a directory ("server-filesystem ~/proj", "node
// ~/proj/tools/server.mjs", "--db=~/data/app.db") checks it when it
// starts, before any client root can arrive (roots come after initialize).
// MCP 2026-07-28 tells servers to take directories from their
// configuration, so a server's arguments are where the user names them.
// Every argument that names an existing path (absolute, or relative with a
// slash or "." or "..", taken from the working directory; also the value
// of "--flag=PATH") is a root of the session from the first instruction,
// read-write unless --read-only, and stays one whatever the client sends:
// the user named it for this server, and the server was told of it in its
// own arguments, so taking it away when the client's list arrives would
// break the server the user configured (--no-arg-roots turns this off).
//
// Not taken: the script an interpreter runs ("node ~/tools/server.mjs":
// code, which auto-bind shows read-only with its package), paths in the
// runtime directories, /etc, /dev, /proc and /sys
// (the sandbox has its own), and a path inside an installation tree
// (node_modules, site-packages, a version manager's or launcher's
// directory): a script there is installed code, which auto-bind shows
// read-only, never a root the server could rewrite for its next start. Refused, as
// an error that names the argument and the fix, unless the same path is
// given with --root: "/", the home directory or above it, and a path that
// is or lies in a credential directory (~/.ssh, ~/.aws, ~/.gnupg, a .env
// file, ...; ~/.config whole, though a file below it is taken).

// argRootError is an argument that names a path rootfs will not show: a
// usage error whose message is the sentence itself.
type argRootError struct{ msg string }

func (e *argRootError) Error() string        { return e.msg }
func (e *argRootError) Is(target error) bool { return target == ErrUsage }

func argRootErr(format string, args ...any) error {
	return &argRootError{msg: "COMMAND's argument " + fmt.Sprintf(format, args...)}
}

// argCredential says whether an argument's path is or lies in a
// credential directory: auto-bind's list of names, but ~/.config only
// whole (servers take config files from below it).
func argCredential(p, home string) bool {
	elems := strings.Split(p, "/")
	for _, e := range elems {
		switch e {
		case ".ssh", ".aws", ".gnupg", ".gnupg2", ".azure", ".kube", ".docker", ".password-store",
			".netrc", ".git-credentials", ".npmrc", ".pypirc", ".vault-token", "keyrings",
			"id_rsa", "id_ecdsa", "id_ed25519", "id_dsa", ".env":
			return true
		}
		if strings.HasPrefix(e, ".env.") {
			return true
		}
	}
	return home != "" && p == filepath.Join(home, ".config")
}

// argRoots returns the roots the server's arguments name (see the section
// comment), in argument order, each once. explicit are the --root paths:
// one of them named again by an argument is not refused.
func argRoots(o *Options) ([]rootset.Root, error) {
	if o.Roots.NoArgRoots || len(o.Command) < 2 {
		return nil, nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, nil
	}
	home, _ := os.UserHomeDir()
	home = filepath.Clean(home)
	if r, err := filepath.EvalSymlinks(home); err == nil {
		home = r
	}
	explicit := map[string]bool{}
	for _, r := range o.Roots.Named {
		if p, err := rootset.ParseRoot(r); err == nil {
			explicit[p] = true
		} else if abs, err := filepath.Abs(r); err == nil {
			explicit[abs] = true
		}
	}
	exe := o.Command[0]
	if p, err := resolve.Command(exe, os.Getenv("PATH")); err == nil {
		exe = p
	}
	allow := allowDirs(o.Roots.Allow)
	var out []rootset.Root
	for _, c := range ArgPaths(exe, o.Command[1:], cwd, nil) {
		a, p := c.Arg, c.Path
		if explicit[p] {
			continue
		}
		real := p
		if r, err := filepath.EvalSymlinks(p); err == nil {
			real = r
		}
		switch {
		case real == "/" || p == "/":
			return nil, argRootErr("%q is /; give --root for each directory the server needs", a)
		case home != "" && home != "." && (real == home || strings.HasPrefix(home, real+"/")):
			return nil, argRootErr("%q is your home directory or above it, which rootfs never shows whole; give --root %s to mean it, or name a directory below it", a, p)
		case argCredential(real, home) || argCredential(p, home):
			return nil, argRootErr("%q is or lies in a credential directory, which rootfs never shows unasked; give --root %s to mean it", a, p)
		}
		if !allowedBy(real, allow, o.Roots.Allow) {
			return nil, argRootErr("%q is not beneath --allow; give --root %s, or widen --allow", a, p)
		}
		out = append(out, rootset.Root{URI: p})
	}
	return out, nil
}

// ArgPath is an argument that names a path which becomes a root.
type ArgPath struct {
	Arg  string // the argument as given ("--db=~/data/app.db")
	Path string // the absolute, cleaned path it names
}

// ArgPaths returns, in argument order and each path once, the paths that
// args name and that become roots (see the section comment), before the
// refusals: not the script the interpreter exe runs, nor paths in the
// runtime directories or an installation. expand, when not nil, maps a
// value before it is resolved (a client's variables, for wrap's preview).
// It is the one reader of those arguments, for a session and for a
// preview of one.
func ArgPaths(exe string, args []string, cwd string, expand func(string) string) []ArgPath {
	script := resolve.ScriptOperand(exe, args) // code: auto-bind shows it
	seen := map[string]bool{}
	var out []ArgPath
	for i, a := range args {
		if i == script {
			continue
		}
		v := a
		if strings.HasPrefix(a, "-") {
			_, val, ok := strings.Cut(a, "=")
			if !ok {
				continue
			}
			v = val
		}
		if expand != nil {
			v = expand(v)
		}
		p, ok := argPath(v, cwd)
		if !ok || seen[p] {
			continue
		}
		seen[p] = true
		if skipArgPath(p) || installTree(p) {
			continue
		}
		out = append(out, ArgPath{Arg: a, Path: p})
	}
	return out
}

// argPath returns the absolute, cleaned path an argument names when it
// names one that exists.
func argPath(c, cwd string) (string, bool) {
	if c == "" || strings.Contains(c, "://") || strings.ContainsRune(c, 0) {
		return "", false
	}
	if !filepath.IsAbs(c) {
		if c != "." && c != ".." && !strings.Contains(c, "/") {
			return "", false
		}
		if strings.HasPrefix(c, "@") {
			return "", false // an npm package name (@scope/name)
		}
		c = filepath.Join(cwd, c)
	}
	c = filepath.Clean(c)
	if _, err := os.Stat(c); err != nil {
		return "", false
	}
	return c, true
}

// skipArgPath says whether p is the sandbox's own business: the runtime
// directories, /etc, /dev, /proc, /sys.
func skipArgPath(p string) bool {
	for _, d := range append(append([]string{}, mountmgr.DefaultRuntimeDirs...), "/etc", "/dev", "/proc", "/sys") {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
		if r, err := filepath.EvalSymlinks(d); err == nil && (p == r || strings.HasPrefix(p, r+"/")) {
			return true
		}
	}
	return false
}

// installTree says whether p lies in an installation: a package
// directory or a version manager's or launcher's tree.
func installTree(p string) bool {
	for _, e := range strings.Split(p, "/") {
		switch e {
		case "node_modules", "site-packages", "dist-packages", ".npm", ".nvm", ".pyenv", ".asdf", ".rbenv",
			".nodenv", ".cargo", ".rustup", ".cache", ".volta", ".bun", ".deno", "pipx", "mise":
			return true
		}
	}
	return false
}

// allowedBy says whether p lies at or beneath one of the --allow
// directories (resolved), or no --allow was given.
func allowedBy(p string, resolved, given []string) bool {
	if len(given) == 0 {
		return true
	}
	for _, d := range resolved {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}
