//go:build !linux

package cli

import (
	"errors"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/mountmgr"
)

// startNetwork needs Linux (the sandbox does too).
func (o *NetOptions) startNetwork(files *mountmgr.NetFiles, log *zap.Logger) (func(), error) {
	return nil, errors.New("the sandbox's network needs Linux")
}
