//go:build linux

package vfs

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
)

// Record locks on a writable view (see "Locks" in the package comment).
//
// The kernel forwards each fcntl lock request with its lock owner: for a
// POSIX lock the process's file table (shared by its threads, not by a
// forked child), for an OFD lock the open file description. The daemon
// keeps one host open file description per (node, lock owner), opened for
// the owner's first lock by reopening the handle's descriptor, and takes
// the owner's locks on it as OFD locks: the host kernel then decides every
// conflict, between owners inside the view and with host processes, and an
// owner's own locks merge, split and upgrade as POSIX locks do.
//
// A POSIX owner's locks go when it closes any descriptor of the file: the
// kernel sends FLUSH with the owner on a close, and the daemon closes that
// owner's host description. An OFD owner's locks go when its description
// is released: RELEASE drops every owner that locked through the handle
// (by then every POSIX owner that held the handle has closed it, and so
// flushed). When the node's last handle is released, whatever is left goes.
//
// FLUSH is a synchronous round trip on every close, a large part of what
// open+close costs, and the kernel sends none for a handle opened with
// FOPEN_NOFLUSH; the flag is chosen at OPEN and cannot change later. The
// view sets it only where no lock can need the close (fileHandle.flushes):
// on a handle opened read-only while its file has never had a record lock
// asked for through the view. Every handle that can carry a write lock,
// and every handle of a file once locked, flushes, so POSIX close
// semantics are exact for them. What remains is a read-only descriptor
// opened before its file's first lock: its handle's RELEASE drops the
// locks of the process that opened it (the pid of the OPEN, resolved to
// its thread group when the file is first locked), as well as those taken
// through it. The kernel sends RELEASE when the last descriptor of the
// open file description closes, after close(2) has returned; so there a
// lock goes a moment after the close, and a copy made with dup(2) or
// inherited by a child keeps it until the last copy closes. FUSE does not
// say whether an owner is a process (POSIX) or a description (OFD), so an
// OFD lock that process took on another description of the file goes at
// that RELEASE too (natively it would stay). SQLite never
// closes a descriptor of a file its process holds locks on, and lock
// files are opened for writing; the read-only case is a reader that takes
// a read lock on a second descriptor while holding an older one.
//
// flock(2) keeps its own semantics (per open file description): it is taken
// on the handle's own host descriptor and released with it.
//
// go-fuse's posixtest (FcntlFlockLocksFile) asserts that two descriptors of
// one process exclude each other's POSIX locks, which is the per-descriptor
// behaviour this replaces and not POSIX: the view diverges from it on
// purpose (posix_linux_test.go skips that case).
//
// The owner's host description is opened with the access mode of the
// handle its first lock came through, never more: the daemon does not open
// for writing a file the caller opened only for reading (which would break
// host processes' leases, make exec(2) of the file fail with ETXTBSY and
// report a close-after-write to host watchers). When the owner later asks,
// through a handle with the other access, for a lock type its description
// cannot hold (a write lock on a read-only description), the description is
// replaced by a read-write one: the owner holds readable and writable
// handles, so it may open the file both ways. Its read locks are taken on
// the new description before the old one closes, so none is lost; write
// locks of a write-only description are moved range by range (another
// owner could take such a range in between).
//
// Limits: a waiting lock (F_SETLKW) is polled, so that an interrupted or
// killed waiter is answered at once instead of staying in the kernel until
// the lock is granted; the host kernel's deadlock detection (EDEADLK) does
// not apply to OFD locks, so a deadlock between two owners inside waits
// until one is interrupted. Every owner costs the daemon a descriptor from
// its first lock until it closes a descriptor of the file; past
// maxLockOwners of them a new owner's lock is refused with ENOLCK (as is
// the move to a read-write description while another thread of the owner
// waits for a lock). Every close of a descriptor that flushes (above)
// costs a FLUSH round trip.

// lockTables maps a *node to its *nodeLocks while any owner holds a host
// description for it.
var lockTables sync.Map

type nodeLocks struct {
	mu     sync.Mutex
	owners map[uint64]*ownerLock
}

// maxLockOwners bounds the host descriptors held for lock owners.
const maxLockOwners = 1 << 14

var lockOwnerFDs atomic.Int64

// ownerLock is one lock owner's host open file description for a node.
type ownerLock struct {
	fd   int
	mode int    // O_ACCMODE of fd
	pid  uint32 // the owner's pid (in the daemon's pid namespace), for F_GETLK
	via  map[*fileHandle]struct{}
	refs int  // requests using fd
	dead bool // dropped: fd is closed when refs reaches zero
}

