//go:build !linux

package audit

import (
	"errors"

	"go.uber.org/zap"
)

// KernelWatch needs Linux's fanotify; off Linux no session runs.
type KernelWatch struct{}

// NewKernelWatch fails off Linux.
func NewKernelWatch(*Log, int, *zap.Logger) (*KernelWatch, error) {
	return nil, errors.New("audit of the kernel data path needs Linux")
}

// SetRoots does nothing off Linux.
func (*KernelWatch) SetRoots([]RootPath) {}

// Close does nothing off Linux.
func (*KernelWatch) Close() {}
