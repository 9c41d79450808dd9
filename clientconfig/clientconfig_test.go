package clientconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/tailscale/hujson"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const testRootfs = "/usr/local/bin/rootfs"

type fixture struct {
	file     string
	format   Format
	pointers []string
}

// fixtures are configuration files of each client, with comments, env
// blocks, HTTP servers and entries already under rootfs.
var fixtures = []fixture{
	{"vscode-mcp.json", JSONC, []string{"/servers"}},
	{"claude-code-mcp.json", JSONC, []string{"/mcpServers"}},
	{"claude-code-claude.json", JSONC, []string{"/mcpServers", "/projects/*/mcpServers"}},
	{"claude-desktop.json", JSONC, []string{"/mcpServers"}},
	{"cursor-mcp.json", JSONC, []string{"/mcpServers"}},
	{"gemini-settings.json", JSONC, []string{"/mcpServers"}},
	{"codex-config.toml", TOML, []string{"/mcp_servers"}},
	{"codex-inline.toml", TOML, []string{"/mcp_servers"}},
	{"codex-comments.toml", TOML, []string{"/mcp_servers"}},
}

func (f fixture) read(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", f.file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f fixture) rewrite(t *testing.T, data []byte, op Op) ([]byte, []Change) {
	t.Helper()
	out, changes, err := Rewrite(data, f.format, f.pointers, op, Options{Rootfs: testRootfs})
	if err != nil {
		t.Fatalf("%s: %v", f.file, err)
	}
	return out, changes
}

func report(changes []Change) string {
	var b strings.Builder
	names := map[Action]string{Wrapped: "wrapped", Updated: "updated", AlreadyWrapped: "already wrapped", Unwrapped: "unwrapped", NotWrapped: "not wrapped", Skipped: "skipped"}
	for _, c := range changes {
		fmt.Fprintf(&b, "%s: %s", c.Server, names[c.Action])
		if c.Detail != "" {
			fmt.Fprintf(&b, " (%s)", c.Detail)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestGolden checks wrap's and unwrap's output and report for every fixture
// against testdata/golden (refresh with -update).
func TestGolden(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.file, func(t *testing.T) {
			wrapped, changes := f.rewrite(t, f.read(t), Wrap)
			golden(t, f.file+".wrapped", wrapped)
			golden(t, f.file+".wrap-report", []byte(report(changes)))
			unwrapped, changes := f.rewrite(t, f.read(t), Unwrap)
			golden(t, f.file+".unwrapped", unwrapped)
			golden(t, f.file+".unwrap-report", []byte(report(changes)))
		})
	}
}

// TestWrapTwice: wrapping a wrapped file changes nothing and says so.
func TestWrapTwice(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.file, func(t *testing.T) {
			once, _ := f.rewrite(t, f.read(t), Wrap)
			twice, changes := f.rewrite(t, once, Wrap)
			if !bytes.Equal(once, twice) {
				t.Errorf("second wrap changed the file:\n%s\n---\n%s", once, twice)
			}
			for _, c := range changes {
				if c.Action == Wrapped || c.Action == Updated {
					t.Errorf("second wrap: %s: %v", c.Server, c.Action)
				}
			}
		})
	}
}

// TestRoundTrip: unwrap after wrap gives back the original bytes, and
// unwrapping again changes nothing.
func TestRoundTrip(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.file, func(t *testing.T) {
			orig := f.read(t)
			wrapped, _ := f.rewrite(t, orig, Wrap)
			if bytes.Equal(wrapped, orig) {
				t.Fatal("wrap changed nothing; the fixture tests nothing")
			}
			// Entries the fixture has under rootfs already are unwrapped
			// too, so compare with unwrapping the original.
			want, _ := f.rewrite(t, orig, Unwrap)
			got, _ := f.rewrite(t, wrapped, Unwrap)
			if !bytes.Equal(got, want) {
				t.Errorf("wrap then unwrap:\n%s\nwant\n%s", got, want)
			}
			again, _ := f.rewrite(t, got, Unwrap)
			if !bytes.Equal(again, got) {
				t.Errorf("second unwrap changed the file")
			}
		})
	}
}

