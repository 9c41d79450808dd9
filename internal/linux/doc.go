// Package linux holds the thin syscall shims that the packages above it
// need: mount wrappers with typed errors, the mount API, pivot_root,
// capabilities, prctl, Landlock rulesets and an EINTR retry helper, and,
// for the roots table and the view alike, the check for kernel file
// systems (OnKernelFS) and the one walk up a directory tree by inode
// (WalkUp). It imports no other package of this module; its tests import
// only internal/testutil.
//
// Every wrapper returns *os.PathError, *MountError or *os.SyscallError so
// callers can errors.Is the errno and print a message that names the
// operation. Nothing here keeps state.
package linux
