//go:build !rootfs_control

package control

// Built reports whether this is a control build.
const Built = false

// On reports whether k is on: never, in a normal build, where the call is
// the constant false and the code it guards is compiled out.
func On(k Knob) bool { return false }

// Environ returns the environment entries that keep this process's knobs
// on in a process it starts with an environment of its own: none, in a
// normal build.
func Environ() []string { return nil }
