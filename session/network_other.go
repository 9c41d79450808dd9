//go:build !linux

package session

import (
	"errors"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/netpolicy/netstack"
)

// startNetwork needs Linux (a TUN device and gVisor's netstack).
func startNetwork(NetOptions, *mountmgr.NetFiles, func(netstack.Refusal), *zap.Logger) (func(), error) {
	return nil, errors.New("the sandbox's network needs Linux")
}
