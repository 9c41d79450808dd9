//go:build !linux

package rootset

import "errors"

var errNotLinux = errors.New("rootfs needs Linux")

func closeFD(int) error                                          { return nil }
func resolve(string, func(dev, ino uint64) bool) (*Entry, error) { return nil, errNotLinux }
func dupFD(int) (int, error)                                     { return -1, errNotLinux }
func pinPath(string) (int, fileID, bool, error)                  { return -1, fileID{}, false, errNotLinux }
func openAllowed([]string, func(dev, ino uint64) bool) ([]allowDir, []string, error) {
	return nil, nil, errNotLinux
}
func closeAll([]allowDir)                         {}
func beneathAny(*Entry, []allowDir) (bool, error) { return false, errNotLinux }

type allowDir struct{}