// TestRoundTripExact: for fixtures with nothing under rootfs beforehand,
// wrap then unwrap gives the original bytes exactly.
func TestRoundTripExact(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.file, func(t *testing.T) {
			orig := f.read(t)
			_, changes := f.rewrite(t, orig, Unwrap)
			if slices.ContainsFunc(changes, func(c Change) bool { return c.Action == Unwrapped }) {
				// Strip the entries already wrapped by hand first; then the
				// round trip from there must be exact.
				orig, _ = f.rewrite(t, orig, Unwrap)
			}
			wrapped, _ := f.rewrite(t, orig, Wrap)
			got, _ := f.rewrite(t, wrapped, Unwrap)
			if !bytes.Equal(got, orig) {
				t.Errorf("wrap then unwrap is not byte-identical:\n%s\nwant\n%s", got, orig)
			}
		})
	}
}

// decoded is a server entry as the client reads it.
type decoded struct {
	Command string            `json:"command" toml:"command"`
	Args    []string          `json:"args" toml:"args"`
	Env     map[string]string `json:"env" toml:"env"`
	EnvVars []string          `json:"env_vars" toml:"env_vars"`
	URL     string            `json:"url" toml:"url"`
	HTTPURL string            `json:"httpUrl" toml:"httpUrl"`
	Type    string            `json:"type" toml:"type"`
}

// decodeServers reads the entries the way a client does: with a standard
// decoder, not with this package's code.
func decodeServers(t *testing.T, f fixture, data []byte) map[string]decoded {
	t.Helper()
	out := map[string]decoded{}
	if f.format == TOML {
		var doc struct {
			Servers map[string]decoded `toml:"mcp_servers"`
		}
		if err := toml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("output is not valid TOML: %v\n%s", err, data)
		}
		return doc.Servers
	}
	std, err := hujson.Standardize(slices.Clone(data))
	if err != nil {
		t.Fatalf("output is not valid JSONC: %v\n%s", err, data)
	}
	var doc struct {
		Servers    map[string]decoded `json:"servers"`
		MCPServers map[string]decoded `json:"mcpServers"`
		Projects   map[string]struct {
			MCPServers map[string]decoded `json:"mcpServers"`
		} `json:"projects"`
	}
	if err := json.Unmarshal(std, &doc); err != nil {
		t.Fatal(err)
	}
	for n, s := range doc.Servers {
		out[n] = s
	}
	for n, s := range doc.MCPServers {
		out[n] = s
	}
	for p, pr := range doc.Projects {
		for n, s := range pr.MCPServers {
			out[qualify(n, []string{"projects", p})] = s
		}
	}
	return out
}

// TestWrapMeaning decodes original and wrapped files with standard decoders
// and checks that each stdio server now runs "rootfs run [--setenv N]... --"
// followed by its original command line, that env blocks are unchanged, and
// that every other entry is exactly as it was.
func TestWrapMeaning(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.file, func(t *testing.T) {
			orig := f.read(t)
			before := decodeServers(t, f, orig)
			wrapped, changes := f.rewrite(t, orig, Wrap)
			after := decodeServers(t, f, wrapped)
			if len(before) != len(after) {
				t.Fatalf("%d servers before, %d after", len(before), len(after))
			}
			for _, c := range changes {
				b, a := before[c.Server], after[c.Server]
				if c.Action == Updated {
					if a.Command != b.Command || len(a.Args) <= len(b.Args) || fmt.Sprint(a.Env) != fmt.Sprint(b.Env) {
						t.Errorf("%s updated: %+v -> %+v", c.Server, b, a)
					}
					continue
				}
				if c.Action != Wrapped {
					if fmt.Sprint(a) != fmt.Sprint(b) {
						t.Errorf("%s (%v) changed: %+v -> %+v", c.Server, c.Action, b, a)
					}
					continue
				}
				want := []string{"run"}
				var names []string
				for n := range b.Env {
					names = append(names, n)
				}
				names = append(names, b.EnvVars...)
				slices.Sort(names)
				for _, n := range names {
					want = append(want, "--setenv", n)
				}
				want = append(want, "--", b.Command)
				want = append(want, b.Args...)
				if a.Command != testRootfs || !slices.Equal(a.Args, want) {
					t.Errorf("%s: got %q %q, want %q %q", c.Server, a.Command, a.Args, testRootfs, want)
				}
				if fmt.Sprint(a.Env) != fmt.Sprint(b.Env) {
					t.Errorf("%s: env changed: %v -> %v", c.Server, b.Env, a.Env)
				}
			}
			if f.file != "claude-desktop.json" && !slices.ContainsFunc(changes, func(c Change) bool { return c.Action == Skipped && strings.Contains(c.Detail, "remote") }) {
				t.Errorf("fixture has no remote server reported as skipped: %s", report(changes))
			}
		})
	}
}

