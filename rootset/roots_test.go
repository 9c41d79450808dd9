package rootset

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestParseRoot(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        error
	}{
		{"triple slash", "file:///home/u/proj", "/home/u/proj", nil},
		{"localhost", "file://localhost/home/u", "/home/u", nil},
		{"localhost any case", "FILE://LocalHost/a", "/a", nil},
		{"minimal form", "file:/a/b", "/a/b", nil},
		{"plain path", "/a/./b/../c/", "/a/c", nil},
		{"percent decoding", "file:///a%20b/%C3%A9", "/a b/é", nil},
		{"encoded dots clean lexically", "file:///a/b/%2e%2e/c", "/a/c", nil},
		{"dots cannot climb above /", "file:///../../etc", "/etc", nil},
		{"trailing slash", "file:///a/b/", "/a/b", nil},
		{"root", "file:///", "/", nil},
		{"encoded slash", "file:///a%2F..%2F..%2Fetc", "", ErrBadRoot},
		{"encoded slash lower", "file:///a%2fb", "", ErrBadRoot},
		{"encoded nul", "file:///a%00b", "", ErrBadRoot},
		{"raw nul", "/a\x00b", "", ErrBadRoot},
		{"empty", "", "", ErrBadRoot},
		{"relative path", "a/b", "", ErrBadRoot},
		{"relative file uri", "file:a/b", "", ErrBadRoot},
		{"other scheme", "https://example.com/a", "", ErrBadRoot},
		{"other host", "file://server/share", "", ErrBadRoot},
		{"user info", "file://u@localhost/a", "", ErrBadRoot},
		{"empty path", "file://localhost", "", ErrBadRoot},
		{"query", "file:///a?b", "", ErrBadRoot},
		{"fragment", "file:///a#b", "", ErrBadRoot},
		{"bad escape", "file:///a%zz", "", ErrBadRoot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRoot(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ParseRoot(%q) error = %v, want %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("ParseRoot(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestBuildTable(t *testing.T) {
	top := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(top, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := mk("one/proj"), mk("two/proj")
	c := mk("three/proj-2")
	usr := mk("four/usr")
	file := filepath.Join(top, "notes.txt")
	os.WriteFile(file, []byte("x"), 0o644)
	link := filepath.Join(top, "link")
	os.Symlink(a, link)

	tab := BuildTable([]Root{
		{URI: "file://" + a, Name: "First"},
		{URI: b},
		{URI: c},
		{URI: link},                       // duplicate of a through a symlink: collapses
		{URI: filepath.Join(top, "nope")}, // missing: skipped
		{URI: "https://x/y"},              // bad: skipped
		{URI: usr},                        // reserved name: renamed
		{URI: file},
	}, TableOptions{Reserved: []string{"usr"}})
	defer tab.Close()

	var names []string
	for _, e := range tab.Entries() {
		names = append(names, e.Name)
	}
	want := []string{"proj", "proj-2", "proj-2-2", "usr-2", "notes.txt"}
	if len(names) != len(want) {
		t.Fatalf("names = %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("names = %v, want %v", names, want)
		}
	}
	if e := tab.Lookup("proj"); e.Root.Name != "First" || e.HostPath != a || !e.IsDir {
		t.Errorf("proj entry = %+v", e)
	}
	if e := tab.Lookup("notes.txt"); e.IsDir {
		t.Errorf("file root reported as a directory")
	}
	if got := tab.Lookup("proj-2").ViewURI(); got != "file:///proj-2" {
		t.Errorf("ViewURI = %q", got)
	}
	sk := tab.Skipped()
	if len(sk) != 2 || !errors.Is(sk[0].Reason, fs.ErrNotExist) || !errors.Is(sk[1].Reason, ErrBadRoot) {
		t.Fatalf("skipped = %v", sk)
	}
}

func TestBuildTableAllow(t *testing.T) {
	top := t.TempDir()
	in := filepath.Join(top, "allowed", "proj")
	out := filepath.Join(top, "other")
	os.MkdirAll(in, 0o755)
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(top, "allowed", "f"), nil, 0o644)
	// A symlink inside the allowed dir that points out must not pass: the
	// check is on the resolved inode, not the path string.
	sneaky := filepath.Join(top, "allowed", "sneaky")
	os.Symlink(out, sneaky)

	tab := BuildTable([]Root{
		{URI: in}, {URI: filepath.Join(top, "allowed")}, {URI: filepath.Join(top, "allowed", "f")},
		{URI: out}, {URI: sneaky}, {URI: top},
	}, TableOptions{Allow: []string{filepath.Join(top, "allowed")}})
	defer tab.Close()
	if n := len(tab.Entries()); n != 3 {
		t.Fatalf("admitted %d entries, want 3: %v", n, tab.Entries())
	}
	if n := len(tab.Skipped()); n != 3 {
		t.Fatalf("skipped %d, want 3", n)
	}
	for _, s := range tab.Skipped() {
		if !errors.Is(s.Reason, ErrNotAllowed) {
			t.Errorf("skip reason %v, want ErrNotAllowed", s.Reason)
		}
	}
}

func TestBuildTableRefusesKernelFS(t *testing.T) {
	tab := BuildTable([]Root{{URI: "/proc"}, {URI: "file:///proc/self/root"}, {URI: "/sys"}, {URI: "/dev/fd/0"}}, TableOptions{})
	defer tab.Close()
	var bad int
	for _, s := range tab.Skipped() {
		if errors.Is(s.Reason, ErrBadRoot) {
			bad++
		}
	}
	// /proc and /sys are kernel interfaces; /proc/self/root and /dev/fd/0
	// are magic links that would name whatever the daemon holds.
	if bad != 4 || len(tab.Entries()) != 0 {
		t.Fatalf("entries %v, skipped %v: want all four refused as bad roots", tab.Entries(), tab.Skipped())
	}
}

// TestRootLogField: a root is logged under a name that says what it holds:
// a URI under "uri", a path given on the command line under "path".
func TestRootLogField(t *testing.T) {
	for _, tt := range []struct{ in, key string }{
		{"file:///home/me/src", "uri"},
		{"file://localhost/srv", "uri"},
		{"http://example.org/x", "uri"},
		{"/home/me/src", "path"},
		{"/tmp/a:b", "path"},
	} {
		if f := (Root{URI: tt.in}).LogField(); f.Key != tt.key || f.String != tt.in {
			t.Errorf("%q logged as %s=%q, want %s", tt.in, f.Key, f.String, tt.key)
		}
	}
}
