package mountmgr

import (
	"github.com/rootfs-dev/rootfs/mountmgr/internal/spec"
	"github.com/rootfs-dev/rootfs/rootset"
)

// The spec is defined in package mountmgr/internal/spec, below both the
// sandbox and command resolution (mountmgr/resolve), which fills in its
// binds and, in the sandbox's init, explains a failed exec; these are its
// public names.
type (
	// Spec says what to run and what it may see; see spec.Spec.
	Spec = spec.Spec
	// Bind is one --bind or --ro-bind, or a bind auto-bind added; see
	// spec.Bind.
	Bind = spec.Bind
	// NetSpec gives the server a network namespace whose way out is a
	// TUN device handed to P1 (see spec.NetSpec).
	NetSpec = spec.NetSpec
)

// Sentinel errors; callers branch on them with errors.Is.
var (
	// ErrCommandNotFound: COMMAND does not exist (exit status 127).
	ErrCommandNotFound = spec.ErrCommandNotFound
	// ErrCommandNotExecutable: COMMAND exists but cannot be run (exit status 126).
	ErrCommandNotExecutable = spec.ErrCommandNotExecutable
	// ErrBadSpec: a flag or spec value is invalid (exit status 125).
	ErrBadSpec = spec.ErrBadSpec
	// ErrSetup: the sandbox could not be built (exit status 125). The
	// message is one line from the stage that failed.
	ErrSetup = spec.ErrSetup
	// ErrUnsupported: the kernel or policy forbids what the sandbox needs;
	// the message says what is missing and how to enable it (exit status 125).
	ErrUnsupported = spec.ErrUnsupported
)

var (
	// DefaultRuntimeDirs are bind-mounted read-only, as they exist on the
	// host (a host symlink such as /bin -> usr/bin stays a symlink).
	DefaultRuntimeDirs = spec.DefaultRuntimeDirs
	// DefaultEtcFiles is the short list of /etc entries (relative to /etc)
	// bound read-only into the sandbox's /etc tmpfs; see spec.DefaultEtcFiles.
	DefaultEtcFiles = spec.DefaultEtcFiles
)

// HostUID is the uid of the user rootfs runs as on the host, the same in
// P0 and in P1's user namespace (where the process itself is uid 0).
var HostUID = spec.HostUID

// DefaultPath is the server's PATH unless --setenv PATH=... replaces it.
const DefaultPath = spec.DefaultPath

// ParseBind parses "SRC[:DST]" (SRC must be absolute; DST defaults to SRC).
func ParseBind(s string, readOnly bool) (Bind, error) { return spec.ParseBind(s, readOnly) }

// Placeholders lists, sorted by name, the top-level entries the view must
// provide for s (vfs.Options.Placeholders) before the sandbox starts; see
// spec.Placeholders. It reads the host (lstat), so call it in P0 or P1
// before building the view.
func Placeholders(s *Spec) []rootset.Placeholder { return spec.Placeholders(s) }

// ReservedNames is Placeholders reduced to names, for rootset.TableOptions.Reserved.
func ReservedNames(s *Spec) []string { return spec.ReservedNames(s) }

// PreparePlaceholders creates the placeholders in a plain directory (tests,
// or a tmpfs standing in for the view).
func PreparePlaceholders(dir string, ps []rootset.Placeholder) error {
	return spec.PreparePlaceholders(dir, ps)
}

// BuildEnv returns the server's environment; see spec.BuildEnv.
func BuildEnv(host func(string) string, setenv, unsetenv []string) ([]string, error) {
	return spec.BuildEnv(host, setenv, unsetenv)
}

// BuildEnvLookup is BuildEnv with an exact lookup; see spec.BuildEnvLookup.
func BuildEnvLookup(lookup func(string) (string, bool), setenv, unsetenv []string) ([]string, error) {
	return spec.BuildEnvLookup(lookup, setenv, unsetenv)
}

// topLevel is the first component of the absolute path p ("" for /).
func topLevel(p string) string { return spec.TopLevel(p) }

// LayerBase is the directory below which the writes to launcher caches
// are kept; see spec.LayerBase.
func LayerBase(home, xdgStateHome string) string { return spec.LayerBase(home, xdgStateHome) }

// LayerServerDir is the directory that holds every layer of the server
// that layer (a Bind.Layer) belongs to: removing it starts the server
// afresh.
func LayerServerDir(layer string) string { return spec.LayerServerDir(layer) }
