//go:build !linux

package mountmgr

import "go.uber.org/zap"

// PrepareLayers does nothing off Linux, where no sandbox runs.
func PrepareLayers(*Spec, *zap.Logger) (release func()) { return func() {} }
