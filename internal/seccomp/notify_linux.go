package seccomp

// The listener of InstallNotify's filter: every call the filter refers
// to it is answered EPERM, then reported.
//
//	refused call ── kernel ──▶ notification ──▶ who: /proc/TID/status (NStgid, Name)
//	                                                │ (the caller still waits: no pid reuse, NOTIF_ID_VALID)
//	                                                ▼
//	                                         answer: EPERM (SECCOMP_IOCTL_NOTIF_SEND; never
//	                                                │ FLAG_CONTINUE: the call never runs)
//	                                                ▼ bounded queue (full: lost, counted)
//	                                         Refused(Refusal), from a goroutine of its own
//
// The caller is named before the answer, while it waits: once answered,
// a process that exits at once (a refused unshare(1)) is gone from /proc
// before anything could read it, and its number could be reused. That
// costs each refused call one read of /proc/TID/status (BENCHMARKS.md);
// everything else, the audit record included, comes after the answer,
// from another goroutine, so a slow reporter never holds a refused call;
// a flood is answered as fast as it comes and what the queue cannot take
// is counted (Lost).

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"github.com/rootfs-dev/rootfs/internal/linux"
	"golang.org/x/sys/unix"
)

// Refusal is one system call the filter refused and the listener answered.
type Refusal struct {
	// Syscall is the call's name ("unshare"), or "syscall N" for a
	// number this architecture's table lacks.
	Syscall string
	Nr      int
	// TID is the calling thread as the kernel gave it: numbered in the
	// PID namespace of the process that read the notification (the
	// listener's reader, not the filter's), 0 when that namespace cannot
	// see it.
	TID int
	// PID is the calling process (its thread group) in its own, innermost
	// PID namespace: the sandbox's number, as the server's ps shows it.
	// Comm is the calling thread's command name. Both are read from
	// /proc while the call waits; 0 and "" when the caller was killed
	// meanwhile, or is not in a PID namespace below the reader's.
	PID  int
	Comm string
}

// ListenOptions configure Listen.
type ListenOptions struct {
	// Refused gets each refusal, in order, from one goroutine, after the
	// call has been answered. Nil: refusals are answered only.
	Refused func(Refusal)
	// Lost gets the number of refusals answered but not reported
	// because the queue was full, before the next one reported and when
	// the listener stops.
	Lost func(n int64)
	// Queue bounds the refusals answered and not yet reported; 0 means
	// 1024.
	Queue int
	// Connect, when set, answers the connect(2) calls of a filter made
	// with Notify.Connect, each from a goroutine of its own while the
	// caller waits (at most maxConnects at once; beyond that Busy does,
	// and when Connect is nil, the call is let run: Answer.Continue).
	Connect func(*Call) Answer
	// Busy answers a connect(2) when maxConnects are being answered
	// already, from the listener's own goroutine: it must not wait. Nil
	// lets the call run.
	Busy func(*Call) Answer
}

// maxConnects bounds the connect(2) calls being answered at once.
const maxConnects = 256

// Valid says whether the caller still waits for this answer: false once
// it was killed or interrupted, after which any number read about it
// (its TID, its descriptors) may be another's.
func (c *Call) Valid() bool {
	id := c.ID
	_, _, e := unix.Syscall(unix.SYS_IOCTL, c.listener, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
	return e == 0
}

// ReadMem fills b from the caller's memory at addr (process_vm_readv,
// which needs what ptrace would: the caller's user or its user
// namespace's owner), and checks that the caller still waits.
func (c *Call) ReadMem(addr uint64, b []byte) error {
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(len(b))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}
	n, err := unix.ProcessVMReadv(c.TID, local, remote, 0)
	if err != nil {
		return os.NewSyscallError("process_vm_readv", err)
	}
	if n != len(b) {
		return errors.New("seccomp: short read of the caller's memory")
	}
	if !c.Valid() {
		return errors.New("seccomp: the caller stopped waiting")
	}
	return nil
}

