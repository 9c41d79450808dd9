//go:build linux

package vfs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// A listing of the top level is one table's, even when the kernel reads it
// in several requests and an install comes in between.
//
// Without OPENDIR (noopendir_linux.go) every READDIR request gets a fresh
// stream that seeks to the kernel's offset; with a plain index as the
// offset, a listing continued after an install read the new table from the
// old one's position: names repeated or skipped, or EINVAL where the new
// table was shorter (seen as "ls: reading directory '/': Invalid argument"
// under root flips). So each listing is kept, and every offset names its
// listing and its position in it: a continuation reads on in the same
// listing. The view keeps the last topListings listings; a continuation of
// an older one ends the listing there (a prefix of one table, never a
// mix).

const (
	topListings = 32
	topIdxBits  = 16 // the top level holds at most MaxRoots entries plus the placeholders
)

// topLists holds the recent listings of the top level.
type topLists struct {
	// mu guards the fields that follow.
	mu   sync.Mutex
	next uint64
	ring [topListings]topList
}

type topList struct {
	id      uint64 // 0: free
	entries []fuse.DirEntry
}

func (l *topLists) add(entries []fuse.DirEntry) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	l.ring[l.next%topListings] = topList{id: l.next, entries: entries}
	return l.next
}

func (l *topLists) get(id uint64) ([]fuse.DirEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.ring[id%topListings]; t.id == id && id != 0 {
		return t.entries, true
	}
	return nil, false
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
		s.entries = s.r.list()
		s.id = s.r.v.topLists.add(s.entries)
		if testTopPlainOffsets {
			s.id = 0
		}
	}
}

// testTopPlainOffsets numbers entries by position only and continues a
// listing in the current table, as before (the negative control of
// TestViewTopListingOneTable).
var testTopPlainOffsets = false

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
	if testTopPlainOffsets {
		s.start()
		if int(off) > len(s.entries) {
			return syscall.EINVAL
		}
		s.idx = int(off)
		return 0
	}
	id, idx := off>>topIdxBits, int(off&(1<<topIdxBits-1))
	s.started = true
	entries, ok := s.r.v.topLists.get(id)
	if !ok || idx > len(entries) {
		s.id, s.entries, s.idx = id, nil, 0 // forgotten: end the listing
		return 0
	}
	s.id, s.entries, s.idx = id, entries, idx
	return 0
}

func (s *topStream) Close() {}
