package mountmgr

import (
	"sort"
	"strings"

	"github.com/rootfs-dev/rootfs/vfs"
)

// TmpRoots returns the first components below /tmp of the entries at
// their own path in a host-layout view, sorted.
func TmpRoots(entries []*vfs.Entry) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.ViewPath, "tmp/")
		if !ok || e.Displaced != nil {
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

// TmpPlaceholders returns the first components below /tmp of the view's
// placeholders (host layout: the mount points of binds below /tmp), which
// the sandbox's /tmp shows from the view from the start and for good.
func TmpPlaceholders(ps []vfs.Placeholder) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range ps {
		rest, ok := strings.CutPrefix(p.Name, "tmp/")
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