// FD is a duplicate of the caller's descriptor fd (pidfd_getfd: the same
// open file, its flags shared; the same rights as ReadMem), as a raw
// descriptor, close-on-exec, that the caller of FD closes. Never wrap it
// in an os.File: its Fd method would make the file blocking, for the
// sandbox's process too.
func (c *Call) FD(fd int) (int, error) {
	// The calling thread's own table (PIDFD_THREAD, Linux 6.9), or its
	// process's.
	pidfd, err := unix.PidfdOpen(c.TID, unix.O_EXCL)
	if err != nil {
		pidfd, err = unix.PidfdOpen(c.TID, 0)
	}
	if err != nil {
		return -1, os.NewSyscallError("pidfd_open", err)
	}
	defer unix.Close(pidfd)
	dup, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return -1, os.NewSyscallError("pidfd_getfd", err)
	}
	if !c.Valid() {
		unix.Close(dup)
		return -1, errors.New("seccomp: the caller stopped waiting")
	}
	return dup, nil
}

func (l *Listener) send(id uint64, a Answer) syscall.Errno {
	resp := seccompNotifResp{ID: id, Val: a.Val}
	switch {
	case a.Continue:
		resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
	case a.Errno != 0:
		resp.Val, resp.Error = 0, -int32(a.Errno)
	}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, l.f.Fd(), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	return e
}

// Listener answers and reports the refusals of one filter.
type Listener struct {
	f        *os.File
	opts     ListenOptions
	stopR    *os.File
	stopW    *os.File
	queue    chan notice
	connects chan struct{} // semaphore of maxConnects
	answered atomic.Int64
	lost     atomic.Int64
	wg       sync.WaitGroup
	cw       sync.WaitGroup // connect(2)s being answered
	once     sync.Once
}

type notice struct {
	nr       int32
	tid, pid int
	comm     string
}

// The kernel's structures (linux/seccomp.h).
type seccompData struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

type seccompNotifSizes struct {
	Notif, Resp, Data uint16
}

// Listen starts answering f, InstallNotify's listener, which it owns from
// now on: every notification is answered with EPERM, as Program's filter
// would have returned, then reported through o. It stops when Close is
// called or when no process uses the filter any more (POLLHUP).
func Listen(f *os.File, o ListenOptions) (*Listener, error) {
	var sizes seccompNotifSizes
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, uintptr(unsafe.Pointer(&sizes))); e != 0 {
		f.Close()
		return nil, os.NewSyscallError("seccomp(SECCOMP_GET_NOTIF_SIZES)", e)
	}
	if int(sizes.Resp) > int(unsafe.Sizeof(seccompNotifResp{})) {
		// The kernel would read beyond our answer: never guess.
		f.Close()
		return nil, errors.New("seccomp: the kernel's notification answer is larger than this build knows")
	}
	if o.Queue <= 0 {
		o.Queue = 1024
	}
	r, w, err := os.Pipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &Listener{f: f, opts: o, stopR: r, stopW: w, queue: make(chan notice, o.Queue), connects: make(chan struct{}, maxConnects)}
	// Linux 6.6: wake the caller on this CPU when answered (older: EINVAL, ignored).
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	buf := max(int(sizes.Notif), int(unsafe.Sizeof(seccompNotif{})))
	l.wg.Add(2)
	go l.answer(buf)
	go l.report()
	return l, nil
}

// Answered is how many refused calls the listener has answered.
func (l *Listener) Answered() int64 { return l.answered.Load() }

// Close stops the listener and closes its descriptor (refused calls then
// wait on the sandbox's init's copy; with every copy closed the kernel
// fails them with ENOSYS). What was answered and queued is still
// reported before Close returns.
func (l *Listener) Close() {
	l.once.Do(func() {
		l.stopW.Close()
		l.wg.Wait()
		l.stopR.Close()
	})
}