// flushOwners carries FLUSH's lock owner from rawFS.Flush to
// fileHandle.Flush, keyed by the request's cancel channel (unique among
// requests in flight; go-fuse's bridge hands it through in the context):
// go-fuse's file API does not pass the owner on.
var flushOwners sync.Map

// forwardsLocks reports whether lock requests reach the daemon and are keyed
// by owner: on a writable view (a read-only one keeps them in the kernel).
func (v *View) forwardsLocks() bool { return !v.opts.ReadOnly && !control.On(control.NoLockOwners) }

// flushes reports whether closes of h's descriptors must reach the view
// (FLUSH carries the lock owner): while the view forwards locks, unless h
// is read-only and its file has never been locked through the view (see
// the comment at the top). It is decided once, as the handle is made.
func (h *fileHandle) flushes() bool {
	switch {
	case !h.n.v.forwardsLocks():
		return false
	case control.On(control.NoCloseUnlock):
		return h.n.file.locked.Load()
	}
	return h.writable || h.n.file.locked.Load()
}

// replyFlags are the flags of h's OPEN (CREATE, TMPFILE) reply; it
// records the opener for h's RELEASE.
func (h *fileHandle) replyFlags(ctx context.Context) uint32 {
	if !h.noflush {
		return fuse.FOPEN_KEEP_CACHE
	}
	if fc, ok := ctx.(*fuse.Context); ok && h.n.v.forwardsLocks() {
		h.opener.Store(fc.Caller.Pid)
		if h.n.file.locked.Load() {
			h.opener.Store(tgid(fc.Caller.Pid)) // locked meanwhile: see lockedFirst
		}
	}
	return fuse.FOPEN_NOFLUSH | fuse.FOPEN_KEEP_CACHE
}

// lockedFirst marks n as locked through the view, at its first lock
// request, and resolves the openers of its handles that do not flush to
// their processes (OPEN reports the calling thread, a lock its process;
// the thread may be gone by the time the handle is released).
func (n *node) lockedFirst() {
	f := n.file
	if f.locked.Load() || !f.locked.CompareAndSwap(false, true) {
		return
	}
	f.hmu.Lock()
	defer f.hmu.Unlock()
	for h := range f.handles {
		if h.noflush {
			if tid := h.opener.Load(); tid != 0 {
				h.opener.Store(tgid(tid))
			}
		}
	}
}

// tgid is the process (thread group) of thread tid, both in the daemon's
// pid namespace (the connection's: FUSE reports pids in the namespace of
// the process that mounted), or tid when /proc does not tell.
func tgid(tid uint32) uint32 {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		return tid
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Tgid:")); ok {
			if n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 32); err == nil {
				return uint32(n)
			}
		}
	}
	return tid
}

// Flush records the lock owner for fileHandle.Flush.
func (r rawFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	testStats.flushes.Add(1)
	if r.v.forwardsLocks() && cancel != nil {
		flushOwners.Store(cancel, in.LockOwner)
		defer flushOwners.Delete(cancel)
	}
	return r.RawFileSystem.Flush(cancel, in)
}

// flushLocks drops the POSIX locks of the owner closing a descriptor.
func (h *fileHandle) flushLocks(ctx context.Context) {
	fc, ok := ctx.(*fuse.Context)
	if !ok || fc.Cancel == nil {
		return
	}
	owner, ok := flushOwners.Load(fc.Cancel)
	if !ok {
		return
	}
	v, ok := lockTables.Load(h.n)
	if !ok {
		return
	}
	nl := v.(*nodeLocks)
	nl.mu.Lock()
	if ol := nl.owners[owner.(uint64)]; ol != nil {
		nl.dropLocked(h.n, owner.(uint64), ol)
	}
	nl.mu.Unlock()
}

// releaseLocks drops the owners that locked through h (h is being
// released), the POSIX locks of the process that opened h when its closes
// sent no FLUSH, and every owner once the node has no handle left.
func (h *fileHandle) releaseLocks(last bool) {
	v, ok := lockTables.Load(h.n)
	if !ok {
		return
	}
	var opener uint32
	if h.noflush && !control.On(control.NoCloseUnlock) {
		opener = h.opener.Load()
	}
	nl := v.(*nodeLocks)
	nl.mu.Lock()
	for owner, ol := range nl.owners {
		if _, via := ol.via[h]; via || last || (opener != 0 && ol.pid == opener) {
			nl.dropLocked(h.n, owner, ol)
		}
	}
	nl.mu.Unlock()
}

