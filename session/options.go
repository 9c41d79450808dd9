package session

import (
	"errors"
	"time"

	"github.com/rootfs-dev/rootfs/mcpbridge"
	"github.com/rootfs-dev/rootfs/rootset"
	"github.com/rootfs-dev/rootfs/vfs"
)

// ErrUsage marks options that cannot work as given (a bad bind, environment or argument root,
// no roots at all): the command line's fault, not the machine's. Its text is the word rootfs
// has always printed before such a message.
var ErrUsage = errors.New("usage")

// Options configure a session. They are plain data: the command line fills them from its flags.
type Options struct {
	// Command is COMMAND and its arguments, as given; Command[0] is looked up on PATH, or in
	// the view when it is an absolute path inside a static root. Required.
	Command []string
	Roots   RootOptions
	Sandbox SandboxOptions
	// View holds the view's speed and freshness settings (Passthrough, Writeback,
	// CacheTimeout, NoHostWatch, CPUProfile). Its TableOptions, Placeholders, Logger and
	// BoundEntries are the session's own: Start sets them from Roots and the plan.
	View vfs.Options
	// Strict serves every file operation through the daemon instead of the kernel's binds.
	Strict bool
	// Bridge holds the bridge's limits and timeouts, and ClientIn and ClientOut (the client's
	// stdio); Start fills in the server's side, the installer and the roots.
	Bridge mcpbridge.Options
	// AuditLog names the file the session's audit records go to, one JSON object per line
	// ("-": stderr; "": none). Counts and the last refusals are kept for status either way.
	AuditLog string
	// Grace is how long the server gets to exit after its stdin closes, and again after
	// SIGTERM, before SIGKILL; zero gives none.
	Grace time.Duration
}

// RootOptions say which roots a session starts with and the rules every table obeys.
type RootOptions struct {
	// Static are the roots given on the command line (--root, then --roots-file), each
	// checked to exist. Empty: the working directory stands in until the client's roots
	// arrive (see Plan.Fallback).
	Static []rootset.Root
	// Named are the --root values as given (paths or file:// URIs): a path COMMAND's
	// arguments name again is the user's own choice, never refused.
	Named []string
	// RootsFile says a roots file was given, even one that lists none: with it, or with
	// Named, an absolute COMMAND not on the host may be a path in the view.
	RootsFile bool
	// ReadOnly serves every root read-only: nothing the server is shown is its to write.
	ReadOnly bool
	// Allow admits client roots only at or beneath these directories; empty admits any.
	Allow []string
	// Layout says where roots appear: at /NAME (flat) or at their own paths (host).
	Layout rootset.Layout
	// NoArgRoots keeps the paths COMMAND's arguments name from becoming roots.
	NoArgRoots bool
}

// SandboxOptions say what the server is given beside its roots.
type SandboxOptions struct {
	// Binds and ROBinds are host SRC[:DST] shown read-write and read-only.
	Binds, ROBinds []string
	// SetEnv are K=V, or NAME to pass rootfs's own value; UnsetEnv are names removed.
	SetEnv, UnsetEnv []string
	// NoNetwork gives the server a network namespace with only loopback.
	NoNetwork bool
	// Net is the policy of the server's own network (ignored with NoNetwork).
	Net NetOptions
	// AllowUnixSockets lets the server make and connect to unix sockets in its roots.
	AllowUnixSockets bool
	// TmpSize caps the server's private /tmp (a tmpfs size such as "256m").
	TmpSize string
	// NoAutoBind shows only COMMAND's file, not what it needs to start.
	NoAutoBind bool
	// GitIdentity passes git's user.name and user.email, and safe.directory=*.
	GitIdentity bool
	// DiscardCacheWrites sends the server's writes to a launcher cache to its /tmp instead
	// of a layer kept for its next start.
	DiscardCacheWrites bool
}