// answer receives each notification and answers it, and queues it for
// report, never waiting for the queue.
func (l *Listener) answer(size int) {
	defer l.wg.Done()
	defer close(l.queue)
	defer func() {
		l.cw.Wait() // connect(2)s still being answered use the descriptor
		l.f.Close()
	}()
	fd := int(l.f.Fd())
	buf := make([]byte, size)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(l.stopR.Fd()), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		if fds[1].Revents != 0 {
			return // Close
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			return // POLLHUP: no process uses the filter any more (or the descriptor broke)
		}
		clear(buf) // the kernel wants a zeroed buffer (room for its later fields)
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
			if e == unix.EINTR || e == unix.ENOENT {
				continue // interrupted, or the caller died before we took it
			}
			return
		}
		n := (*seccompNotif)(unsafe.Pointer(&buf[0]))
		if connectNr >= 0 && n.Data.Nr == connectNr {
			l.connect(n)
			continue
		}
		q := notice{nr: n.Data.Nr, tid: int(n.Pid)}
		if q.tid > 0 {
			q.pid, q.comm = process(q.tid)
			id := n.ID
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id))); e != 0 {
				q.pid, q.comm = 0, "" // killed while we read: the numbers may be another's
			}
		}
		if e := l.send(n.ID, Answer{Errno: unix.EPERM}); e != 0 {
			// ENOENT: the caller stopped waiting. A signal interrupted it
			// (Go's preemption, say) and the kernel restarts the call,
			// which comes again as a new notification; or it was killed.
			// Either way this one was not refused yet: not reported.
			continue
		}
		l.answered.Add(1)
		select {
		case l.queue <- q:
		default:
			l.lost.Add(1)
		}
	}
}

// connect answers a connect(2) with opts.Connect, from a goroutine of
// its own; when there is none, the call runs, and when too many wait
// already, opts.Busy answers it.
func (l *Listener) connect(n *seccompNotif) {
	c := &Call{listener: l.f.Fd(), ID: n.ID, TID: int(n.Pid), Args: n.Data.Args}
	if l.opts.Connect == nil || c.TID <= 0 {
		l.send(c.ID, Answer{Continue: true})
		return
	}
	select {
	case l.connects <- struct{}{}:
	default:
		a := Answer{Continue: true}
		if l.opts.Busy != nil {
			a = l.opts.Busy(c)
		}
		l.send(c.ID, a)
		return
	}
	l.cw.Add(1)
	go func() {
		defer l.cw.Done()
		defer func() { <-l.connects }()
		l.send(c.ID, l.opts.Connect(c))
	}()
}

// connectNr is connect(2)'s number here, -1 where the table lacks it.
var connectNr = func() int32 {
	info, err := arch.GetInfo("")
	if err != nil {
		return -1
	}
	if nr, ok := info.SyscallNames["connect"]; ok {
		return int32(nr)
	}
	return -1
}()

// report turns what answer queued into Refusals.
func (l *Listener) report() {
	defer l.wg.Done()
	info, _ := arch.GetInfo("")
	lost := func() {
		if n := l.lost.Swap(0); n > 0 && l.opts.Lost != nil {
			l.opts.Lost(n)
		}
	}
	for n := range l.queue {
		lost()
		if l.opts.Refused == nil {
			continue
		}
		r := Refusal{Nr: int(n.nr), TID: n.tid, PID: n.pid, Comm: n.comm}
		if info != nil {
			r.Syscall = info.SyscallNumbers[r.Nr]
		}
		if r.Syscall == "" {
			r.Syscall = "syscall " + strconv.Itoa(r.Nr)
		}
		l.opts.Refused(r)
	}
	lost()
}

// process is thread tid's process number in its innermost PID namespace
// (the last of NStgid) and the thread's command (Name: the process's
// unless the thread renamed itself). 0 and "" when it is gone, or is not
// in a PID namespace below this /proc's.
func process(tid int) (int, string) {
	st, ok := linux.ReadProcStatus(tid)
	if !ok || len(st.NStgid) < 2 {
		return 0, ""
	}
	return st.NStgid[len(st.NStgid)-1], st.Name
}
