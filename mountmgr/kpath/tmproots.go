package kpath

import (
	"sort"
	"strings"

	"github.com/rootfs-dev/rootfs/rootset"
)

// TmpRoots returns the first components below /tmp of the entries at
// their own path in a host-layout view, sorted.
func TmpRoots(entries []*rootset.Entry) []string {
	var paths []string
	for _, e := range entries {
		if e.Displaced == nil {
			paths = append(paths, e.ViewPath)
		}
	}
	return firstBelowTmp(paths)
}

// TmpPlaceholders returns the first components below /tmp of the view's
// placeholders (host layout: the mount points of binds below /tmp), which
// the sandbox's /tmp shows from the view from the start and for good.
func TmpPlaceholders(ps []rootset.Placeholder) []string {
	var paths []string
	for _, p := range ps {
		paths = append(paths, p.Name)
	}
	return firstBelowTmp(paths)
}

// firstBelowTmp returns, sorted and once each, X of every "tmp/X/..." in
// paths (view paths, without the leading slash).
func firstBelowTmp(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		rest, ok := strings.CutPrefix(p, "tmp/")
		if !ok {
			continue
		}
		first, _, _ := strings.Cut(rest, "/")
		if !seen[first] {
			seen[first] = true
			out = append(out, first)
		}
	}
	sort.Strings(out)
	return out
}
