// Package linux holds the thin syscall shims that mountmgr needs: mount
// wrappers with typed errors, pivot_root, capabilities, prctl, Landlock
// rulesets and an EINTR retry helper.
//
// Every wrapper returns *os.PathError, *MountError or *os.SyscallError so
// callers can errors.Is the errno and print a message that names the
// operation. Nothing here keeps state.
package linux
