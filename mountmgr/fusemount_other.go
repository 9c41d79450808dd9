//go:build !linux

package mountmgr

import (
	"errors"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/vfs"
)

// ErrBadMountpoint wraps every refusal of a mount point.
var ErrBadMountpoint = vfs.ErrBadMountpoint

var errFUSENotLinux = errors.New("mounting the view needs Linux")

// FUSEOptions configure MountView.
type FUSEOptions struct {
	AllowOther bool
	Debug      bool
	Logger     *zap.Logger
}

// FUSEMount is a mounted view.
type FUSEMount struct{}

// CheckMountpoint fails: mounting needs Linux.
func CheckMountpoint(string, *vfs.Table, *zap.Logger) error { return errFUSENotLinux }

// MountView fails: mounting needs Linux.
func MountView(*vfs.View, string, FUSEOptions) (*FUSEMount, error) { return nil, errFUSENotLinux }

func (m *FUSEMount) Dir() string    { return "" }
func (m *FUSEMount) Wait()          {}
func (m *FUSEMount) Unmount() error { return nil }
