//go:build rootfs_control_nohold

package mcpbridge

// This file exists only in the build the end-to-end tests make for their negative control (go
// build -tags rootfs_control_nohold): the client's messages are never held for the roots, so
// the tests can show the race the hold closes.
func init() { holdForRoots = false }
