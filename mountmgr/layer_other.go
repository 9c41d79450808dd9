//go:build !linux

package mountmgr

import (
	"os"

	"go.uber.org/zap"
)

func hostUID() int { return os.Geteuid() }

// PrepareLayers does nothing off Linux, where no sandbox runs.
func PrepareLayers(*Spec, *zap.Logger) (release func()) { return func() {} }
