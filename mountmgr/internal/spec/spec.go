// Package spec is the sandbox's spec: what to run and what it may see
// (Spec, Bind), the placeholders the view provides for it, the server's
// environment, and the sentinel errors of the sandbox and of command
// resolution. It lies below both the sandbox (package mountmgr, which
// gives these their public names) and command resolution
// (mountmgr/resolve, which fills in a spec's binds on the host and, in
// the sandbox's init, explains a failed exec), so that neither imports
// the other's job to share them. It reads the host (lstat) but mounts
// nothing.
package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rootfs-dev/rootfs/rootset"
)

// Sentinel errors; callers branch on them with errors.Is (package
// mountmgr gives them their public names).
var (
	// ErrCommandNotFound: COMMAND does not exist (exit status 127).
	ErrCommandNotFound = errors.New("command not found")
	// ErrCommandNotExecutable: COMMAND exists but cannot be run (exit status 126).
	ErrCommandNotExecutable = errors.New("command not executable")
	// ErrBadSpec: a flag or spec value is invalid (exit status 125).
	ErrBadSpec = errors.New("bad sandbox spec")
	// ErrSetup: the sandbox could not be built (exit status 125). The
	// message is one line from the stage that failed.
	ErrSetup = errors.New("sandbox setup failed")
	// ErrUnsupported: the kernel or policy forbids what the sandbox needs;
	// the message says what is missing and how to enable it (exit status 125).
	ErrUnsupported = errors.New("sandbox unsupported here")
)

// Bind is one --bind or --ro-bind: Source on the host appears at Dest
// (absolute, in the sandbox; empty means the same path as Source).
type Bind struct {
	Source   string `json:"source"`
	Dest     string `json:"dest"`
	ReadOnly bool   `json:"readOnly"`
	// Overlay makes Source the read-only lower layer of an overlay the
	// server may write: nothing it writes reaches Source. Where the writes
	// go is Layer's to say. Launcher caches only.
	Overlay bool `json:"overlay,omitempty"`
	// Layer, for an Overlay, is a host directory holding the overlay's
	// writable layer (Layer/upper, with Layer/work beside it), kept after
	// the sandbox ends so that the server finds its writes at its next
	// start (see mountmgr.PrepareLayers); "" puts the writable layer in the
	// sandbox's /tmp, where it vanishes with the sandbox.
	Layer string `json:"layer,omitempty"`
	// Symlink, when set, shows Dest as a symlink with this target (as
	// read from Source, a symlink on the host) instead of mounting
	// anything: node and CPython resolve their files from a script's or
	// an interpreter's real path. Auto-bind only.
	Symlink string `json:"symlink,omitempty"`
	// Reason says why auto-bind added it ("interpreter", "library",
	// "venv lib", ".pth", "npm cache", ...); "" for a flag's bind.
	Reason string `json:"reason,omitempty"`
}

// ParseBind parses "SRC[:DST]" (SRC must be absolute; DST defaults to SRC).
func ParseBind(s string, readOnly bool) (Bind, error) {
	src, dst, _ := strings.Cut(s, ":")
	if !filepath.IsAbs(src) {
		return Bind{}, fmt.Errorf("%w: bind source %q must be an absolute path", ErrBadSpec, src)
	}
	if dst == "" {
		dst = src
	}
	if !filepath.IsAbs(dst) {
		return Bind{}, fmt.Errorf("%w: bind destination %q must be an absolute path", ErrBadSpec, dst)
	}
	b := Bind{Source: filepath.Clean(src), Dest: filepath.Clean(dst), ReadOnly: readOnly}
	if b.Dest == "/" {
		return Bind{}, fmt.Errorf("%w: bind destination may not be /", ErrBadSpec)
	}
	return b, nil
}

// DefaultRuntimeDirs are bind-mounted read-only, as they exist on the host
// (a host symlink such as /bin -> usr/bin stays a symlink).
var DefaultRuntimeDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// DefaultEtcFiles is the short list of /etc entries (relative to /etc)
// bound read-only into the sandbox's /etc tmpfs: loader, resolver, users,
// CA certificates, alternatives and time zone. Not shadow files, not
// /etc/ssl/private, not the whole of /etc.
var DefaultEtcFiles = []string{
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"resolv.conf", "hosts", "host.conf", "nsswitch.conf", "gai.conf", "services", "protocols",
	"passwd", "group",
	"ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf", "pki/tls/certs",
	"alternatives", "localtime", "timezone", "mime.types",
}

