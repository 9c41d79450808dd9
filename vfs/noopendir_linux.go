//go:build linux

package vfs

import (
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rootfs-dev/rootfs/internal/control"
)

// Directories without OPENDIR (FUSE_NO_OPENDIR_SUPPORT, Linux 5.1+).
//
// When the kernel offers it, the view answers OPENDIR with ENOSYS; the
// kernel then stops sending OPENDIR and RELEASEDIR on the mount, opens
// directories without asking, sends READDIR, READDIRPLUS and FSYNCDIR with
// file handle 0, and keeps the listings it has read cached as under
// FOPEN_CACHE_DIR|FOPEN_KEEP_CACHE (checked on Linux 6.18): a warm walk
// sends nothing per directory, not even OPENDIR and RELEASEDIR.
//
// go-fuse v2.12.1's fs bridge does not support this by itself: file handle
// 0 is its dummy entry with no file, so READDIR(PLUS) on it answers an
// empty listing and FSYNCDIR ENOTSUP. rawFS therefore serves a request
// with handle 0 through a handle of its own, opened (by the bridge's
// OPENDIR, so through the node's OpendirHandle and its checks) for that
// request and released after it. A listing read in several requests reopens
// each time and seeks to the kernel's offset (the host directory's
// cookie), as a seekdir would. A directory of a revoked root opens (the
// kernel does not ask) and fails its first READDIR with EIO.
//
// FUSE_NO_OPEN_SUPPORT is not used: RELEASE of a file is where its lock
// owners' locks (locks_linux.go) and its unlinked-file pins go.

// rawState is what rawFS learns at INIT.
type rawState struct {
	srv       atomic.Pointer[fuse.Server]
	noOpendir atomic.Int32 // 0 unknown, 1 negotiated, 2 not
}

func (r rawFS) Init(s *fuse.Server) {
	if r.st != nil {
		r.st.srv.Store(s)
	}
	r.RawFileSystem.Init(s)
}

// noOpendir reports whether OPENDIR may answer ENOSYS: the kernel offered
// FUSE_NO_OPENDIR_SUPPORT (MountOptions asks for it whenever offered).
func (r rawFS) noOpendir() bool {
	if r.st == nil || control.On(control.NoOpendirElision) {
		return false
	}
	switch r.st.noOpendir.Load() {
	case 1:
		return true
	case 2:
		return false
	}
	s := r.st.srv.Load()
	if s == nil {
		return false
	}
	ok := s.KernelSettings().Flags64()&fuse.CAP_NO_OPENDIR_SUPPORT != 0
	if ok {
		r.st.noOpendir.Store(1)
	} else {
		r.st.noOpendir.Store(2)
	}
	return ok
}

func (r rawFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	testStats.dirRequests.Add(1)
	if r.noOpendir() {
		return fuse.ENOSYS
	}
	return r.RawFileSystem.OpenDir(cancel, in, out)
}

func (r rawFS) ReleaseDir(in *fuse.ReleaseIn) {
	testStats.dirRequests.Add(1)
	r.RawFileSystem.ReleaseDir(in)
}

// withDir runs serve with *fh naming an open directory handle: the
// kernel's, or one opened for this request when it sent none.
func (r rawFS) withDir(cancel <-chan struct{}, hdr *fuse.InHeader, fh *uint64, serve func() fuse.Status) fuse.Status {
	if *fh != 0 {
		return serve()
	}
	var out fuse.OpenOut
	st := r.RawFileSystem.OpenDir(cancel, &fuse.OpenIn{InHeader: *hdr, Flags: syscall.O_RDONLY | syscall.O_DIRECTORY}, &out)
	if st != fuse.OK {
		return st
	}
	*fh = out.Fh
	defer r.RawFileSystem.ReleaseDir(&fuse.ReleaseIn{InHeader: *hdr, Fh: out.Fh})
	return serve()
}

func (r rawFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	testStats.dirRequests.Add(1)
	return r.withDir(cancel, &in.InHeader, &in.Fh, func() fuse.Status { return r.RawFileSystem.ReadDir(cancel, in, out) })
}

func (r rawFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	testStats.dirRequests.Add(1)
	return r.withDir(cancel, &in.InHeader, &in.Fh, func() fuse.Status { return r.RawFileSystem.ReadDirPlus(cancel, in, out) })
}

func (r rawFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return r.withDir(cancel, &in.InHeader, &in.Fh, func() fuse.Status { return r.RawFileSystem.FsyncDir(cancel, in) })
}
