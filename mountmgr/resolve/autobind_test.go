package resolve

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func bindPaths(ab *Result) []string {
	var out []string
	for _, b := range ab.Binds {
		if !b.ReadOnly || b.Source != b.Dest {
			out = append(out, "BAD:"+b.Dest)
			continue
		}
		p := b.Dest
		if b.Overlay {
			p += " (overlay)"
		}
		out = append(out, p)
	}
	return out
}

func TestResolveAutoBind(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	writeFile(t, filepath.Join(home, ".ssh", "id_ed25519"), "key", 0o600)
	// pyenv-like prefix and a venv on it, a script in the venv.
	pyPrefix := filepath.Join(home, ".pyenv", "versions", "3.11.7")
	writeFile(t, filepath.Join(pyPrefix, "bin", "python3.11"), "#!/bin/sh\n", 0o755)
	symlink(t, "python3.11", filepath.Join(pyPrefix, "bin", "python3"))
	writeFile(t, filepath.Join(pyPrefix, "lib", "python3.11", "os.py"), "", 0o644)
	venv := filepath.Join(home, "venvs", "git")
	symlink(t, filepath.Join(pyPrefix, "bin", "python3"), filepath.Join(venv, "bin", "python"))
	writeFile(t, filepath.Join(venv, "pyvenv.cfg"), "home = "+filepath.Join(pyPrefix, "bin")+"\n", 0o644)
	writeFile(t, filepath.Join(venv, "bin", "server"), "#!"+filepath.Join(venv, "bin", "python")+"\n", 0o755)
	// ~/bin/tool: the file only, never ~.
	writeFile(t, filepath.Join(home, "bin", "tool"), "#!/bin/sh\n", 0o755)
	// A project's bin/ beside a .env: the file only.
	writeFile(t, filepath.Join(home, "proj", ".env"), "K=V", 0o600)
	writeFile(t, filepath.Join(home, "proj", "bin", "srv"), "#!/bin/sh\n", 0o755)
	// env NAME through the server's PATH.
	nodePrefix := filepath.Join(base, "opt", "node")
	writeFile(t, filepath.Join(nodePrefix, "bin", "node"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(base, "scripts", "s.js"), "#!/usr/bin/env node\n", 0o755)
	writeFile(t, filepath.Join(base, "scripts", "t.js"), "#!/usr/bin/env -S rootfs-test-no-node --flag\n", 0o755)
	// A launcher and its cache.
	writeFile(t, filepath.Join(home, ".npm", "_npx", "x", "package.json"), "{}", 0o644)

	spec := func(env ...string) *Spec { return &Spec{Env: env} }
	tests := []struct {
		name    string
		spec    *Spec
		exe     string
		opts    Options
		want    []string
		wantEnv []string
		wantErr error
	}{
		{"venv on pyenv", spec(), filepath.Join(venv, "bin", "server"), Options{},
			[]string{filepath.Join(pyPrefix, "bin"), filepath.Join(pyPrefix, "lib"), filepath.Join(venv, "bin"), filepath.Join(venv, "pyvenv.cfg")}, nil, nil},
		{"home bin binds the file", spec(), filepath.Join(home, "bin", "tool"), Options{},
			[]string{filepath.Join(home, "bin", "tool")}, nil, nil},
		{"bin beside .env binds the file", spec(), filepath.Join(home, "proj", "bin", "srv"), Options{},
			[]string{filepath.Join(home, "proj", "bin", "srv")}, nil, nil},
		{"env node through the server's PATH", spec("PATH=" + filepath.Join(nodePrefix, "bin") + ":/usr/bin:/bin"), filepath.Join(base, "scripts", "s.js"), Options{},
			[]string{filepath.Join(nodePrefix, "bin"), filepath.Join(base, "scripts", "s.js")}, nil, nil},
		{"env -S NAME not on the PATH", spec(), filepath.Join(base, "scripts", "t.js"), Options{},
			nil, nil, ErrCommandNotFound},
		{"npx gets its cache as an overlay", spec(), "/usr/bin/npx", Options{Name: "npx"},
			[]string{filepath.Join(home, ".npm") + " (overlay)"},
			[]string{"npm_config_prefer_offline=true", "npm_config_update_notifier=false", "npm_config_cache=" + filepath.Join(home, ".npm")}, nil},
		{"a missing cache is kept with a layer", spec(), "/usr/bin/npx", Options{Name: "npx", Layers: "/state"},
			[]string{filepath.Join(home, ".npm-cold") + " (overlay)"},
			[]string{"npm_config_prefer_offline=true", "npm_config_update_notifier=false", "npm_config_cache=" + filepath.Join(home, ".npm-cold")}, nil},
		{"a missing cache without a layer is /tmp's", spec(), "/usr/bin/npx", Options{Name: "npx"},
			nil, []string{"npm_config_prefer_offline=true", "npm_config_update_notifier=false"}, nil},
		{"a bound dir is not repeated", &Spec{Binds: []Bind{{Source: venv, Dest: venv, ReadOnly: true}}}, filepath.Join(venv, "bin", "server"), Options{},
			[]string{filepath.Join(pyPrefix, "bin"), filepath.Join(pyPrefix, "lib")}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.exe == "/usr/bin/npx" {
				if _, err := os.Stat(tt.exe); err != nil {
					t.Skip("no /usr/bin/npx")
				}
			}
			opts := tt.opts
			opts.Home = home
			opts.Lookup = func(string) (string, bool) { return "", false }
			if strings.Contains(tt.name, "missing cache") {
				opts.Lookup = func(k string) (string, bool) { return filepath.Join(home, ".npm-cold"), k == "npm_config_cache" }
			}
			got, err := AutoBind(tt.spec, tt.exe, opts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if p := bindPaths(got); !reflect.DeepEqual(p, tt.want) {
				t.Errorf("binds %q, want %q (refused %q)", p, tt.want, got.Refused)
			}
			if !reflect.DeepEqual(got.Env, tt.wantEnv) {
				t.Errorf("env %q, want %q", got.Env, tt.wantEnv)
			}
		})
	}
}

func TestResolveAutoBindNeverHomeOrCredentials(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(base, "home")
	// An interpreter whose "prefix" is the home directory itself
	// (~/bin/python3), per-user data (~/.local), a directory inside
	// ~/.ssh, and one whose lib/ holds credentials deep down: none of
	// their subtrees is bound, and each refusal is said.
	prefixes := map[string]string{
		home:                          filepath.Join(home, "lib"),
		filepath.Join(home, ".local"): filepath.Join(home, ".local", "lib"),
		filepath.Join(home, ".ssh"):   filepath.Join(home, ".ssh", "lib"),
		filepath.Join(home, "tools"):  filepath.Join(home, "tools", "lib"),
		filepath.Join(home, "tools2"): "",
	}
	writeFile(t, filepath.Join(home, "tools", "lib", "a", ".aws", "credentials"), "", 0o600)
	for p, lib := range prefixes {
		writeFile(t, filepath.Join(p, "bin", "python3"), "#!/bin/sh\n", 0o755)
		writeFile(t, filepath.Join(p, "lib", "python3.11", "os.py"), "", 0o644)
		writeFile(t, filepath.Join(p, "share", "notes.txt"), "", 0o644)
		script := filepath.Join(base, "s", strings.TrimPrefix(filepath.Base(p), "."))
		writeFile(t, script, "#!"+filepath.Join(p, "bin", "python3")+"\n", 0o755)
		got, err := AutoBind(&Spec{}, script, Options{Home: home, Lookup: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatal(err)
		}
		if lib == "" { // control: an ordinary prefix gives its subtrees
			if want := []string{filepath.Join(p, "bin"), filepath.Join(p, "lib"), filepath.Join(p, "share"), script}; !reflect.DeepEqual(bindPaths(got), want) {
				t.Errorf("control %s: binds %q, want %q", p, bindPaths(got), want)
			}
			continue
		}
		for _, b := range got.Binds {
			wholePrefix := p != filepath.Join(home, "tools") // there only lib/ holds the credential
			if b.Dest == lib || b.Dest == p || strings.Contains(b.Dest, ".ssh") || wholePrefix && b.Dest == filepath.Join(p, "share") {
				t.Errorf("%s: bound %s", p, b.Dest)
			}
		}
		if len(got.Refused) == 0 {
			t.Errorf("%s: nothing refused, want the prefix or its lib left out", p)
		}
	}
}

// TestResolveAutoBindELF builds a program whose library is found through
// RUNPATH $ORIGIN/../lib, as self-contained installs ship them.
func TestResolveAutoBindELF(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("needs a C compiler")
	}
	base, _ := filepath.EvalSymlinks(t.TempDir())
	prefix := filepath.Join(base, "app")
	writeFile(t, filepath.Join(base, "lib.c"), "int answer(void) { return 42; }\n", 0o644)
	writeFile(t, filepath.Join(base, "main.c"), "int answer(void); int main(void) { return answer() == 42 ? 0 : 1; }\n", 0o644)
	lib := filepath.Join(prefix, "lib", "libanswer.so")
	exe := filepath.Join(prefix, "libexec", "app")
	os.MkdirAll(filepath.Dir(lib), 0o755)
	os.MkdirAll(filepath.Dir(exe), 0o755)
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, filepath.Join(base, "lib.c")).CombinedOutput(); err != nil {
		t.Skipf("cc: %v %s", err, out)
	}
	if out, err := exec.Command(cc, "-o", exe, filepath.Join(base, "main.c"), "-L"+filepath.Dir(lib), "-lanswer", "-Wl,-rpath,$ORIGIN/../lib").CombinedOutput(); err != nil {
		t.Skipf("cc: %v %s", err, out)
	}
	if err := exec.Command(exe).Run(); err != nil {
		t.Fatalf("the program does not run on the host: %v", err)
	}
	got, err := AutoBind(&Spec{}, exe, Options{Home: "/nonexistent", Lookup: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	if p, want := bindPaths(got), []string{lib, exe}; !reflect.DeepEqual(p, want) {
		t.Errorf("binds %q, want %q", p, want)
	}
}

func TestDiagnoseExec(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	writeFile(t, filepath.Join(base, "a"), "#!"+filepath.Join(base, "missing", "python")+"\n", 0o755)
	symlink(t, filepath.Join(base, "gone"), filepath.Join(base, "b"))
	writeFile(t, filepath.Join(base, "c"), "#!/bin/sh\n", 0o755)
	for name, want := range map[string]string{
		"a": "#! interpreter " + filepath.Join(base, "missing", "python"),
		"b": "symlink target " + filepath.Join(base, "gone"),
		"c": "",
	} {
		err := DiagnoseExec(filepath.Join(base, name), nil)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v, want nothing missing", name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrCommandNotFound) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}

// TestResolveAutoBindWritableRoot: a symlink, #! line or pyvenv.cfg in a
// directory the server can write must not choose what rootfs binds: a
// server could point its venv's python at another project's bin/.
func TestResolveAutoBindWritableRoot(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	proj := filepath.Join(base, "proj")
	other := filepath.Join(base, "other")
	writeFile(t, filepath.Join(other, "bin", "tool"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(other, "secret.txt"), "s", 0o644)
	// What a compromised server left in its root: the venv's python now
	// names another project's bin/.
	symlink(t, filepath.Join(other, "bin", "tool"), filepath.Join(proj, ".venv", "bin", "python"))
	writeFile(t, filepath.Join(proj, ".venv", "bin", "server"), "#!"+filepath.Join(proj, ".venv", "bin", "python")+"\n", 0o755)
	exe := filepath.Join(proj, ".venv", "bin", "server")
	lookup := func(string) (string, bool) { return "", false }

	got, err := AutoBind(&Spec{}, exe, Options{Home: "/nonexistent", Lookup: lookup, Writable: []string{proj}})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range got.Binds {
		if strings.HasPrefix(b.Dest, other) {
			t.Errorf("bound %s, named through a file the server can write", b.Dest)
		}
	}
	if len(got.Refused) == 0 {
		t.Errorf("nothing left out, want %s refused", other)
	}
	// Control: the same layout outside the writable roots is followed.
	got, err = AutoBind(&Spec{}, exe, Options{Home: "/nonexistent", Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range got.Binds {
		found = found || b.Dest == filepath.Join(other, "bin")
		if b.Dest == other {
			t.Errorf("control: bound %s whole", other)
		}
	}
	if !found {
		t.Errorf("control: binds %q, want %s", bindPaths(got), filepath.Join(other, "bin"))
	}
}

// buildELF compiles a program (or, shared, a library) linked against a
// placeholder library, then rewrites its DT_NEEDED name to needed and its
// DT_RPATH to rpath in .dynstr: what a server that can write the file
// could leave there. It skips without a C compiler.
func buildELF(t *testing.T, dir, out, needed, rpath string, shared bool) {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("needs a C compiler")
	}
	const placeholderLib = "libqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq.so"
	ph := "/" + strings.Repeat("R", 200)
	if len(needed) >= len(placeholderLib) || len(rpath) >= len(ph) {
		t.Fatal("name too long for the placeholder")
	}
	writeFile(t, filepath.Join(dir, "q.c"), "int q(void) { return 0; }\n", 0o644)
	writeFile(t, filepath.Join(dir, "m.c"), "int q(void); int main(void) { return q(); }\n", 0o644)
	lib := filepath.Join(dir, placeholderLib)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if o, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, filepath.Join(dir, "q.c")).CombinedOutput(); err != nil {
		t.Skipf("cc: %v %s", err, o)
	}
	args := []string{"-o", out, filepath.Join(dir, "m.c"), lib, "-Wl,--disable-new-dtags", "-Wl,-rpath," + ph}
	if shared {
		args = append([]string{"-shared", "-fPIC"}, args...)
	}
	if o, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Skipf("cc: %v %s", err, o)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	pad := func(s string, n int) []byte { return append([]byte(s), make([]byte, n-len(s))...) }
	for _, r := range [][2]string{{lib, needed}, {placeholderLib, needed}, {ph, rpath}} {
		if i := strings.Index(string(b), r[0]+"\x00"); i >= 0 {
			copy(b[i:], pad(r[1], len(r[0])))
		}
	}
	if err := os.WriteFile(out, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestResolveAutoBindELFNamesOnlyFiles: DT_NEEDED "." or ".." joined to an
// RPATH directory names a directory, not a library; binding it whole would
// skip every check a prefix gets (home, credentials). Control: a real
// library name in the same RPATH is bound.
func TestResolveAutoBindELFNamesOnlyFiles(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(base, "home")
	writeFile(t, filepath.Join(home, ".ssh", "id_ed25519"), "key", 0o600)
	writeFile(t, filepath.Join(home, "lib", "libok.so"), "not really", 0o644)
	lookup := func(string) (string, bool) { return "", false }
	for _, tc := range []struct{ needed, rpath, want string }{
		{".", home, ""},
		{"..", filepath.Join(home, "lib"), ""},
		{"libok.so", filepath.Join(home, "lib"), filepath.Join(home, "lib", "libok.so")},
	} {
		dir := filepath.Join(base, "build"+strings.ReplaceAll(tc.needed, ".", "d"))
		exe := filepath.Join(dir, "app", "libexec", "app")
		os.MkdirAll(filepath.Dir(exe), 0o755)
		buildELF(t, dir, exe, tc.needed, tc.rpath, false)
		got, err := AutoBind(&Spec{}, exe, Options{Home: home, Lookup: lookup})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, b := range got.Binds {
			if fi, err := os.Stat(b.Source); err == nil && fi.IsDir() {
				t.Errorf("NEEDED %q RPATH %s: bound the directory %s", tc.needed, tc.rpath, b.Source)
			}
			found = found || b.Source == tc.want
		}
		if tc.want != "" && !found {
			t.Errorf("control: NEEDED %q: binds %q, want %s", tc.needed, bindPaths(got), tc.want)
		}
	}
}

// TestResolveAutoBindWritableLibrary: a library found in a read-write root
// (through the server's LD_LIBRARY_PATH) is the server's to rewrite; what
// its RPATH and DT_NEEDED name must not be bound. Control: the same
// library outside the writable roots is followed.
func TestResolveAutoBindWritableLibrary(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	proj := filepath.Join(base, "proj")
	other := filepath.Join(base, "other")
	writeFile(t, filepath.Join(other, "secret.yaml"), "s", 0o644)
	// The program (outside any root) needs libw.so; the server's
	// LD_LIBRARY_PATH finds it in its root, where the server rewrote it
	// to need other/secret.yaml.
	buildELF(t, filepath.Join(base, "b1"), filepath.Join(proj, "lib", "libw.so"), "secret.yaml", other, true)
	exe := filepath.Join(base, "app", "libexec", "app")
	os.MkdirAll(filepath.Dir(exe), 0o755)
	buildELF(t, filepath.Join(base, "b2"), exe, "libw.so", "/nonexistent", false)
	lookup := func(string) (string, bool) { return "", false }
	spec := func() *Spec { return &Spec{Env: []string{"LD_LIBRARY_PATH=" + filepath.Join(proj, "lib")}} }
	bound := func(ab *Result) bool {
		for _, b := range ab.Binds {
			if strings.HasPrefix(b.Source, other) {
				return true
			}
		}
		return false
	}
	got, err := AutoBind(spec(), exe, Options{Home: "/nonexistent", Lookup: lookup, Writable: []string{proj}})
	if err != nil {
		t.Fatal(err)
	}
	if bound(got) {
		t.Errorf("bound %q: named by a library in a read-write root", bindPaths(got))
	}
	got, err = AutoBind(spec(), exe, Options{Home: "/nonexistent", Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if !bound(got) {
		t.Errorf("control: binds %q, want %s/secret.yaml", bindPaths(got), other)
	}
}

// TestResolveAutoBindSymlinkedDirIntoWritable: a host directory that is a
// symlink into a read-write root (~/tools -> ~/proj/tools) holds files the
// server can rewrite under a path that does not look like the root.
// Control: the same layout with proj not writable is followed.
func TestResolveAutoBindSymlinkedDirIntoWritable(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	proj := filepath.Join(base, "proj")
	other := filepath.Join(base, "other")
	writeFile(t, filepath.Join(other, "bin", "tool"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(other, "secret.txt"), "s", 0o644)
	os.MkdirAll(filepath.Join(proj, "tools"), 0o755)
	symlink(t, filepath.Join(proj, "tools"), filepath.Join(base, "tools"))
	// The server rewrote proj/tools/srv to name another project's bin/.
	symlink(t, filepath.Join(other, "bin", "tool"), filepath.Join(proj, "tools", "srv"))
	exe := filepath.Join(base, "tools", "srv")
	lookup := func(string) (string, bool) { return "", false }
	bound := func(ab *Result) bool {
		for _, b := range ab.Binds {
			if strings.HasPrefix(b.Source, other) {
				return true
			}
		}
		return false
	}
	got, err := AutoBind(&Spec{}, exe, Options{Home: "/nonexistent", Lookup: lookup, Writable: []string{proj}})
	if err != nil {
		t.Fatal(err)
	}
	if bound(got) {
		t.Errorf("bound %q: named by a symlink in a read-write root reached through %s", bindPaths(got), filepath.Join(base, "tools"))
	}
	got, err = AutoBind(&Spec{}, exe, Options{Home: "/nonexistent", Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if !bound(got) {
		t.Errorf("control: binds %q, want %s", bindPaths(got), other)
	}
}

// TestResolveAutoBindHomeThroughSymlink: a bin/ reached through a symlink
// to the home directory (/alias -> ~, on PATH as /alias/bin) must not bind
// the home directory under its other name. Control: the same file reached
// through the home directory's own path is refused already.
func TestResolveAutoBindHomeThroughSymlink(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(base, "home")
	// No credential names for the scan to find: only the home rule protects.
	writeFile(t, filepath.Join(home, ".bash_history"), "mysql -p hunter2", 0o600)
	writeFile(t, filepath.Join(home, "bin", "tool"), "#!/bin/sh\n", 0o755)
	symlink(t, home, filepath.Join(base, "alias"))
	lookup := func(string) (string, bool) { return "", false }
	for _, exe := range []string{filepath.Join(home, "bin", "tool"), filepath.Join(base, "alias", "bin", "tool")} {
		got, err := AutoBind(&Spec{}, exe, Options{Home: home, Lookup: lookup})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range got.Binds {
			if real, err := filepath.EvalSymlinks(b.Source); err == nil && real == home {
				t.Errorf("%s: bound %s, the home directory", exe, b.Source)
			}
		}
	}
}

// TestDynStrings: the targeted .dynstr reads give what elf.File.DynString
// gives, for the system's ELF files at hand.
func TestDynStrings(t *testing.T) {
	n := 0
	for _, p := range []string{"/usr/bin/node", "/bin/ls", "/bin/sh", "/usr/bin/python3", "/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		n++
		needed, rpath, runpath := dynStrings(f)
		for _, c := range []struct {
			tag elf.DynTag
			got []string
		}{{elf.DT_NEEDED, needed}, {elf.DT_RPATH, rpath}, {elf.DT_RUNPATH, runpath}} {
			want, _ := f.DynString(c.tag)
			if !reflect.DeepEqual(c.got, want) {
				t.Errorf("%s %v: %q, want %q", p, c.tag, c.got, want)
			}
		}
		f.Close()
	}
	if n == 0 {
		t.Skip("no system ELF file to compare with")
	}
}

// TestResolveAutoBindPth: the directories a venv's .pth files and
// setuptools' editable finders name are bound (editable installs start),
// but not when the .pth lies in a root the server can write, nor the home
// directory or a credential directory.
func TestResolveAutoBindPth(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(base, "home")
	py := filepath.Join(base, "opt", "py")
	writeFile(t, filepath.Join(py, "bin", "python3"), "#!/bin/sh\n", 0o755)
	venv := filepath.Join(base, "venvs", "v")
	symlink(t, filepath.Join(py, "bin", "python3"), filepath.Join(venv, "bin", "python"))
	writeFile(t, filepath.Join(venv, "pyvenv.cfg"), "home = "+filepath.Join(py, "bin")+"\n", 0o644)
	site := filepath.Join(venv, "lib", "python3.11", "site-packages")
	src := filepath.Join(base, "proj", "src")
	vendored := filepath.Join(base, "vendored")
	finder := filepath.Join(base, "proj2", "src", "pkg")
	for _, d := range []string{src, vendored, finder, filepath.Join(home, ".ssh", "lib")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(site, "_proj.pth"), "# editable\n"+src+"\nimport sys; sys.path.append('/nowhere')\n../../../../../vendored\n", 0o644)
	writeFile(t, filepath.Join(site, "bad.pth"), home+"\n"+filepath.Join(home, ".ssh", "lib")+"\n", 0o644)
	writeFile(t, filepath.Join(site, "__editable___pkg_0_1_finder.py"), "MAPPING: dict[str, str] = {'pkg': '"+finder+"'}\nNAMESPACES = {}\n", 0o644)
	writeFile(t, filepath.Join(venv, "bin", "srv"), "#!"+filepath.Join(venv, "bin", "python")+"\n", 0o755)
	lookup := func(string) (string, bool) { return "", false }

	got, err := AutoBind(&Spec{}, filepath.Join(venv, "bin", "srv"), Options{Home: home, Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, b := range got.Binds {
		reasons[b.Dest] = b.Reason
	}
	for _, d := range []string{src, vendored, finder} {
		if reasons[d] != ".pth" {
			t.Errorf("%s: reason %q, want .pth (binds %q)", d, reasons[d], got.Paths())
		}
	}
	for _, d := range []string{home, filepath.Join(home, ".ssh", "lib"), "/nowhere"} {
		if _, ok := reasons[d]; ok {
			t.Errorf("bound %s, named by a .pth file", d)
		}
	}
	// The same venv in a root the server can write: its .pth files name
	// nothing (the server could have written them).
	got, err = AutoBind(&Spec{}, filepath.Join(venv, "bin", "srv"), Options{Home: home, Lookup: lookup, Writable: []string{filepath.Join(base, "venvs")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range got.Binds {
		if b.Reason == ".pth" {
			t.Errorf("bound %s from a .pth file in a writable root", b.Dest)
		}
	}
}
