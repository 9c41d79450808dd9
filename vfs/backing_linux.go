//go:build linux

package vfs

import (
	"runtime"
	"sync"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
)

// Credentials of passthrough backing files.
//
// The kernel records the credentials of the thread that registers a backing
// file (FUSE_DEV_IOC_BACKING_OPEN: fb->cred = prepare_creds() in
// fs/fuse/backing.c) and does every passthrough read, write, splice and mmap
// on it with them (backing_file_ctx.cred in fs/fuse/passthrough.c). The
// daemon's own credentials hold CAP_FSETID, so a write(2) through a
// passthrough handle would keep the set-user-ID bit the kernel clears for
// the caller on a native file system. The registration therefore happens on
// a thread whose effective capability set is lowered to CAP_SYS_ADMIN, the
// one capability the ioctl itself demands: the kernel then clears set-ID
// bits and drops security.capability on every passthrough write, including
// writes to a file that became set-ID after it was opened. Capabilities are
// per thread in Linux (capset(2) changes the calling thread only).
//
// go-fuse registers the descriptor PassthroughFd returns on the goroutine
// that served OPEN, CREATE or TMPFILE, right after the node's method
// returned, and gives no hook after it. View.Mount wraps go-fuse's raw file
// system so that those three requests run on a locked OS thread (armed);
// PassthroughFd lowers that thread's capabilities (lowerForBacking), and the
// wrapper raises them again once go-fuse has registered the file. Without
// the wrapper (the root mounted with fs.Mount), PassthroughFd finds no
// armed thread and the view serves all I/O itself.

// armedThreads maps the id of a thread inside a wrapped OPEN, CREATE or
// TMPFILE to its state.
var armedThreads sync.Map // int (tid) -> *armedThread

type armedThread struct {
	saved *[2]unix.CapUserData // the capabilities before lowerForBacking; nil: not lowered
}

// keptForBacking is the effective capability set of a backing file's
// credentials: only what FUSE_DEV_IOC_BACKING_OPEN checks.
const keptForBacking = uint64(1) << unix.CAP_SYS_ADMIN

func capget() (*[2]unix.CapUserData, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return nil, err
	}
	return &data, nil
}

func capset(data *[2]unix.CapUserData) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	return unix.Capset(&hdr, &data[0])
}

// lowerForBacking lowers the calling thread's effective capabilities to
// keptForBacking when the thread is armed (inside View.Mount's wrapper),
// and reports whether the descriptor may be given for passthrough.
func (v *View) lowerForBacking() bool {
	if control.On(control.NoKillPriv) {
		return true // the negative control: the daemon's own credentials
	}
	a, ok := armedThreads.Load(unix.Gettid())
	if !ok {
		return false
	}
	t := a.(*armedThread)
	if t.saved != nil {
		return true
	}
	saved, err := capget()
	if err != nil {
		v.log.Warn("passthrough off for this file: capget failed", zap.Error(err))
		return false
	}
	low := *saved
	low[0].Effective &= uint32(keptForBacking)
	low[1].Effective &= uint32(keptForBacking >> 32)
	low[0].Inheritable, low[1].Inheritable = 0, 0
	if err := capset(&low); err != nil {
		v.log.Warn("passthrough off for this file: capset failed", zap.Error(err))
		return false
	}
	t.saved = saved
	return true
}

// arm runs the rest of a request that may register a backing file on a
// locked OS thread that lowerForBacking may lower; the returned function
// raises the thread's capabilities again and unlocks it. Should raising
// fail, the goroutine stays locked to the lowered thread: later requests it
// serves fail for want of privilege, which is safe, instead of the thread
// going back to the runtime's pool.
func (v *View) arm() func() {
	runtime.LockOSThread()
	tid := unix.Gettid()
	t := &armedThread{}
	armedThreads.Store(tid, t)
	return func() {
		armedThreads.Delete(tid)
		if t.saved != nil {
			if err := capset(t.saved); err != nil {
				v.log.Error("cannot restore the daemon thread's capabilities after registering a backing file", zap.Error(err))
				return
			}
		}
		runtime.UnlockOSThread()
	}
}

// rawFS is go-fuse's raw file system for the view, with OPEN, CREATE and
// TMPFILE armed under Options.Passthrough, the lock owner of FLUSH
// passed on (locks_linux.go), and directories served without OPENDIR
// (noopendir_linux.go).
type rawFS struct {
	fuse.RawFileSystem
	v  *View
	st *rawState // noopendir_linux.go
}

// armed arms the request's thread (arm) when the view may hand out
// passthrough handles, and returns what undoes it.
func (r rawFS) armed() func() {
	if !r.v.opts.Passthrough {
		return func() {}
	}
	return r.v.arm()
}

func (r rawFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	defer r.armed()()
	return r.RawFileSystem.Open(cancel, in, out)
}

func (r rawFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer r.armed()()
	return r.RawFileSystem.Create(cancel, in, name, out)
}

func (r rawFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	defer r.armed()()
	return r.RawFileSystem.Tmpfile(cancel, in, out)
}

// serve mounts the view on dir with o (from fuseOptions, adjusted by the
// caller) and returns once the kernel has answered INIT, as fs.Mount does.
// Every mount goes through it (View.Mount; the tests' harness): under
// Options.Passthrough it is what registers backing files with lowered
// credentials (see above); the root mounted with fs.Mount would serve every
// file through the daemon. It records where the view is mounted (mountSelf)
// for Install.
func (v *View) serve(dir string, o *fs.Options) (*fuse.Server, error) {
	self, err := newMountSelf(dir)
	if err != nil {
		return nil, err
	}
	if err := self.check(v.Table()); err != nil {
		return nil, err
	}
	raw := rawFS{RawFileSystem: fs.NewNodeFS(v.root, o), v: v, st: &rawState{}}
	var mo *fuse.MountOptions
	if o != nil {
		m := o.MountOptions
		m.ExtraCapabilities |= fuse.CAP_NO_OPENDIR_SUPPORT // served by rawFS only
		mo = &m
	}
	srv, err := fuse.NewServer(raw, dir, mo)
	if err != nil {
		return nil, err
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		return nil, err
	}
	self.dev, _, _ = topMount(self.dir)
	v.self.Store(self)
	return srv, nil
}
