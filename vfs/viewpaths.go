package vfs

// The view's pure path helpers: keys of the synthetic directories, inode
// numbers, and the placeholder set. Nothing here touches FUSE or the host,
// so viewpaths_test.go checks it on any platform.

import (
	"hash/fnv"
	"math/bits"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/rootset"
)

// A key names a node of the synthetic part by its path below the view's
// root, without a leading slash: "" is the top level, "home/me" a
// directory (host layout) or entry. Flat layout has only top-level keys.

// childKey is the key of name in the synthetic directory dir.
func childKey(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// splitKey returns the synthetic directory holding key and its name there.
func splitKey(key string) (dir, name string) {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// validTopName reports whether n can be a name in a directory of the view:
// not empty, "." or "..", nor the name go-fuse intercepts, at most 255
// bytes, and without a slash or NUL.
func validTopName(n string) bool {
	return n != "" && n != "." && n != ".." && n != rootset.EpollHackName && len(n) <= 255 &&
		!strings.ContainsAny(n, "/\x00")
}

// validKey reports whether every element of key can be a name in a
// directory of the view.
func validKey(key string) bool {
	for _, c := range strings.Split(key, "/") {
		if !validTopName(c) {
			return false
		}
	}
	return true
}

// addDirs records in dirs every synthetic directory on the way to key:
// each directory above key gets the name of the next element in its list
// (once, as seen records), and an entry of its own. key itself is not
// made a directory.
func addDirs(dirs map[string][]string, seen map[string]bool, key string) {
	dir := ""
	for _, c := range strings.Split(key, "/") {
		k := childKey(dir, c)
		if !seen[k] {
			seen[k] = true
			dirs[dir] = append(dirs[dir], c)
		}
		if k == key {
			return
		}
		if _, ok := dirs[k]; !ok {
			dirs[k] = nil
		}
		dir = k
	}
}

// droppedAbove reports whether key or a directory above it is in dropped.
func droppedAbove(dropped map[string]bool, key string) bool {
	for k := key; ; {
		if dropped[k] {
			return true
		}
		i := strings.LastIndexByte(k, '/')
		if i < 0 {
			return false
		}
		k = k[:i]
	}
}

// mixIno derives the inode number the kernel sees. Files on the root's own
// device keep their host number; others are mixed with their device so two
// file systems below one root do not collide.
func mixIno(rootDev, dev, ino uint64) uint64 {
	x := ino
	if dev != rootDev {
		x ^= bits.RotateLeft64(dev*0x9E3779B97F4A7C15, 40)
	}
	if x <= 1 || x == ^uint64(0) {
		x ^= 1 << 62
	}
	return x
}

// synthIno is the inode number of the synthetic directory at key: the
// same for the same path, in a range that host inodes (mixIno) and
// go-fuse's automatic numbers (from 2^63) do not reach in practice.
func synthIno(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64() | 3<<62
}

// placeholders are the names the view provides itself (Options.Placeholders),
// checked once by NewView and never changed after.
type placeholders struct {
	list    []rootset.Placeholder // Options.Placeholders, as given
	index   map[string]int        // name (host layout: path) -> index in list, for the ones kept
	tops    []rootset.Placeholder // the top-level ones, in order: OnAdd makes them, listings name them
	dirs    map[string][]string   // host layout: synthetic directory -> the placeholder paths' children in it
	beneath []string              // names below which roots may still appear (Options.Beneath)
}

// newPlaceholders keeps the placeholders of list that can be served: a
// valid name (in host layout, a valid path), the first of each name, and
// no file or symlink with another placeholder below it. It logs each one
// it drops.
func newPlaceholders(list []rootset.Placeholder, layout rootset.Layout, beneath []string, log *zap.Logger) *placeholders {
	p := &placeholders{list: list, index: map[string]int{}, dirs: map[string][]string{}, beneath: beneath}
	seen := map[string]bool{}
	for i, ph := range list {
		ok := validTopName(ph.Name) || layout == rootset.LayoutHost && validKey(ph.Name)
		if !ok {
			log.Warn("placeholder ignored: invalid name", zap.String("name", ph.Name))
			continue
		}
		if _, dup := p.index[ph.Name]; dup || seen[ph.Name] {
			continue
		}
		p.index[ph.Name] = i
		if strings.Contains(ph.Name, "/") {
			addDirs(p.dirs, seen, ph.Name)
		}
	}
	// A file or symlink placeholder cannot also lead to another; a
	// directory one can (tmp, with the mount points of binds below it).
	for name, i := range p.index {
		if ph := list[i]; !ph.File && ph.Symlink == "" {
			continue
		}
		if _, ok := p.dirs[name]; ok {
			log.Warn("placeholder ignored: another one lies below it", zap.String("name", name))
			delete(p.index, name)
		}
	}
	for i, ph := range list {
		if j, ok := p.index[ph.Name]; ok && j == i && !strings.Contains(ph.Name, "/") {
			p.tops = append(p.tops, ph)
		}
	}
	return p
}

// at returns the placeholder at key.
func (p *placeholders) at(key string) (rootset.Placeholder, bool) {
	i, ok := p.index[key]
	if !ok {
		return rootset.Placeholder{}, false
	}
	return p.list[i], true
}

// reserved returns the names (host layout: paths) the view uses itself:
// its placeholders and the name go-fuse intercepts. Install passes them as
// TableOptions.Reserved.
func (p *placeholders) reserved() []string {
	out := []string{rootset.EpollHackName}
	for _, ph := range p.list {
		if _, ok := p.index[ph.Name]; ok {
			out = append(out, ph.Name)
		}
	}
	return out
}

// permanent reports whether the synthetic directory at key is there
// whatever the table: a placeholder or a directory leading to one. The
// kernel never holds a negative entry for it, and may hold mounts on or
// below it.
func (p *placeholders) permanent(key string) bool {
	_, ph := p.index[key]
	_, phDir := p.dirs[key]
	return ph || phDir
}

// claimed reports whether key, or a directory on the way to it, is a
// placeholder or an entry of s, or key is a directory leading to one.
// A root may lie below a placeholder named in beneath.
func (p *placeholders) claimed(key string, s *snapshot) bool {
	if _, ok := p.dirs[key]; ok {
		return true
	}
	if _, ok := s.dirs[key]; ok {
		return true
	}
	for k := key; ; {
		if _, ok := p.index[k]; ok && (k == key || !slices.Contains(p.beneath, k)) {
			return true
		}
		if _, ok := s.byName[k]; ok {
			return true
		}
		i := strings.LastIndexByte(k, '/')
		if i < 0 {
			return false
		}
		k = k[:i]
	}
}
