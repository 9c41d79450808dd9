//go:build !linux

package kpath

import (
	"errors"

	"github.com/rootfs-dev/rootfs/rootset"
)

var errNotLinux = errors.New("the sandbox needs Linux")

// KernelPathSupported reports that the kernel data path needs Linux.
func KernelPathSupported() error { return errNotLinux }

// RootBinds needs Linux.
type RootBinds struct{}

// NewRootBinds fails off Linux.
func NewRootBinds(string, View, RootBindsOptions) (*RootBinds, error) { return nil, errNotLinux }

// Install fails off Linux.
func (b *RootBinds) Install([]rootset.Root) (*rootset.Table, error) { return nil, errNotLinux }

// Table is nil off Linux.
func (b *RootBinds) Table() *rootset.Table { return nil }

// Close does nothing off Linux.
func (b *RootBinds) Close() {}

// Attach fails off Linux.
func (b *RootBinds) Attach(int, []string, []string) error { return errNotLinux }
