package spec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rootfs-dev/rootfs/rootset"
)

func TestParseBind(t *testing.T) {
	tests := []struct {
		name, in string
		want     Bind
		wantErr  error
	}{
		{"same path", "/opt/x", Bind{Source: "/opt/x", Dest: "/opt/x", ReadOnly: true}, nil},
		{"dest", "/home/u/.npm:/npm", Bind{Source: "/home/u/.npm", Dest: "/npm", ReadOnly: true}, nil},
		{"cleaned", "/a/../b/:/c/./d", Bind{Source: "/b", Dest: "/c/d", ReadOnly: true}, nil},
		{"relative source", "x:/y", Bind{}, ErrBadSpec},
		{"relative dest", "/x:y", Bind{}, ErrBadSpec},
		{"root dest", "/x:/", Bind{}, ErrBadSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseBind(tt.in, true)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestBuildEnv(t *testing.T) {
	host := map[string]string{"LANG": "de_DE.UTF-8", "AWS_SECRET_ACCESS_KEY": "T4", "TERM": "xterm"}
	get := func(k string) string { return host[k] }
	tests := []struct {
		name       string
		set, unset []string
		want       []string
		wantErr    error
	}{
		{"default", nil, nil, []string{"PATH=" + DefaultPath, "HOME=/tmp", "LANG=de_DE.UTF-8"}, nil},
		{"set and unset", []string{"FOO=a=b", "PATH=/x"}, []string{"LANG"}, []string{"PATH=/x", "HOME=/tmp", "FOO=a=b"}, nil},
		{"bad set", []string{"NOEQUALS"}, nil, nil, ErrBadSpec},
		{"bad unset", nil, []string{"A=B"}, nil, ErrBadSpec},
		{"name from host", []string{"AWS_SECRET_ACCESS_KEY"}, nil, []string{"PATH=" + DefaultPath, "HOME=/tmp", "LANG=de_DE.UTF-8", "AWS_SECRET_ACCESS_KEY=T4"}, nil},
		{"name unset on host", []string{"GITHUB_TOKEN"}, nil, nil, ErrBadSpec},
		{"bad name", []string{"1X"}, nil, nil, ErrBadSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BuildEnv(get, tt.set, tt.unset)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPlaceholders(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "usr"), 0o755)
	os.Symlink("usr/bin", filepath.Join(dir, "bin"))
	cmdDir := filepath.Join(dir, "opt", "node", "bin")
	os.MkdirAll(cmdDir, 0o755)
	os.WriteFile(filepath.Join(cmdDir, "node"), nil, 0o755)
	spec := &Spec{
		RuntimeDirs: []string{filepath.Join(dir, "usr"), filepath.Join(dir, "bin"), filepath.Join(dir, "missing")},
		Argv:        []string{filepath.Join(cmdDir, "node")},
		Binds:       []Bind{{Source: dir, Dest: "/cache/npm"}},
	}
	got := Placeholders(spec)
	top := TopLevel(dir) // the temp dir's top level (e.g. "tmp") holds the command dir
	want := map[string]rootset.Placeholder{"etc": {Name: "etc"}, "dev": {Name: "dev"}, "proc": {Name: "proc"},
		"tmp": {Name: "tmp"}, "cache": {Name: "cache"}, top: {Name: top}}
	// Runtime dirs given as absolute paths below dir have top-level "tmp"
	// too; a symlink only mirrors when it sits directly under /.
	for _, p := range got {
		w, ok := want[p.Name]
		if !ok {
			t.Errorf("unexpected placeholder %+v", p)
			continue
		}
		if w != p {
			t.Errorf("placeholder %+v, want %+v", p, w)
		}
		delete(want, p.Name)
	}
	for n := range want {
		t.Errorf("missing placeholder %s", n)
	}
	// The host's own runtime: /bin on this machine mirrors as a symlink
	// when it is one.
	for _, p := range Placeholders(&Spec{Argv: []string{"/usr/bin/true"}}) {
		if p.Name == "bin" {
			if l, err := os.Readlink("/bin"); err == nil && p.Symlink != l {
				t.Errorf("/bin mirrors as %q, host has %q", p.Symlink, l)
			}
		}
	}
}
