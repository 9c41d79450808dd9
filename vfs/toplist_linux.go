//go:build linux

package vfs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rootfs-dev/rootfs/internal/control"
)

// A listing of a synthetic directory (the top level, or in host layout one
// leading to the roots) is one table's, even when the kernel reads it in
// several requests and an install comes in between.
//
// Without OPENDIR (noopendir_linux.go) every READDIR request gets a fresh
// stream that seeks to the kernel's offset; with a plain index as the
// offset, a listing continued after an install would read the new table
// from the old one's position: names repeated or skipped, or EINVAL where
// the new table is shorter ("ls: reading directory '/': Invalid argument").
// So every offset names the snapshot the listing was
// made from (its generation) and the position in it, and the view keeps
// the snapshots of the last topListings installs: a continuation lists on
// from the same snapshot. One begun before that many installs ends there
// (a prefix of one table, never a mix). The bound counts installs, not
// listings: counted by listings, readers listing in parallel (every
// synthetic directory's listings share it) would push each other's out and
// cut listings short without any install in between.

const (
	topListings = 32
	topIdxBits  = 16 // a synthetic directory holds at most MaxRoots entries plus the placeholders
)

// topLists holds the snapshots of the recent installs, by generation.
type topLists struct {
	// mu guards the field that follows.
	mu   sync.Mutex
	ring [topListings]*snapshot
}

// add records s; swap calls it before publishing s, so that every
// snapshot a listing can start from is found by its continuations.
func (l *topLists) add(s *snapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[s.gen%topListings] = s
}

func (l *topLists) get(gen uint64) *snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.ring[gen%topListings]; s != nil && s.gen == gen {
		return s
	}
	return nil
}

// topStream is one READDIR's view of a listing (fs.DirStream with Seekdir).
type topStream struct {
	r       *rootDir
	id      uint64
	entries []fuse.DirEntry
	idx     int
	started bool
}

func (s *topStream) start() {
	if !s.started {
		s.started = true
		snap := s.r.v.current()
		s.entries = s.r.listOf(snap)
		s.id = snap.gen
		if control.On(control.NoTopListingGen) {
			s.id = 0
		}
	}
}

func (s *topStream) HasNext() bool {
	s.start()
	return s.idx < len(s.entries)
}

func (s *topStream) Next() (fuse.DirEntry, syscall.Errno) {
	s.start()
	e := s.entries[s.idx]
	s.idx++
	e.Off = s.id<<topIdxBits | uint64(s.idx)
	return e, 0
}

// Seekdir continues the listing the offset came from.
func (s *topStream) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 {
		s.started, s.idx = false, 0
		return 0
	}
	if control.On(control.NoTopListingGen) {
		s.start()
		if int(off) > len(s.entries) {
			return syscall.EINVAL
		}
		s.idx = int(off)
		return 0
	}
	id, idx := off>>topIdxBits, int(off&(1<<topIdxBits-1))
	s.started = true
	var entries []fuse.DirEntry
	if snap := s.r.v.sw.lists.get(id); snap != nil {
		entries = s.r.listOf(snap)
	}
	if idx > len(entries) {
		s.id, s.entries, s.idx = id, nil, 0 // forgotten: end the listing
		return 0
	}
	s.id, s.entries, s.idx = id, entries, idx
	return 0
}

func (s *topStream) Close() {}
