//go:build !linux

package vfs

import (
	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/rootset"
)

// MountOptions configure View.Mount.
type MountOptions struct {
	AllowOther bool
	Debug      bool
}

// Mount is a mounted view.
type Mount struct{}

// CheckMountpoint fails: mounting needs Linux.
func CheckMountpoint(string, *rootset.Table, *zap.Logger) error { return errNotLinux }

// Mount fails: mounting needs Linux.
func (v *View) Mount(string, MountOptions) (*Mount, error) { return nil, errNotLinux }

func (m *Mount) Dir() string    { return "" }
func (m *Mount) Wait()          {}
func (m *Mount) Mounted() bool  { return false }
func (m *Mount) Unmount() error { return nil }