// TestFixturesNeedByteKeeping is the control for the round-trip tests: a
// rewrite that decodes and re-encodes (what a tool without a
// format-keeping library does) changes every fixture, so byte-identical
// round trips above show the files were patched in place.
func TestFixturesNeedByteKeeping(t *testing.T) {
	for _, f := range fixtures {
		orig := f.read(t)
		var v any
		var re []byte
		var err error
		if f.format == TOML {
			if err = toml.Unmarshal(orig, &v); err == nil {
				re, err = toml.Marshal(v)
			}
		} else {
			std, _ := hujson.Standardize(slices.Clone(orig))
			if err = json.Unmarshal(std, &v); err == nil {
				re, err = json.MarshalIndent(v, "", "  ")
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", f.file, err)
		}
		if bytes.Equal(re, orig) {
			t.Errorf("%s: decoding and re-encoding keeps its bytes; it tests nothing about format keeping", f.file)
		}
	}
}

// TestSetenvAdded: a wrapped entry whose env block gained a name gets its
// --setenv on the next wrap, and still unwraps.
func TestSetenvAdded(t *testing.T) {
	in := []byte(`{"mcpServers": {"s": {"command": "/x/rootfs", "args": ["run", "--setenv", "A", "--", "srv", "-v"], "env": {"A": "1", "B": "2"}}}}`)
	out, changes, err := Rewrite(in, JSONC, []string{"/mcpServers"}, Wrap, Options{Rootfs: testRootfs})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"mcpServers": {"s": {"command": "/x/rootfs", "args": ["run", "--setenv", "A", "--setenv", "B", "--", "srv", "-v"], "env": {"A": "1", "B": "2"}}}}`
	if string(out) != want || changes[0].Action != Updated {
		t.Errorf("got %s (%v)\nwant %s", out, changes[0].Action, want)
	}
	back, _, _ := Rewrite(out, JSONC, []string{"/mcpServers"}, Unwrap, Options{})
	if wantBack := `{"mcpServers": {"s": {"command": "srv", "args": ["-v"], "env": {"A": "1", "B": "2"}}}}`; string(back) != wantBack {
		t.Errorf("unwrap: got %s\nwant %s", back, wantBack)
	}
}

// TestBadInput: a file that does not parse is refused with the reason and
// left as it was.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		data   string
		format Format
	}{
		{`{"servers": {"a": {"command": "x",}`, JSONC},
		{"[mcp_servers.a]\ncommand = \n", TOML},
	} {
		_, _, err := Rewrite([]byte(tc.data), tc.format, []string{"/servers"}, Wrap, Options{Rootfs: testRootfs})
		if err == nil || !strings.Contains(err.Error(), "not valid") {
			t.Errorf("%q: err = %v, want a 'not valid' error", tc.data, err)
		}
	}
}

// TestPlanWrite writes through Plan/Write: a backup in the backup
// directory, at the file's path, holds the old bytes, nothing is added
// beside the file, the file holds the new bytes, its mode is kept, and a
// symlinked file is written at its target.
func TestPlanWrite(t *testing.T) {
	dir := t.TempDir()
	backups := filepath.Join(t.TempDir(), "state", "rootfs", "backups")
	real := filepath.Join(dir, "real.json")
	orig := fixtures[0].read(t)
	if err := os.WriteFile(real, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "mcp.json")
	if err := os.Symlink("real.json", link); err != nil {
		t.Fatal(err)
	}
	loc := Location{Client: "vscode", Path: link, Format: JSONC, Servers: []string{"/servers"}}
	r, err := Plan(loc, Wrap, Options{Rootfs: testRootfs})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Changed() || !strings.Contains(r.Diff(), "+      \"command\": \""+testRootfs+"\",") {
		t.Fatalf("diff:\n%s", r.Diff())
	}
	if b, _ := os.ReadFile(real); !bytes.Equal(b, orig) {
		t.Fatal("Plan wrote the file")
	}
	backup, err := r.Write(backups)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(backups, real); backup != want {
		t.Errorf("backup %s, want %s", backup, want)
	}
	if b, _ := os.ReadFile(backup); !bytes.Equal(b, orig) {
		t.Error("backup does not hold the old bytes")
	}
	if fi, err := os.Stat(filepath.Dir(backup)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the backup's directory: %v, want mode 0700", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("the file's directory holds %d entries, want the file and the link", len(ents))
	}
	if b, _ := os.ReadFile(real); !bytes.Equal(b, r.New) {
		t.Error("file does not hold the new bytes")
	}
	if fi, _ := os.Lstat(link); fi.Mode()&fs.ModeSymlink == 0 {
		t.Error("the symlink was replaced by a file")
	}
	if fi, _ := os.Stat(real); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := Plan(Location{Path: filepath.Join(dir, "none.json")}, Wrap, Options{Rootfs: testRootfs}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestWriteRefusesChangedFile: a file rewritten between Plan and Write (a
// running client) is not overwritten, and no backup is made.
func TestWriteRefusesChangedFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(p, fixtures[0].read(t), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Plan(Location{Path: p, Format: JSONC, Servers: []string{"/servers"}}, Wrap, Options{Rootfs: testRootfs})
	if err != nil {
		t.Fatal(err)
	}
	theirs := []byte(`{"servers": {}}`)
	if err := os.WriteFile(p, theirs, 0o644); err != nil {
		t.Fatal(err)
	}
	backups := t.TempDir()
	if _, err := r.Write(backups); !errors.Is(err, ErrChanged) {
		t.Fatalf("Write: %v, want ErrChanged", err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, theirs) {
		t.Error("the client's change was overwritten")
	}
	if _, err := os.Stat(BackupPath(backups, p)); err == nil {
		t.Error("a backup was made")
	}
}

// TestPlanRefusesHugeFile: a file beyond MaxFileSize is refused unread.
func TestPlanRefusesHugeFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mcp.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFileSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Plan(Location{Path: p, Format: JSONC}, Wrap, Options{Rootfs: testRootfs}); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("Plan: %v, want a size error", err)
	}
}

// TestShared: project files and files in a git work tree below the home
// directory are shared; the user's own files are not, even when the home
// directory itself is a work tree.
func TestShared(t *testing.T) {
	home := t.TempDir()
	other := t.TempDir()
	for _, d := range []string{".git", "dotfiles/.git", "dotfiles/config/Code/User", ".config/Code/User"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(other, "repo", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := Env{Home: home}
	for _, tt := range []struct {
		name  string
		loc   Location
		share bool
	}{
		{"a project file", Location{Scope: "project", Path: filepath.Join(other, "app", ".mcp.json")}, true},
		{"the user's file in a home that is a work tree", Location{Scope: "user", Path: filepath.Join(home, ".claude.json")}, false},
		{"the user's file below it", Location{Scope: "user", Path: filepath.Join(home, ".config", "Code", "User", "mcp.json")}, false},
		{"a user file in a dotfiles repository", Location{Scope: "user", Path: filepath.Join(home, "dotfiles", "config", "Code", "User", "mcp.json")}, true},
		{"a user file in a work tree outside home", Location{Scope: "user", Path: filepath.Join(other, "repo", "codex", "config.toml")}, true},
		{"a user file outside home and any work tree", Location{Scope: "user", Path: filepath.Join(other, "codex", "config.toml")}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Shared(tt.loc, e); got != tt.share {
				t.Errorf("Shared(%s) = %v, want %v", tt.loc.Path, got, tt.share)
			}
		})
	}
}

// TestBareRootfsReplacesAbsolute: wrapping with a bare command (a shared
// file) gives it to entries an earlier wrap wrote with an absolute path,
// in both formats, and nothing else changes; with an absolute command such
// entries stay as they are.
func TestBareRootfsReplacesAbsolute(t *testing.T) {
	for _, tt := range []struct {
		format   Format
		in, want string
		pointers []string
	}{
		{JSONC, `{"servers": {"a": {"command": "/home/me/go/bin/rootfs", "args": ["run", "--", "x"]}}}`,
			`{"servers": {"a": {"command": "rootfs", "args": ["run", "--", "x"]}}}`, []string{"/servers"}},
		{TOML, "[mcp_servers.a]\ncommand = '/home/me/go/bin/rootfs' # mine\nargs = [\"run\", \"--\", \"x\"]\n",
			"[mcp_servers.a]\ncommand = \"rootfs\" # mine\nargs = [\"run\", \"--\", \"x\"]\n", []string{"/mcp_servers"}},
	} {
		out, changes, err := Rewrite([]byte(tt.in), tt.format, tt.pointers, Wrap, Options{Rootfs: "rootfs"})
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != tt.want || len(changes) != 1 || changes[0].Action != Updated || !strings.Contains(changes[0].Detail, "instead of /home/me/go/bin/rootfs") {
			t.Errorf("got %s %s\nwant %s", out, report(changes), tt.want)
		}
		same, changes, _ := Rewrite([]byte(tt.in), tt.format, tt.pointers, Wrap, Options{Rootfs: testRootfs})
		if string(same) != tt.in || changes[0].Action != AlreadyWrapped {
			t.Errorf("with an absolute command: %s %s", same, report(changes))
		}
	}
}
