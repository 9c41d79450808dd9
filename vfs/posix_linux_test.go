//go:build linux

package vfs

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// posixSkip lists posixtest cases that cannot pass against the view, and why.
// XAttrLarge skips itself when the backing file system (ext4 here) refuses
// large values.
var posixSkip = map[string]string{}

// TestPosix runs go-fuse's POSIX suite against an entry of the view, each
// case in a fresh directory of the root, with strict revocation (the
// default) and with passthrough.
func TestPosix(t *testing.T) {
	for _, pt := range []bool{false, true} {
		name := "strict"
		if pt {
			name = "passthrough"
		}
		t.Run(name, func(t *testing.T) { posixSuite(t, pt) })
	}
}

func posixSuite(t *testing.T, passthrough bool) {
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
	s := serve(t, serveConfig{Roots: []string{r}, Passthrough: passthrough})
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
