package vfs

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/rootset"
)

// DefaultCacheTimeout is how long the kernel may cache names and attributes
// when Options.CacheTimeout is zero. It bounds how long a change made on the
// host by another process can stay invisible through the view.
const DefaultCacheTimeout = time.Second

// ErrRevoked is the error of every operation on a node or handle whose root
// left the table. The kernel sees it as EIO.
var ErrRevoked = errors.New("root revoked")

// ErrClosed is returned by Install after Close.
var ErrClosed = errors.New("view closed")

// ErrBadMountpoint wraps every refusal of a mount point, and of a table
// that would put the view inside itself (View.Install).
var ErrBadMountpoint = errors.New("bad mount point")

// Options configure a View. The zero value is a read-write view with no
// placeholders, strict revocation and 1s caching.
type Options struct {
	// TableOptions are the rules View.Install builds every table under
	// (see rootset.TableOptions). The view adds the names it uses itself
	// (its placeholders, and the name go-fuse intercepts) to Reserved.
	// ReadOnly also makes every mutating operation answer EROFS. In host
	// layout the placeholders are reserved paths, and Beneath lists those
	// below which roots may still appear. Written is the session's record
	// of what the sandboxed side can write or could earlier; the caller
	// keeps it and closes it after the view.
	rootset.TableOptions

	// Logger receives diagnostics; nil means zap.NewNop().
	Logger *zap.Logger
	// Placeholders are listed after the entries. Their names are reserved:
	// View.Install names entries around them.
	Placeholders []rootset.Placeholder
	// Passthrough lets the kernel do file I/O itself (FUSE passthrough,
	// Linux 6.9+, needs CAP_SYS_ADMIN in the initial user namespace and a
	// view mounted with View.Mount; silently daemon-served elsewhere, and
	// for files that are set-ID or carry a file capability when opened).
	// Backing files are registered with the daemon's capabilities lowered
	// to CAP_SYS_ADMIN, so passthrough writes clear set-ID bits as the
	// caller's would. Handles opened in passthrough keep reading and
	// writing after their root is revoked, until closed. False (the
	// default) keeps revocation strict.
	Passthrough bool
	// Writeback lets the kernel collect writes in its page cache and write
	// them back in large blocks (the FUSE writeback cache): small writes
	// get much faster, but every close makes the next fstat(2) a round trip
	// (the kernel forgets st_blocks), which is what reading many small
	// files pays; see the package documentation (Caching). By default
	// (false) every write(2) goes to the daemon as it is made. Passthrough
	// excludes it: the kernel does not negotiate both.
	Writeback bool
	// CacheTimeout is how long the kernel may cache entries, attributes and
	// failed lookups. Zero means DefaultCacheTimeout; negative means no
	// caching. Swaps and changes made through the view are always seen at
	// once; host-side changes within the timeout.
	CacheTimeout time.Duration
	// NoHostWatch turns off the host watcher. By default, where the daemon
	// may use fanotify filesystem marks (CAP_SYS_ADMIN in the initial user
	// namespace), changes made on the host by other processes are reported
	// to the view, which drops exactly what they made stale, and the
	// kernel caches everything else for an hour; what cannot be watched is
	// cached for CacheTimeout. With NoHostWatch everything is cached for
	// CacheTimeout.
	NoHostWatch bool
	// BoundEntries says that every entry will be covered by a bind mount
	// of its pinned host directory or file (kpath.RootBinds, the kernel
	// data path), so that the kernel, not the view, serves what is below
	// it. The view then never drops a kept entry's dentry by itself (which
	// would detach its bind): a kept entry's lookup is answered from
	// memory with the same node, and cached until the next Install. See
	// "The kernel data path" in the package documentation.
	BoundEntries bool

	// Audit, when set, receives the names looked up in the view's
	// synthetic part that are not roots (every reach outside the roots),
	// and, for what the view serves below a root, changes, opens for
	// writing and counted reads (see audit_linux.go). The caller closes it
	// after the view. Nil records nothing.
	Audit *audit.Log

	// CPUProfile names a file to write a CPU profile of the daemon to,
	// from NewView until View.Close (a debugging aid: go tool pprof -top
	// FILE). Empty, the default, writes none. Linux only.
	CPUProfile string
}

func (o *Options) cacheTimeout() time.Duration {
	switch {
	case o.CacheTimeout == 0:
		return DefaultCacheTimeout
	case o.CacheTimeout < 0:
		return 0
	}
	return o.CacheTimeout
}
