package rootset

import (
	"errors"
	"net/url"
	"path"
	"strings"
	"testing"
)

// TestParseRootTraversal: encodings of "..", "/" and NUL never name more
// than the decoded text spells.
func TestParseRootTraversal(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        error
	}{
		{"encoded dots upper", "file:///srv/r/%2E%2E/%2E%2E/etc", "/etc", nil},
		{"mixed dots", "file:///srv/r/.%2e/x", "/srv/x", nil},
		{"double encoded stays a name", "file:///srv/%252e%252e/x", "/srv/%2e%2e/x", nil},
		{"dot segments only", "file:///./././", "/", nil},
		{"encoded slash with dots", "file:///srv/r/..%2f..%2fetc", "", ErrBadRoot},
		{"encoded slash upper", "file:///srv/r%2F..", "", ErrBadRoot},
		{"encoded nul upper", "file:///srv/r%00", "", ErrBadRoot},
		{"backslash is a name byte", `file:///srv/r\..\..`, `/srv/r\..\..`, nil},
		{"host with port", "file://localhost:80/a", "", ErrBadRoot},
		{"ipv6 host", "file://[::1]/a", "", ErrBadRoot},
		{"unc style", "file:////server/share", "/server/share", nil},
		{"scheme only", "file:", "", ErrBadRoot},
		{"scheme case", "File:///a", "/a", nil},
		{"data uri", "data:text/plain,hi", "", ErrBadRoot},
		{"javascript", "javascript:alert(1)", "", ErrBadRoot},
		{"dot relative", "./a", "", ErrBadRoot},
		{"dotdot relative", "../a", "", ErrBadRoot},
		{"tilde", "~/a", "", ErrBadRoot},
		{"space", " /a", "", ErrBadRoot},
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
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

// FuzzParseRoot checks the properties every accepted root has: an
// absolute, lexically clean path without NUL or ".." elements, stable under
// re-parsing, and the same whether given as a path or as its file:// URI.
// Every refusal wraps ErrBadRoot. Run: go test -fuzz FuzzParseRoot ./rootset
func FuzzParseRoot(f *testing.F) {
	for _, s := range []string{
		"file:///a/b", "file://localhost/a", "/a/../b", "file:///a%2F..", "file:///%2e%2e/etc",
		"file:///a%00", "file://host/a", "https://x/y", "a/b", "", "file:/a", "file:///a?b#c",
		"file:///caf%C3%A9", "file:////x", "file://LOCALHOST/%2E",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseRoot(s)
		if err != nil {
			if !errors.Is(err, ErrBadRoot) {
				t.Fatalf("ParseRoot(%q): error %v does not wrap ErrBadRoot", s, err)
			}
			if p != "" {
				t.Fatalf("ParseRoot(%q) returned %q with an error", s, p)
			}
			return
		}
		if !strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.IndexByte(p, 0) >= 0 {
			t.Fatalf("ParseRoot(%q) = %q: not a clean absolute path", s, p)
		}
		for _, el := range strings.Split(p, "/") {
			if el == ".." || el == "." {
				t.Fatalf("ParseRoot(%q) = %q has a %q element", s, p, el)
			}
		}
		if again, err := ParseRoot(p); err != nil || again != p {
			t.Fatalf("ParseRoot(%q) = %q, %v; want it unchanged", p, again, err)
		}
		u := (&url.URL{Scheme: "file", Path: p}).String()
		if back, err := ParseRoot(u); err != nil || back != p {
			t.Fatalf("path %q as URI %q parses to %q, %v", p, u, back, err)
		}
	})
}

// FuzzNames checks entry naming: names are unique, never reserved, and the
// first holder of a base name keeps it; the result is the same every time.
func FuzzNames(f *testing.F) {
	f.Add("proj/proj/proj-2/usr", "usr")
	f.Add("a/a/a/a-2/a-2", "a-3")
	f.Fuzz(func(t *testing.T, list, reserved string) {
		bases := strings.Split(list, "/")
		build := func() []string {
			taken := map[string]bool{".go-fuse-epoll-hack": true}
			for _, r := range strings.Split(reserved, "/") {
				taken[r] = true
			}
			var out []string
			for _, b := range bases {
				n := uniqueName(b, taken)
				if taken[n] {
					t.Fatalf("uniqueName(%q) = %q, which is taken", b, n)
				}
				taken[n] = true
				out = append(out, n)
			}
			return out
		}
		first, second := build(), build()
		seen := map[string]bool{}
		for i, n := range first {
			if n != second[i] {
				t.Fatalf("naming is not deterministic: %q vs %q", first, second)
			}
			if seen[n] {
				t.Fatalf("duplicate name %q in %q", n, first)
			}
			seen[n] = true
			if !strings.HasPrefix(n, bases[i]) {
				t.Fatalf("name %q does not start with its base %q", n, bases[i])
			}
		}
	})
}
