package kpath

import (
	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/rootset"
)

// View is the mounted view RootBinds lays binds over; vfs.View implements
// it. It is an interface so that the sandbox's side of the binary (the init
// stage included) does not link the FUSE view.
type View interface {
	// Install builds a table from roots under the view's rules and swaps it
	// in; the table is returned also on error (see vfs.View.Install).
	Install([]rootset.Root) (*rootset.Table, error)
	// Table returns the table being served (immutable, never nil).
	Table() *rootset.Table
	// Entries returns the entries the view shows, in listing order: the
	// table's, minus any hidden by a reserved name.
	Entries() []*rootset.Entry
}

// RootBindsOptions configure NewRootBinds.
type RootBindsOptions struct {
	// ReadOnly makes every bind (and the host mounts below it) read-only.
	ReadOnly bool
	// Logger receives what happens to the binds; nil means zap.NewNop().
	Logger *zap.Logger
	// NoWatch turns off re-laying binds the kernel dropped (for tests that
	// show the drop).
	NoWatch bool
	// NoRootBinds lays no bind over the entries (--strict: the daemon
	// serves them); the view is still shared and the roots below /tmp are
	// still shown in the sandbox's /tmp (Attach).
	NoRootBinds bool
}
