//go:build rootfs_control_nested

package cli

// This file exists only in the build the end-to-end tests make for their
// negative control (go build -tags rootfs_control_nested): roots are then
// resolved through any symlink, as before the session kept a record of what
// the server can write, so the tests can show the attack they guard against.
func init() { unprotectedNested = true }
