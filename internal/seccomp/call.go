package seccomp

import "syscall"

// Call is a connect(2) the filter referred to the listener: the caller
// waits until it is answered.
type Call struct {
	listener uintptr // the listener's descriptor
	// ID is the kernel's notification id.
	ID uint64
	// TID is the calling thread, numbered in the listener reader's PID
	// namespace.
	TID int
	// Args are the call's arguments, as the caller passed them (its
	// memory may change after: read what they point to once, with
	// ReadMem, and never let a call run on a check of it).
	Args [6]uint64
}

// Answer is what a referred call returns: Val, or -1 with Errno; or,
// with Continue, the call runs as the caller made it.
type Answer struct {
	Val      int64
	Errno    syscall.Errno
	Continue bool
}
