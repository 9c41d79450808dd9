//go:build linux

package vfs

// What the view tells the audit log (Options.Audit): every name looked up
// in its synthetic directories that is not a root (both data paths), and,
// where the view serves what is below a root (--strict), every change, an
// open for writing, and reads counted per file; rootfs's own refusals
// (EROFS on a read-only root, a revoked root) are refusals, other
// failures carry their errno.

import (
	"context"
	"path"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/rootset"
)

// callerPID is the pid of the process the kernel made the request for, as
// the daemon's PID namespace numbers it.
func callerPID(ctx context.Context) int {
	if c, ok := fuse.FromContext(ctx); ok {
		return int(c.Pid)
	}
	return 0
}

// paths returns where name beneath n is, as the server sees it and on the
// host (name "" for n itself).
func (n *node) paths(name string) (view, host string) {
	rel := n.Path(nil)
	if name != "" {
		rel = path.Join(rel, name)
	}
	view = "/" + rel
	below, ok := strings.CutPrefix(rel, n.inc.name)
	if ok && (below == "" || below[0] == '/') {
		host = n.inc.hostPath + below
	} else {
		// Detached from the tree (its root left): name the root.
		view, host = "/"+n.inc.name, n.inc.hostPath
	}
	return view, host
}

// audit records op on name beneath n, answered errno.
func (n *node) audit(ctx context.Context, op, name string, errno syscall.Errno) {
	a := n.v.opts.Audit
	if a == nil {
		return
	}
	view, host := n.paths(name)
	r := audit.Record{Op: op, Path: view, Host: host, PID: callerPID(ctx)}
	n.judge(&r, errno)
	a.Add(r)
}

// auditRename records a rename of name beneath n to newName beneath np.
func (n *node) auditRename(ctx context.Context, name string, np any, newName string, errno syscall.Errno) {
	a := n.v.opts.Audit
	if a == nil {
		return
	}
	view, host := n.paths(name)
	r := audit.Record{Op: audit.OpRename, Path: view, Host: host, PID: callerPID(ctx)}
	if p, ok := np.(*node); ok {
		r.Dest, _ = p.paths(newName)
	}
	n.judge(&r, errno)
	a.Add(r)
}

// judge sets r's result from errno: EROFS on a read-only root and any
// operation on a revoked root are rootfs's refusals.
func (n *node) judge(r *audit.Record, errno syscall.Errno) {
	switch {
	case errno == 0:
		r.Result = audit.ResultOK
	case n.inc.revoked.Load():
		r.Result, r.Reason = audit.ResultRefused, "the root was removed from the view"
	case errno == syscall.EROFS && n.v.opts.ReadOnly:
		r.Result, r.Reason, r.Allow = audit.ResultRefused, "the view is read-only", "a read-write view (no --read-only)"
	default:
		r.Result = unix.ErrnoName(errno)
	}
}

// auditRead counts an open of n for reading.
func (n *node) auditRead(ctx context.Context) {
	if a := n.v.opts.Audit; a != nil {
		view, host := n.paths("")
		a.Read(view, host, callerPID(ctx))
	}
}

// auditRefusedName records a lookup of key, a name in the view's synthetic
// part that is no root: what every reach outside the roots comes to.
func (r *rootDir) auditRefusedName(ctx context.Context, key string) {
	a := r.v.opts.Audit
	if a == nil {
		return
	}
	rec := audit.Record{Op: audit.OpLookup, Path: "/" + key, Result: audit.ResultRefused, PID: callerPID(ctx),
		Reason: "not a root, nor below one"}
	if r.v.opts.Layout == rootset.LayoutHost {
		rec.Host = "/" + key
		rec.Allow = "--root /" + key + " (or --ro-bind /" + key + ")"
	} else {
		rec.Allow = "--root DIR for a directory named " + path.Base(key)
	}
	a.Add(rec)
}

// auditRevoked records an operation refused because n's root left the
// view (once per root incarnation; see rootInc.revokedSaid).
func (n *node) auditRevoked(op string) {
	view, host := n.paths("")
	n.v.opts.Audit.Add(audit.Record{Op: audit.OpRevoked, Path: view, Host: host, Result: audit.ResultRefused,
		Reason: op + " on a file of a root the client removed (once per root)", Allow: "the client's root again"})
}
