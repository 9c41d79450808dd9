package vfs

// The pure helpers of the view (viewpaths.go, snapshot.go): no FUSE, no
// host files, so these run on any platform and without /dev/fuse.

import (
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rootfs-dev/rootfs/rootset"
)

func TestChildKeySplitKey(t *testing.T) {
	tests := []struct {
		dir, name, key string
	}{
		{"", "a", "a"},
		{"a", "b", "a/b"},
		{"home/me", "src", "home/me/src"},
		{"", ".hidden", ".hidden"},
	}
	for _, tt := range tests {
		if got := childKey(tt.dir, tt.name); got != tt.key {
			t.Errorf("childKey(%q, %q) = %q, want %q", tt.dir, tt.name, got, tt.key)
		}
		if dir, name := splitKey(tt.key); dir != tt.dir || name != tt.name {
			t.Errorf("splitKey(%q) = %q, %q, want %q, %q", tt.key, dir, name, tt.dir, tt.name)
		}
	}
}

func TestValidKey(t *testing.T) {
	tests := []struct {
		key        string
		name, path bool // valid as one name; valid as a key (path)
	}{
		{"src", true, true},
		{".config", true, true},
		{"home/me/src", false, true},
		{"", false, false},
		{".", false, false},
		{"..", false, false},
		{"a/../b", false, false},
		{"a//b", false, false},
		{"/a", false, false},
		{"a/", false, false},
		{"a\x00b", false, false},
		{rootset.EpollHackName, false, false},
		{"a/" + rootset.EpollHackName, false, false},
		{strings.Repeat("x", 255), true, true},
		{strings.Repeat("x", 256), false, false},
		{"a/" + strings.Repeat("x", 256), false, false},
	}
	for _, tt := range tests {
		if got := validTopName(tt.key); got != tt.name {
			t.Errorf("validTopName(%q) = %v, want %v", tt.key, got, tt.name)
		}
		if got := validKey(tt.key); got != tt.path {
			t.Errorf("validKey(%q) = %v, want %v", tt.key, got, tt.path)
		}
	}
}

func TestAddDirs(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		want map[string][]string
	}{
		{"top-level keys", []string{"a", "b"}, map[string][]string{"": {"a", "b"}}},
		{"one deep key", []string{"home/me/src"}, map[string][]string{
			"": {"home"}, "home": {"me"}, "home/me": {"src"}}},
		{"shared directories listed once, in order", []string{"home/me/src", "home/you", "home/me/doc", "tmp"},
			map[string][]string{"": {"home", "tmp"}, "home": {"me", "you"}, "home/me": {"src", "doc"}}},
		{"a key below another keeps both", []string{"a", "a/b"}, map[string][]string{"": {"a"}, "a": {"b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dirs := map[string][]string{"": nil}
			seen := map[string]bool{}
			for _, k := range tt.keys {
				addDirs(dirs, seen, k)
			}
			if !reflect.DeepEqual(dirs, tt.want) {
				t.Errorf("dirs = %v, want %v", dirs, tt.want)
			}
		})
	}
}

