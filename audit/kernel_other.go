//go:build !linux

package audit

import (
	"errors"
	"io"
	"os"

	"go.uber.org/zap"
)

// KernelWatch needs Linux's fanotify; off Linux no session runs.
type KernelWatch struct{}

// NewKernelWatch fails off Linux.
func NewKernelWatch(*Log, *zap.Logger) (*KernelWatch, error) {
	return nil, errors.New("audit of the kernel data path needs Linux")
}

// Group is nil off Linux.
func (*KernelWatch) Group() *os.File { return nil }

// Consume does nothing off Linux.
func (*KernelWatch) Consume(io.ReadCloser) {}

// SetRoots does nothing off Linux.
func (*KernelWatch) SetRoots([]RootPath) {}

// MarkSandbox does nothing off Linux.
func (*KernelWatch) MarkSandbox(int) {}

// Close does nothing off Linux.
func (*KernelWatch) Close() {}

// Forward does nothing off Linux.
func Forward(*os.File, *os.File) (stop func()) { return func() {} }
