package mountmgr

import (
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

func bindPaths(ab *AutoBind) []string {
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
		opts    AutoBindOptions
		want    []string
		wantEnv []string
		wantErr error
	}{
		{"venv on pyenv", spec(), filepath.Join(venv, "bin", "server"), AutoBindOptions{},
			[]string{pyPrefix, venv}, nil, nil},
		{"home bin binds the file", spec(), filepath.Join(home, "bin", "tool"), AutoBindOptions{},
			[]string{filepath.Join(home, "bin", "tool")}, nil, nil},
		{"bin beside .env binds the file", spec(), filepath.Join(home, "proj", "bin", "srv"), AutoBindOptions{},
			[]string{filepath.Join(home, "proj", "bin", "srv")}, nil, nil},
		{"env node through the server's PATH", spec("PATH=" + filepath.Join(nodePrefix, "bin") + ":/usr/bin:/bin"), filepath.Join(base, "scripts", "s.js"), AutoBindOptions{},
			[]string{nodePrefix, filepath.Join(base, "scripts", "s.js")}, nil, nil},
		{"env -S NAME not on the PATH", spec(), filepath.Join(base, "scripts", "t.js"), AutoBindOptions{},
			nil, nil, ErrCommandNotFound},
		{"npx gets its cache as an overlay", spec(), "/usr/bin/npx", AutoBindOptions{Name: "npx"},
			[]string{filepath.Join(home, ".npm") + " (overlay)"},
			[]string{"npm_config_cache=" + filepath.Join(home, ".npm"), "npm_config_prefer_offline=true", "npm_config_update_notifier=false"}, nil},
		{"a bound dir is not repeated", &Spec{Binds: []Bind{{Source: venv, Dest: venv, ReadOnly: true}}}, filepath.Join(venv, "bin", "server"), AutoBindOptions{},
			[]string{pyPrefix}, nil, nil},
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
			got, err := ResolveAutoBind(tt.spec, tt.exe, opts)
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
	// A "prefix" that is the home directory itself (~/bin/x), one that
	// holds credentials deep down, and one inside ~/.ssh.
	writeFile(t, filepath.Join(home, "bin", "x"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(home, "tools", "a", "b", ".aws"), "", 0o600)
	writeFile(t, filepath.Join(home, "tools", "bin", "y"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(home, ".ssh", "bin", "z"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(home, ".local", "bin", "w"), "#!/bin/sh\n", 0o755)
	for _, exe := range []string{filepath.Join(home, ".local", "bin", "w"), filepath.Join(home, "bin", "x"), filepath.Join(home, "tools", "bin", "y"), filepath.Join(home, ".ssh", "bin", "z")} {
		got, err := ResolveAutoBind(&Spec{}, exe, AutoBindOptions{Home: home, Lookup: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range got.Binds {
			if b.Dest == home || b.Dest == filepath.Join(home, "tools") || b.Dest == filepath.Join(home, ".local") || strings.Contains(b.Dest, ".ssh") {
				t.Errorf("%s: bound %s", exe, b.Dest)
			}
		}
		if len(got.Refused) == 0 {
			t.Errorf("%s: nothing refused, want the prefix left out", exe)
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
	got, err := ResolveAutoBind(&Spec{}, exe, AutoBindOptions{Home: "/nonexistent", Lookup: func(string) (string, bool) { return "", false }})
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

	got, err := ResolveAutoBind(&Spec{}, exe, AutoBindOptions{Home: "/nonexistent", Lookup: lookup, Writable: []string{proj}})
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
	got, err = ResolveAutoBind(&Spec{}, exe, AutoBindOptions{Home: "/nonexistent", Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range got.Binds {
		found = found || b.Dest == other
	}
	if !found {
		t.Errorf("control: binds %q, want %s", bindPaths(got), other)
	}
}
