//go:build linux

package vfs

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// posixSkip lists posixtest cases that cannot pass against the view, and why.
// XAttrLarge skips itself when the backing file system (ext4 here) refuses
// large values.
//
// FcntlFlockLocksFile asserts that a POSIX lock taken through one
// descriptor refuses a lock through a second descriptor of the same
// process: that is per-descriptor locking, not POSIX (one process is one
// lock owner), and the view keys locks by the kernel's lock owner on
// purpose (locks_linux.go; TestViewLockOwners checks the POSIX cases).
var posixSkip = map[string]string{
	"FcntlFlockLocksFile": "asserts per-descriptor locking; POSIX locks are per process (locks_linux.go)",
}

// TestPosix runs go-fuse's POSIX suite against an entry of the view, each
// case in a fresh directory of the root: with strict revocation and 1s
// caching (the defaults), with passthrough, and with 1h caching (which is
// only correct if the view's own changes keep the kernel's caches right).
func TestPosix(t *testing.T) {
	for _, tc := range []struct {
		name        string
		passthrough bool
		cache       time.Duration
	}{{"strict", false, 0}, {"passthrough", true, 0}, {"cache-1h", false, time.Hour}} {
		t.Run(tc.name, func(t *testing.T) { posixSuite(t, tc.passthrough, tc.cache) })
	}
}

func posixSuite(t *testing.T, passthrough bool, cache time.Duration) {
	h := hostTree(t)
	r := mkdir(t, filepath.Join(h, "r"))
	var cases []string
	for name := range posixtest.All {
		cases = append(cases, name)
	}
	sort.Strings(cases)
	for _, name := range cases {
		mkdir(t, filepath.Join(r, name))
	}
	s := serve(t, serveConfig{Roots: []string{r}, Passthrough: passthrough, CacheTimeout: cache})
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			if why, ok := posixSkip[name]; ok {
				t.Skip(why)
			}
			dir := filepath.Join(s.Mnt, "r", name)
			if _, err := os.Stat(dir); err != nil {
				t.Fatal(err)
			}
			posixtest.All[name](t, dir)
		})
	}
}
