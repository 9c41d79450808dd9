package mountmgr

import (
	"os"

	"go.uber.org/zap"
)

// DaemonOptions configures RunDaemon.
type DaemonOptions struct {
	// Args are passed to P1 as os.Args[1:]; P1 runs main with them again
	// (typically the same os.Args[1:] that P0 got).
	Args []string
	// Env is P1's environment; nil means os.Environ().
	Env []string
	// ExtraFiles are passed to P1 as fd 3, 4, ... (tests only; leave nil).
	ExtraFiles []*os.File
	// Logger receives lifecycle messages; nil means none.
	Logger *zap.Logger
}
