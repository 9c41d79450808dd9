//go:build !linux

package linux

import "errors"

// RaiseNoFile does nothing off Linux, where no view runs to need the
// descriptors.
func RaiseNoFile() (uint64, error) { return 0, errors.New("rootfs needs Linux") }

// ReadProcStatus finds nothing off Linux, which has no /proc.
func ReadProcStatus(int) (ProcStatus, bool) { return ProcStatus{}, false }