func TestDroppedAbove(t *testing.T) {
	dropped := map[string]bool{"home/me": true, "tmp": true}
	for key, want := range map[string]bool{
		"home/me": true, "home/me/src": true, "home/me/src/x": true, "tmp/a": true,
		"home": false, "home/you": false, "home/meat": false, "opt": false, "": false,
	} {
		if got := droppedAbove(dropped, key); got != want {
			t.Errorf("droppedAbove(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestMixIno(t *testing.T) {
	const rootDev = 0x801
	if got := mixIno(rootDev, rootDev, 1234); got != 1234 {
		t.Errorf("a file on the root's device: inode %d, want its host number 1234", got)
	}
	other := mixIno(rootDev, 0x802, 1234)
	if other == 1234 || other == mixIno(rootDev, 0x803, 1234) {
		t.Errorf("files of two other devices with one host number must differ from it and from each other: %#x", other)
	}
	if mixIno(rootDev, 0x802, 1234) != other {
		t.Errorf("mixIno is not deterministic")
	}
	// 0, 1 and the all-ones number are not inode numbers the kernel may
	// be given (the root is 1).
	for _, ino := range []uint64{0, 1, math.MaxUint64} {
		if got := mixIno(rootDev, rootDev, ino); got <= 1 || got == math.MaxUint64 {
			t.Errorf("mixIno(%#x) = %#x, a reserved number", ino, got)
		}
	}
}

func TestSynthIno(t *testing.T) {
	a, b := synthIno("home"), synthIno("home/me")
	if a == b {
		t.Errorf("two paths, one number %#x", a)
	}
	if synthIno("home") != a {
		t.Errorf("synthIno is not deterministic")
	}
	for _, ino := range []uint64{a, b, synthIno("")} {
		if ino>>62 != 3 {
			t.Errorf("synthIno = %#x, outside the range kept for synthetic directories", ino)
		}
	}
}

func TestNewPlaceholders(t *testing.T) {
	long := "a/" + strings.Repeat("x", 256)
	list := []rootset.Placeholder{
		{Name: "usr"},                         // 0
		{Name: "bin", Symlink: "usr/bin"},     // 1
		{Name: "etc", File: true},             // 2: host: a file with a placeholder below it
		{Name: "etc/resolv.conf", File: true}, // 3: host layout only
		{Name: "usr"},                         // 4: the same name again
		{Name: ".."},                          // 5: invalid
		{Name: "home/me/.nvm/v20"},            // 6: host layout only
		{Name: "home", File: true},            // 7: host: already a directory leading to 6
		{Name: "tmp"},                         // 8
		{Name: "tmp/x"},                       // 9: host: below a directory placeholder
		{Name: rootset.EpollHackName},         // 10: invalid
		{Name: long},                          // 11: invalid
	}
	tests := []struct {
		name   string
		layout rootset.Layout
		index  map[string]int
		tops   []string
		dirs   map[string][]string
		warned []string // the names dropped with a warning
	}{
		{
			name:   "flat",
			layout: rootset.LayoutFlat,
			index:  map[string]int{"usr": 0, "bin": 1, "etc": 2, "home": 7, "tmp": 8},
			tops:   []string{"usr", "bin", "etc", "home", "tmp"},
			dirs:   map[string][]string{},
			warned: []string{"etc/resolv.conf", "..", "home/me/.nvm/v20", "tmp/x", rootset.EpollHackName, long},
		},
		{
			name:   "host",
			layout: rootset.LayoutHost,
			index:  map[string]int{"usr": 0, "bin": 1, "etc/resolv.conf": 3, "home/me/.nvm/v20": 6, "tmp": 8, "tmp/x": 9},
			tops:   []string{"usr", "bin", "tmp"},
			dirs: map[string][]string{
				"": {"etc", "home", "tmp"}, "etc": {"resolv.conf"}, "home": {"me"}, "home/me": {".nvm"},
				"home/me/.nvm": {"v20"}, "tmp": {"x"},
			},
			warned: []string{"etc", "..", rootset.EpollHackName, long},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			p := newPlaceholders(list, tt.layout, nil, zap.New(core))
			if !maps.Equal(p.index, tt.index) {
				t.Errorf("kept %v, want %v", p.index, tt.index)
			}
			var tops []string
			for _, ph := range p.tops {
				tops = append(tops, ph.Name)
			}
			if !slices.Equal(tops, tt.tops) {
				t.Errorf("top-level placeholders %q, want %q", tops, tt.tops)
			}
			if !reflect.DeepEqual(p.dirs, tt.dirs) {
				t.Errorf("dirs = %v, want %v", p.dirs, tt.dirs)
			}
			var warned []string
			for _, e := range logs.All() {
				warned = append(warned, e.ContextMap()["name"].(string))
			}
			slices.Sort(warned)
			if want := slices.Sorted(slices.Values(tt.warned)); !slices.Equal(warned, want) {
				t.Errorf("warned about %q, want %q", warned, want)
			}
			// Reserved: the go-fuse name, then every listed placeholder
			// whose name was kept, in list order.
			wantReserved := []string{rootset.EpollHackName}
			for _, ph := range list {
				if _, ok := tt.index[ph.Name]; ok {
					wantReserved = append(wantReserved, ph.Name)
				}
			}
			if got := p.reserved(); !slices.Equal(got, wantReserved) {
				t.Errorf("reserved() = %q, want %q", got, wantReserved)
			}
			for name, i := range tt.index {
				if ph, ok := p.at(name); !ok || ph != list[i] {
					t.Errorf("at(%q) = %v, %v, want %v", name, ph, ok, list[i])
				}
			}
			if _, ok := p.at("nothing"); ok {
				t.Errorf("at(%q) found a placeholder", "nothing")
			}
		})
	}
}

// TestPlaceholdersClaimed: where an entry may appear in host layout, next
// to placeholders (one of them, tmp, with roots allowed below it) and
// entries already placed.
func TestPlaceholdersClaimed(t *testing.T) {
	p := newPlaceholders([]rootset.Placeholder{{Name: "usr"}, {Name: "tmp"}, {Name: "tmp/.X11-unix"}, {Name: "home/me/.nvm/v20"}},
		rootset.LayoutHost, []string{"tmp"}, zap.NewNop())
	s := &snapshot{byName: map[string]slot{}, dirs: map[string][]string{"": nil}}
	seen := map[string]bool{}
	for _, key := range []string{"src/app", "data"} {
		s.byName[key] = slot{}
		s.order = append(s.order, key)
		addDirs(s.dirs, seen, key)
	}
	for key, want := range map[string]bool{
		"usr":              true,  // a placeholder
		"usr/lib":          true,  // below a placeholder
		"tmp":              true,  // a placeholder
		"tmp/work":         false, // below tmp, which is Beneath
		"tmp/.X11-unix":    true,  // a placeholder below tmp
		"tmp/.X11-unix/X0": true,  // below it: only tmp itself lets roots in
		"home":             true,  // leads to a placeholder
		"home/me":          true,
		"home/me/src":      false, // beside the path to the placeholder
		"home/me/.nvm/v20": true,
		"src":              true, // leads to an entry
		"src/app":          true, // an entry
		"src/app/sub":      true, // below an entry
		"src/lib":          false,
		"data":             true,
		"data2":            false,
		"opt":              false,
	} {
		if got := p.claimed(key, s); got != want {
			t.Errorf("claimed(%q) = %v, want %v", key, got, want)
		}
	}
	for key, want := range map[string]bool{
		"usr": true, "tmp": true, "tmp/.X11-unix": true, "home": true, "home/me/.nvm": true, "home/me/.nvm/v20": true,
		"src": false, "home/me/src": false, "opt": false,
	} {
		if got := p.permanent(key); got != want {
			t.Errorf("permanent(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestLeavingOf(t *testing.T) {
	keep, gone, repointed, fresh := &rootInc{name: "keep"}, &rootInc{name: "gone"}, &rootInc{name: "re"}, &rootInc{name: "re"}
	old := &snapshot{order: []string{"keep", "gone", "re"}, byName: map[string]slot{
		"keep": {inc: keep}, "gone": {inc: gone}, "re": {inc: repointed}}}
	ns := &snapshot{order: []string{"re", "keep", "new"}, byName: map[string]slot{
		"keep": {inc: keep}, "re": {inc: fresh}, "new": {inc: &rootInc{name: "new"}}}}
	removed, leaving := leavingOf(old, ns)
	if want := []string{"gone", "re"}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q (old table order)", removed, want)
	}
	if want := map[*rootInc]bool{gone: true, repointed: true}; !maps.Equal(leaving, want) {
		t.Errorf("leaving %v, want gone and the re-pointed incarnation", leaving)
	}
}
