package linux

// ProcStatus is what rootfs reads of /proc/PID/status.
type ProcStatus struct {
	// Name is the thread's command name, unescaped.
	Name string
	// NStgid and NSpid are the process's and the thread's numbers in
	// each PID namespace it is in, outermost (this /proc's) first; the
	// last is the innermost. Nil when the line could not be read.
	NStgid, NSpid []int
}