// Spec says what to run and what it may see. The zero values of the
// optional fields mean the defaults documented on each.
type Spec struct {
	// NewRoot is the directory (in P1's mount namespace) that becomes the
	// server's "/": the FUSE view, or in tests a plain directory or tmpfs
	// holding the placeholders from Placeholders.
	NewRoot string `json:"newRoot"`
	// Argv is the command; Argv[0] is the absolute host path from
	// resolve.Command (the executable, not its directory, is bound read-only
	// when it lies outside the runtime directories and Binds do not hold
	// it), or a path in the view when CommandInView.
	Argv []string `json:"argv"`
	// Env is the server's whole environment (see BuildEnv). Nothing of
	// rootfs's own environment is passed.
	Env []string `json:"env"`
	// Dir is the server's working directory in the sandbox; "" means "/".
	Dir string `json:"dir"`
	// Binds are the extra --bind/--ro-bind mounts, applied after the runtime.
	Binds []Bind `json:"binds"`
	// NoNetwork gives the server a new network namespace with only lo.
	NoNetwork bool `json:"noNetwork"`
	// Net gives the server a new network namespace whose way
	// out is a TUN device handed to P1 (see NetSpec). nil with NoNetwork
	// false: the server shares the host's network namespace.
	Net *NetSpec `json:"net,omitempty"`
	// AllowUnixSockets lets the server make socket files in its roots and
	// connect to host sockets there. By default the sandbox refuses both
	// as far as the kernel's Landlock can (mountmgr/landlock_linux.go): making
	// them from ABI 2 (Linux 5.19), connecting from ABI 9 (Linux 7.1).
	AllowUnixSockets bool `json:"allowUnixSockets,omitempty"`
	// RuntimeDirs replaces DefaultRuntimeDirs when non-nil.
	RuntimeDirs []string `json:"runtimeDirs"`
	// EtcFiles replaces DefaultEtcFiles when non-nil.
	EtcFiles []string `json:"etcFiles"`
	// TmpSize is the size= of the private /tmp tmpfs; "" means "256m".
	TmpSize string `json:"tmpSize"`
	// AutoBind says the binds were completed by resolve.AutoBind; it only
	// changes the hint of an exec error ("drop --no-auto-bind").
	AutoBind bool `json:"autoBind"`
	// CommandInView says Argv[0] is a path inside the view (a file in a
	// root), not a host path: it is not bound, the view has it.
	CommandInView bool `json:"commandInView"`
	// HostLayout says the view shows roots at their host paths
	// (rootset.LayoutHost): the view then provides every bind's mount point
	// below its synthetic directories (Placeholders), and the sandbox
	// makes no tmpfs scaffold that would hide them.
	HostLayout bool `json:"hostLayout,omitempty"`
	// TmpRoots are the first components below /tmp of the roots the view
	// holds at start (host layout, see TmpRoots): the sandbox shows the
	// view's tmp/X at /tmp/X before the server starts.
	TmpRoots []string `json:"tmpRoots,omitempty"`
}

// RuntimeDirList is RuntimeDirs, or DefaultRuntimeDirs when nil.
func (s *Spec) RuntimeDirList() []string {
	if s.RuntimeDirs != nil {
		return s.RuntimeDirs
	}
	return DefaultRuntimeDirs
}

// EtcFileList is EtcFiles, or DefaultEtcFiles when nil.
func (s *Spec) EtcFileList() []string {
	if s.EtcFiles != nil {
		return s.EtcFiles
	}
	return DefaultEtcFiles
}

// TmpSizeOrDefault is TmpSize, or "256m" when empty.
func (s *Spec) TmpSizeOrDefault() string {
	if s.TmpSize != "" {
		return s.TmpSize
	}
	return "256m"
}

// sandboxDirs are always provided and always mounted by P2.
var sandboxDirs = []string{"etc", "dev", "proc", "tmp"}

