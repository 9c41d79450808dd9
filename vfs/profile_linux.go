//go:build linux

package vfs

import (
	"os"
	"runtime/pprof"

	"go.uber.org/zap"
)

// startProfile starts the CPU profile Options.CPUProfile asks for.
func (v *View) startProfile() {
	p := v.opts.CPUProfile
	if p == "" {
		return
	}
	f, err := os.Create(p)
	if err != nil {
		v.log.Warn("cpu profile not written", zap.Error(err))
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		v.log.Warn("cpu profile not written", zap.Error(err))
		return
	}
	v.profile = f
}

func (v *View) stopProfile() {
	if v.profile != nil {
		pprof.StopCPUProfile()
		v.profile.Close()
		v.profile = nil
	}
}
