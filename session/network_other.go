//go:build !linux

package session

import (
	"errors"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/internal/seccomp"
	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/netpolicy/netstack"
)

// connector is the network's fast path, which needs Linux.
type connector struct{}

func newConnector() *connector { return &connector{} }

func (*connector) started() {}

func (*connector) connect(*seccomp.Call) seccomp.Answer { return seccomp.Answer{Continue: true} }

func (*connector) busy(*seccomp.Call) seccomp.Answer { return seccomp.Answer{Continue: true} }

// startNetwork needs Linux (a TUN device and gVisor's netstack).
func startNetwork(NetOptions, *mountmgr.NetFiles, *connector, func(netstack.Refusal), *zap.Logger) (func(), error) {
	return nil, errors.New("the sandbox's network needs Linux")
}