// dropLocked forgets owner's description (closing it, and so releasing its
// locks, once no request uses it). nl.mu is held.
func (nl *nodeLocks) dropLocked(n *node, owner uint64, ol *ownerLock) {
	delete(nl.owners, owner)
	ol.dead = true
	if ol.refs == 0 {
		closeOwnerFD(ol.fd)
	}
	if len(nl.owners) == 0 {
		lockTables.CompareAndDelete(n, nl)
	}
}

// owner returns owner's description for h's node, opening it when create
// is set, with a reference the caller gives back with put. It returns nil
// (and no error) when the owner has none and create is not set.
func (h *fileHandle) owner(owner uint64, create bool) (*nodeLocks, *ownerLock, error) {
	for {
		v, ok := lockTables.Load(h.n)
		if !ok {
			if !create {
				return nil, nil, nil
			}
			v, _ = lockTables.LoadOrStore(h.n, &nodeLocks{owners: map[uint64]*ownerLock{}})
		}
		nl := v.(*nodeLocks)
		nl.mu.Lock()
		if cur, _ := lockTables.Load(h.n); cur != v {
			nl.mu.Unlock() // emptied and removed meanwhile
			continue
		}
		ol := nl.owners[owner]
		if ol == nil {
			if !create {
				nl.mu.Unlock()
				return nil, nil, nil
			}
			mode, err := h.accMode()
			var fd int
			if err == nil {
				fd, err = h.reopen(mode)
			}
			if err != nil {
				if len(nl.owners) == 0 {
					lockTables.CompareAndDelete(h.n, nl)
				}
				nl.mu.Unlock()
				return nil, nil, err
			}
			ol = &ownerLock{fd: fd, mode: mode, via: map[*fileHandle]struct{}{}}
			nl.owners[owner] = ol
		}
		ol.refs++
		if create {
			ol.via[h] = struct{}{}
		}
		nl.mu.Unlock()
		return nl, ol, nil
	}
}

func (nl *nodeLocks) put(ol *ownerLock) {
	nl.mu.Lock()
	ol.refs--
	if ol.dead && ol.refs == 0 {
		closeOwnerFD(ol.fd)
	}
	nl.mu.Unlock()
}

// reopen opens a new host description of h's file with access mode (an
// O_ACCMODE value), counted against maxLockOwners.
func (h *fileHandle) reopen(mode int) (int, error) {
	if lockOwnerFDs.Add(1) > maxLockOwners {
		lockOwnerFDs.Add(-1)
		return -1, syscall.ENOLCK
	}
	fd, err := h.n.v.withFDs(func() (int, error) {
		return openat(unix.AT_FDCWD, procPath(h.fd), mode|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	})
	if err != nil {
		lockOwnerFDs.Add(-1)
	}
	return fd, err
}

func closeOwnerFD(fd int) {
	unix.Close(fd)
	lockOwnerFDs.Add(-1)
}

// accMode is the access mode h's descriptor was opened with.
func (h *fileHandle) accMode() (int, error) {
	fl, err := unix.FcntlInt(uintptr(h.fd), unix.F_GETFL, 0)
	return fl & unix.O_ACCMODE, err
}

// canHold reports whether a description opened with mode can hold a lock
// of type typ.
func canHold(mode int, typ uint32) bool {
	switch typ {
	case syscall.F_RDLCK:
		return mode != unix.O_WRONLY
	case syscall.F_WRLCK:
		return mode != unix.O_RDONLY
	}
	return true
}

// upgrade replaces ol's description by a read-write one, moving its locks
// (see the comment at the top). The caller holds the only reference.
func (h *fileHandle) upgrade(nl *nodeLocks, ol *ownerLock) error {
	nl.mu.Lock()
	defer nl.mu.Unlock()
	if ol.refs != 1 || ol.dead {
		return syscall.ENOLCK // another request of the owner is using it (a waiting lock)
	}
	fd, err := h.reopen(unix.O_RDWR)
	if err != nil {
		return err
	}
	held := ofdLocks(ol.fd)
	for _, lk := range held {
		if lk.Type != syscall.F_RDLCK {
			continue
		}
		if err := syscall.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk); err != nil {
			closeOwnerFD(fd)
			return err
		}
	}
	for _, lk := range held {
		if lk.Type != syscall.F_WRLCK {
			continue
		}
		un := lk
		un.Type = syscall.F_UNLCK
		syscall.FcntlFlock(uintptr(ol.fd), unix.F_OFD_SETLK, &un)
		if err := syscall.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk); err != nil {
			h.n.v.log.Warn("a write lock was lost while its owner's description was reopened read-write")
		}
	}
	closeOwnerFD(ol.fd)
	ol.fd, ol.mode = fd, unix.O_RDWR
	return nil
}

