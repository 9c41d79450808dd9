//go:build !linux

package spec

import "os"

// HostUID is the effective uid off Linux, where there are no user namespaces.
func HostUID() int { return os.Geteuid() }
