package resolve

import "github.com/rootfs-dev/rootfs/mountmgr/internal/spec"

// The spec's names, as the sandbox gives them, for the tests' tables.
type (
	Spec = spec.Spec
	Bind = spec.Bind
)

var (
	ErrCommandNotFound      = spec.ErrCommandNotFound
	ErrCommandNotExecutable = spec.ErrCommandNotExecutable
)