// Placeholders lists, sorted by name, the top-level entries the view must
// provide for spec (vfs.Options.Placeholders) before the sandbox starts, each
// an empty directory to mount on or a symlink that mirrors the host's: the
// runtime directories as they exist on the host
// (symlinks stay symlinks), etc, dev, proc, tmp, and the top-level of every
// bind destination and of COMMAND's directory when outside the runtime.
// It reads the host (lstat), so call it in P0 or P1 before building the view.
func Placeholders(spec *Spec) []rootset.Placeholder {
	seen := map[string]rootset.Placeholder{}
	for _, d := range spec.RuntimeDirList() {
		name := TopLevel(d)
		fi, err := os.Lstat(d)
		if err != nil || name == "" {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 && filepath.Dir(filepath.Clean(d)) == "/" {
			target, err := os.Readlink(d)
			if err == nil {
				seen[name] = rootset.Placeholder{Name: name, Symlink: target}
				continue
			}
		}
		if fi.IsDir() {
			seen[name] = rootset.Placeholder{Name: name}
		}
	}
	for _, n := range sandboxDirs {
		seen[n] = rootset.Placeholder{Name: n}
	}
	if spec.HostLayout {
		for _, p := range spec.bindPoints(seen) {
			seen[p.Name] = p
		}
	}
	for _, b := range spec.AllBinds() {
		n := TopLevel(b.Dest)
		if _, ok := seen[n]; !ok && n != "" && !spec.HostLayout {
			seen[n] = rootset.Placeholder{Name: n}
		}
	}
	out := make([]rootset.Placeholder, 0, len(seen))
	for _, p := range seen {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// bindPoints are, in host layout, the mount points of the binds whose
// destination is not in a directory the sandbox mounts itself (direct):
// each at its own path, a file for a single-file bind, and none for a bind
// below another one (the outer bind holds it).
func (s *Spec) bindPoints(direct map[string]rootset.Placeholder) []rootset.Placeholder {
	binds := s.AllBinds()
	var out []rootset.Placeholder
	for _, b := range binds {
		dest := filepath.Clean(b.Dest)
		if _, ok := direct[TopLevel(dest)]; ok && TopLevel(dest) != "tmp" {
			// (Below /tmp the view holds the mount point too: a root
			// below /tmp brings the view's tmp/X over the sandbox's
			// /tmp/X, see mountmgr/kpath/tmproots_linux.go.)
			continue
		}
		inner := false
		for _, o := range binds {
			if od := filepath.Clean(o.Dest); od != dest && strings.HasPrefix(dest, od+"/") {
				inner = true
			}
		}
		if inner {
			continue
		}
		p := rootset.Placeholder{Name: strings.TrimPrefix(dest, "/"), Symlink: b.Symlink}
		if fi, err := os.Stat(b.Source); err == nil && !fi.IsDir() && !b.Overlay && b.Symlink == "" {
			p.File = true
		}
		out = append(out, p)
	}
	return out
}

// ReservedNames is Placeholders reduced to names, for rootset.TableOptions.Reserved.
func ReservedNames(spec *Spec) []string {
	var out []string
	for _, p := range Placeholders(spec) {
		out = append(out, p.Name)
	}
	return out
}

// PreparePlaceholders creates the placeholders in a plain directory (tests,
// or a tmpfs standing in for the view).
func PreparePlaceholders(dir string, ps []rootset.Placeholder) error {
	for _, p := range ps {
		path := filepath.Join(dir, p.Name)
		var err error
		if p.Symlink != "" {
			err = os.Symlink(p.Symlink, path)
		} else {
			err = os.Mkdir(path, 0o755)
		}
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("placeholder: %w", err)
		}
	}
	return nil
}

// TopLevel is the first component of the absolute path p ("" for /).
func TopLevel(p string) string {
	p = strings.TrimPrefix(filepath.Clean(p), "/")
	n, _, _ := strings.Cut(p, "/")
	return n
}

// UnderRuntime reports whether p lies in a runtime placeholder (host
// directory or symlink), i.e. is reachable without an extra bind.
func (s *Spec) UnderRuntime(p string) bool {
	n := TopLevel(p)
	for _, d := range s.RuntimeDirList() {
		if TopLevel(d) == n {
			return true
		}
	}
	return false
}

// UnderBinds reports whether p is at or beneath a directory or file of Binds.
func (s *Spec) UnderBinds(p string) bool {
	for _, b := range s.Binds {
		if p == b.Dest || strings.HasPrefix(p, b.Dest+"/") {
			return true
		}
	}
	return false
}

// AllBinds is Binds plus read-only binds of COMMAND's directory (and of the
// directory of its symlink target) when outside the runtime directories.
func (s *Spec) AllBinds() []Bind {
	binds := append([]Bind(nil), s.Binds...)
	if len(s.Argv) == 0 || !filepath.IsAbs(s.Argv[0]) || s.CommandInView {
		return binds
	}
	// Only the executable itself (and, for a symlink, the file it resolves
	// to) is shown, never its directory: "rootfs run -- ~/server" must not
	// expose the whole home directory. What else a command needs is given
	// with --ro-bind.
	dirs := []string{s.Argv[0]}
	if r, err := filepath.EvalSymlinks(s.Argv[0]); err == nil && r != s.Argv[0] {
		dirs = append(dirs, r)
	}
	for _, d := range dirs {
		if s.UnderRuntime(d) {
			continue
		}
		dup := false
		for _, b := range binds {
			if b.Dest == d || strings.HasPrefix(d, b.Dest+"/") {
				dup = true
			}
		}
		if !dup {
			binds = append(binds, Bind{Source: d, Dest: d, ReadOnly: true})
		}
	}
	return binds
}

// Validate refuses a spec that cannot be built, before anything is cloned.
func (s *Spec) Validate() error {
	if s.NewRoot == "" || !filepath.IsAbs(s.NewRoot) {
		return fmt.Errorf("%w: new root %q must be an absolute path", ErrBadSpec, s.NewRoot)
	}
	if len(s.Argv) == 0 || !filepath.IsAbs(s.Argv[0]) {
		return fmt.Errorf("%w: command must be an absolute path (use resolve.Command)", ErrBadSpec)
	}
	for _, b := range s.Binds {
		if !filepath.IsAbs(b.Source) || !filepath.IsAbs(b.Dest) || filepath.Clean(b.Dest) == "/" {
			return fmt.Errorf("%w: bind %s:%s needs absolute paths and a destination other than /", ErrBadSpec, b.Source, b.Dest)
		}
		switch TopLevel(b.Dest) {
		case "proc", "dev":
			return fmt.Errorf("%w: bind destination %s: /proc and /dev are built by rootfs", ErrBadSpec, b.Dest)
		}
		if b.Symlink != "" {
			continue // shown as a link; nothing is mounted from Source
		}
		if _, err := os.Stat(b.Source); err != nil {
			return fmt.Errorf("%w: bind source: %v", ErrBadSpec, err)
		}
	}
	if s.Net != nil {
		if s.NoNetwork {
			return fmt.Errorf("%w: no network and a network namespace with a link at once", ErrBadSpec)
		}
		if err := s.Net.validate(); err != nil {
			return err
		}
	}
	for _, kv := range s.Env {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("%w: environment entry %q is not K=V", ErrBadSpec, kv)
		}
	}
	return nil
}

// DefaultPath is the server's PATH unless --setenv PATH=... replaces it.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// BuildEnv returns the server's environment: a minimal default (PATH,
// HOME=/tmp, LANG and TZ copied from host when set, else LANG=C.UTF-8),
// then setenv ("K=V") applied in order, then unsetenv removed. Nothing else
// of rootfs's environment reaches the server (security-battery E4).
func BuildEnv(host func(string) string, setenv, unsetenv []string) ([]string, error) {
	if host == nil {
		host = os.Getenv
	}
	return BuildEnvLookup(func(k string) (string, bool) {
		v := host(k)
		return v, v != ""
	}, setenv, unsetenv)
}

// BuildEnvLookup is BuildEnv with an exact lookup: a setenv entry without
// "=" (docker's "-e NAME") takes NAME's value from lookup, and NAME unset
// there is an error (a server started without the secret it was promised
// fails later, far from the cause). nil means os.LookupEnv.
func BuildEnvLookup(lookup func(string) (string, bool), setenv, unsetenv []string) ([]string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	host := func(k string) string {
		v, _ := lookup(k)
		return v
	}
	env := map[string]string{"PATH": DefaultPath, "HOME": "/tmp", "LANG": "C.UTF-8"}
	order := []string{"PATH", "HOME", "LANG"}
	for _, k := range []string{"LANG", "LC_ALL", "TZ"} {
		if v := host(k); v != "" {
			if _, ok := env[k]; !ok {
				order = append(order, k)
			}
			env[k] = v
		}
	}
	for _, kv := range setenv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			if !validEnvName(k) {
				return nil, fmt.Errorf("%w: --setenv %q must be K=V or a variable name", ErrBadSpec, kv)
			}
			if v, ok = lookup(k); !ok {
				return nil, fmt.Errorf("%w: --setenv %s: %s is not set in rootfs's environment; set it in the client's env block, or pass --setenv %s=VALUE", ErrBadSpec, k, k, k)
			}
		}
		if k == "" || strings.ContainsAny(k, "\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("%w: --setenv %q must be K=V", ErrBadSpec, kv)
		}
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, k := range unsetenv {
		if k == "" || strings.Contains(k, "=") {
			return nil, fmt.Errorf("%w: --unsetenv %q must be a variable name", ErrBadSpec, k)
		}
		delete(env, k)
	}
	out := make([]string, 0, len(env))
	for _, k := range order {
		if v, ok := env[k]; ok {
			out = append(out, k+"="+v)
			delete(env, k)
		}
	}
	return out, nil
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