// ofdLocks lists the locks the description on fd holds, from
// /proc/self/fdinfo.
func ofdLocks(fd int) []syscall.Flock_t {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return nil
	}
	var out []syscall.Flock_t
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// lock:	1: OFDLCK ADVISORY  WRITE -1 fe:00:9986048 5 14
		f := bytes.Fields(sc.Bytes())
		if len(f) < 9 || string(f[0]) != "lock:" {
			continue
		}
		lk := syscall.Flock_t{Type: syscall.F_RDLCK}
		if string(f[4]) == "WRITE" {
			lk.Type = syscall.F_WRLCK
		}
		start, err := strconv.ParseInt(string(f[7]), 10, 64)
		if err != nil {
			continue
		}
		lk.Start = start
		if string(f[8]) != "EOF" {
			end, err := strconv.ParseInt(string(f[8]), 10, 64)
			if err != nil {
				continue
			}
			lk.Len = end - start + 1
		}
		out = append(out, lk)
	}
	return out
}

// getLock answers F_GETLK for owner: the first lock of another owner (or of
// a host process) that conflicts with lk, with the pid of the process that
// took it.
func (h *fileHandle) getLock(owner uint64, lk *fuse.FileLock, out *fuse.FileLock) syscall.Errno {
	fd := h.fd // holds no record locks: flock only
	nl, ol, err := h.owner(owner, false)
	if err != nil {
		return h.errno("getlk", err)
	}
	if ol != nil {
		defer nl.put(ol)
		fd = ol.fd
	}
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	flk.Pid = 0
	if err := syscall.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &flk); err != nil {
		return h.errno("getlk", err)
	}
	if flk.Type != syscall.F_UNLCK && flk.Pid == -1 {
		flk.Pid = int32(h.holder(owner, &flk))
	}
	out.FromFlockT(&flk)
	return 0
}

// holder finds which other owner of the node holds the OFD lock flk and
// returns its pid (0 when none does: a host process's OFD lock).
func (h *fileHandle) holder(owner uint64, flk *syscall.Flock_t) uint32 {
	v, ok := lockTables.Load(h.n)
	if !ok {
		return 0
	}
	nl := v.(*nodeLocks)
	nl.mu.Lock()
	defer nl.mu.Unlock()
	for o, ol := range nl.owners {
		if o != owner && !ol.dead && ofdHolds(ol.fd, flk) {
			return ol.pid
		}
	}
	return 0
}

// ofdHolds reports whether the description on fd holds exactly the lock
// flk (as F_OFD_GETLK reported it).
func ofdHolds(fd int, flk *syscall.Flock_t) bool {
	for _, lk := range ofdLocks(fd) {
		if lk.Type == flk.Type && lk.Start == flk.Start && lk.Len == flk.Len {
			return true
		}
	}
	return false
}

// setLock takes, changes or releases owner's POSIX or OFD record lock.
func (h *fileHandle) setRecordLock(ctx context.Context, owner uint64, lk *fuse.FileLock, wait bool) syscall.Errno {
	unlock := lk.Typ == syscall.F_UNLCK
	if !unlock {
		h.n.lockedFirst()
	}
	nl, ol, err := h.owner(owner, !unlock)
	if err != nil {
		return h.errno("setlk", err)
	}
	if ol == nil {
		return 0 // an unlock by an owner that holds nothing here
	}
	defer nl.put(ol)
	if !unlock {
		nl.mu.Lock()
		ol.pid = lk.Pid
		mode := ol.mode
		nl.mu.Unlock()
		if !canHold(mode, lk.Typ) {
			if err := h.upgrade(nl, ol); err != nil {
				return h.errno("setlk", err)
			}
		}
	}
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	flk.Pid = 0
	var cancel <-chan struct{}
	if fc, ok := ctx.(*fuse.Context); ok {
		cancel = fc.Cancel
	}
	for pause := time.Millisecond; ; pause = min(2*pause, 32*time.Millisecond) {
		err := syscall.FcntlFlock(uintptr(ol.fd), unix.F_OFD_SETLK, &flk)
		if !wait || (err != syscall.EAGAIN && err != syscall.EACCES) {
			return h.errno("setlk", err)
		}
		t := time.NewTimer(pause)
		select {
		case <-cancel:
			t.Stop()
			return syscall.EINTR // the kernel restarts the call unless a signal handler says otherwise
		case <-t.C:
		}
	}
}
