package linux

import (
	"os"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ShortSlice asks the scheduler for short time slices (EEVDF's custom
// slice, Linux 6.12) for every thread of this process, and so for the
// threads it starts later, which inherit it: a thread that wakes for a
// little work is then run before a busy task's slice ends, instead of
// after it. The kernel takes 0.1 ms to 100 ms; 0 gives back its
// default. Any user may do this for its own threads; an older kernel
// ignores it, and an error means a thread was left as it was.
func ShortSlice(slice time.Duration) error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	var first error
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// Only fair-class threads, keeping their policy and nice value.
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil || a.Policy != unix.SCHED_NORMAL && a.Policy != unix.SCHED_BATCH {
			continue
		}
		a.Size, a.Runtime, a.Flags = uint32(unsafe.Sizeof(*a)), uint64(slice.Nanoseconds()), 0
		if err := unix.SchedSetAttr(tid, a, 0); err != nil && err != unix.ESRCH && first == nil {
			first = os.NewSyscallError("sched_setattr", err)
		}
	}
	return first
}
