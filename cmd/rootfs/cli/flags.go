package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/rootset"
	"github.com/rootfs-dev/rootfs/vfs"
)

// RootsOptions are the static-roots flags shared by "run" and "mount".
type RootsOptions struct {
	Roots     []string // --root, each a path or file:// URI
	RootsFile string   // --roots-file, JSON in the shape of MCP's ListRootsResult
	ReadOnly  bool
	LogLevel  string
}

// AddFlags registers the flags on f.
func (o *RootsOptions) AddFlags(f *pflag.FlagSet) {
	f.StringArrayVar(&o.Roots, "root", nil, "a root: a directory or file `PATH`, or a file:// URI (repeatable)")
	f.StringVar(&o.RootsFile, "roots-file", "", "read roots from `FILE`, JSON like {\"roots\":[{\"uri\":\"file:///src\",\"name\":\"src\"}]}")
	f.BoolVar(&o.ReadOnly, "read-only", false, "refuse every change through the view (EROFS); with --strict or in rootfs mount, file locks then stay inside the view and never block host processes")
	f.StringVar(&o.LogLevel, "log-level", "info", "log `LEVEL` on stderr: debug, info, warn or error")
	setValues(f, "log-level", "debug", "info", "warn", "error")
}

// valuesAnnotation is the pflag annotation listing the values a flag
// accepts, which shell completion offers (completeFlagValue). It sits on
// the flag itself, so a flag and its values are defined in one place.
const valuesAnnotation = "rootfs_values"

// setValues records the values flag name accepts, for completion.
func setValues(f *pflag.FlagSet, name string, values ...string) {
	if err := f.SetAnnotation(name, valuesAnnotation, values); err != nil {
		panic(err) // the flag was registered just before: a programming error
	}
}

// StaticRoots returns the roots given by --root and --roots-file, in that
// order. A relative --root is taken from the working directory. A root
// that does not exist is an error, not a view without it: a person named
// it, and a server started without its directory fails far from the
// cause (fail closed, as a client's missing root is refused).
func (o *RootsOptions) StaticRoots() ([]rootset.Root, error) {
	var roots []rootset.Root
	for _, r := range o.Roots {
		if r != "" && !strings.Contains(r, ":") && !filepath.IsAbs(r) {
			if abs, err := filepath.Abs(r); err == nil {
				r = abs
			}
		}
		if err := rootExists(r, "--root "); err != nil {
			return nil, err
		}
		roots = append(roots, rootset.Root{URI: r})
	}
	if o.RootsFile != "" {
		fr, err := ReadRootsFile(o.RootsFile)
		if err != nil {
			return nil, err
		}
		for _, r := range fr {
			if err := rootExists(r.URI, "--roots-file "+o.RootsFile+": "); err != nil {
				return nil, err
			}
		}
		roots = append(roots, fr...)
	}
	return roots, nil
}

// errMissingRoot is a static root that names nothing on the host (exit
// status 125 in run and mount).
var errMissingRoot = errors.New("root does not exist")

// missingRootError says which root and why; its message leads with the
// flag and ends with the fix.
type missingRootError struct {
	from, path string
	err        error
}

func (e *missingRootError) Error() string {
	return fmt.Sprintf("%s%s: %v; create it or correct the path", e.from, e.path, e.err)
}

func (e *missingRootError) Is(target error) bool { return target == errMissingRoot }

// rootExists checks that a static root names something on the host. A
// malformed one is left to the table, which says what is wrong with it.
func rootExists(uri, from string) error {
	p, err := rootset.ParseRoot(uri)
	if err != nil {
		return nil
	}
	if _, err := os.Stat(p); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return &missingRootError{from: from, path: p, err: err}
	}
	return nil
}

// ReadRootsFile reads a JSON file shaped like MCP's ListRootsResult
// (decoded by rootset.DecodeRoots). A person can fix their file, so a root that
// the bridge would drop from a client's answer refuses the whole file here.
func ReadRootsFile(name string) ([]rootset.Root, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--roots-file: %w", err)
	}
	roots, dropped, err := rootset.DecodeRoots(data, rootset.MaxRoots)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(dropped) > 0 {
		return nil, fmt.Errorf("%s: %v", name, dropped[0])
	}
	return roots, nil
}

