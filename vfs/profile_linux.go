//go:build linux

package vfs

import (
	"os"
	"runtime/pprof"

	"go.uber.org/zap"
)

// ProfileEnv names a file to write a CPU profile of the daemon to, from
// NewView until View.Close (a debugging aid: go tool pprof -top FILE).
const ProfileEnv = "ROOTFS_VFS_CPUPROFILE"

func (v *View) startProfile() {
	p := os.Getenv(ProfileEnv)
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
