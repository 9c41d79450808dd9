package mountmgr

import "go.uber.org/zap"

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
