//go:build !linux

package vfs

import "errors"

var errNotLinux = errors.New("rootfs needs Linux")

func closeFD(int) error              { return nil }
func resolve(string) (*Entry, error) { return nil, errNotLinux }
func openAllowed([]string) ([]allowDir, error) {
	return nil, errNotLinux
}
func closeAll([]allowDir)                         {}
func beneathAny(*Entry, []allowDir) (bool, error) { return false, errNotLinux }

type allowDir struct{}