// ViewFlags are the view's speed and freshness flags, shared by "run" and
// "mount".
type ViewFlags struct {
	Passthrough  bool
	Writeback    bool
	WriteThrough bool // deprecated: the default
	CacheTimeout time.Duration
	NoHostWatch  bool
	Layout       string // registered by each command, with its own default
	AuditLog     string
}

// addLayoutFlag registers --layout with def as the default.
func (o *ViewFlags) addLayoutFlag(f *pflag.FlagSet, def string) {
	f.StringVar(&o.Layout, "layout", def, "where roots appear: `host` (each at its own path, below read-only directories that list only what leads to a root) or flat (each at /NAME)")
	setValues(f, "layout", "host", "flat")
}

// layout is --layout, checked.
func (o *ViewFlags) layout() (rootset.Layout, error) {
	l, err := rootset.ParseLayout(o.Layout)
	if err != nil {
		return l, fmt.Errorf("%w: --layout: %v", ErrUsage, err)
	}
	return l, nil
}

// AddFlags registers the flags on f.
func (o *ViewFlags) AddFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.Passthrough, "passthrough", false, "let the kernel do file I/O directly (faster; a file opened before its root is removed keeps working until closed)")
	f.BoolVar(&o.Writeback, "writeback", false, "let the kernel cache writes and write them back in large blocks (much faster small writes; errors at fsync/close, not at write; each close costs the next fstat a round trip)")
	f.BoolVar(&o.WriteThrough, "write-through", false, "")
	f.MarkDeprecated("write-through", "every write goes to the host at once by default now; --writeback caches them")
	f.DurationVar(&o.CacheTimeout, "cache-timeout", vfs.DefaultCacheTimeout, "how long the kernel may cache names and attributes that the host watcher does not cover; host-side changes there show up within it (0s: no caching)")
	f.StringVar(&o.AuditLog, "audit-log", "", "append what the server touched and was refused to `FILE`, one JSON object per line (- for stderr): changes, opens for writing, reads counted per file, names looked up outside the roots, refused roots, root changes, system calls the seccomp filter refused")
	f.BoolVar(&o.NoHostWatch, "no-host-watch", false, "do not watch the roots' file systems for host changes (fanotify, as root); everything is then cached for --cache-timeout only")
}

// cpuProfileEnv names a file to write a CPU profile of the view's daemon
// to (vfs.Options.CPUProfile): a debugging aid, kept out of the flags.
const cpuProfileEnv = "ROOTFS_VFS_CPUPROFILE"

// Options returns the view options the flags set; the rest is the caller's.
func (o *ViewFlags) Options(readOnly bool, log *zap.Logger) vfs.Options {
	cache := o.CacheTimeout
	if cache == 0 {
		cache = -1 // 0s on the command line means no caching; vfs reads zero as the default
	}
	layout, _ := rootset.ParseLayout(o.Layout) // checked by the command (layout)
	return vfs.Options{TableOptions: rootset.TableOptions{ReadOnly: readOnly, Layout: layout}, Logger: log, Passthrough: o.Passthrough, Writeback: o.Writeback && !o.WriteThrough, CacheTimeout: cache, NoHostWatch: o.NoHostWatch, CPUProfile: os.Getenv(cpuProfileEnv)}
}

// parseFlags parses args with f, printing usage for --help.
func parseFlags(f *pflag.FlagSet, args []string, usage string, stderr io.Writer) error {
	f.SetOutput(io.Discard)
	f.Usage = func() {}
	if err := f.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stderr, usage)
			f.SetOutput(stderr)
			f.PrintDefaults()
			return errHelp
		}
		return fmt.Errorf("%w: %v (see --help)", ErrUsage, err)
	}
	return nil
}
