package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Each way a server is installed, with private files beside the install:
// under "rootfs run" with no bind flag the server starts and the files
// beside it stay unreachable, because auto-bind binds what the command
// needs, never the prefix it lies in. The negative control runs the same
// server with "--ro-bind PREFIX" and reads every one of those files, so
// the test would see them if auto-bind showed the prefix.

// installKind is one install: where it is (prefix, bound by the control),
// its command and flags, the tool that reads a file, and the private
// files beside it.
type installKind struct {
	name     string
	prefix   string
	argv     []string
	flags    []string
	readTool string
	secrets  []string
}

// echoBody is echoJS without its "#!" line, for node -e.
var echoBody = strings.SplitN(echoJS, "\n", 2)[1]

// secretsBeside writes PREFIX/notes.txt and PREFIX/data/private.txt (and
// any extra relative paths), each with its own random content.
func secretsBeside(t *testing.T, prefix string, extra ...string) []string {
	t.Helper()
	var out []string
	for _, rel := range append([]string{"notes.txt", "data/private.txt"}, extra...) {
		p := filepath.Join(prefix, rel)
		mustWrite(t, p, "secret-"+randHex(8)+"\n")
		out = append(out, p)
	}
	return out
}

// copyTree copies src to dst with src's mode (cp -a keeps what a real
// install would have).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", src, dst, err, out)
	}
}

// pythonInstall copies Debian's python3 and its standard library to
// prefix (as pyenv, asdf, mise or uv lay out a version) and returns the
// interpreter's path there.
func pythonInstall(t *testing.T, prefix string) string {
	t.Helper()
	py, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skip("needs Debian's /usr/bin/python3")
	}
	ver := filepath.Base(py)
	copyTree(t, py, filepath.Join(prefix, "bin", ver))
	copyTree(t, "/usr/lib/"+ver, filepath.Join(prefix, "lib", ver))
	must(t, os.Symlink(ver, filepath.Join(prefix, "bin", "python3")))
	return filepath.Join(prefix, "bin", ver)
}

func makeVenv(t *testing.T, python, venv string) {
	t.Helper()
	cmd := exec.Command(python, "-m", "venv", "--without-pip", venv)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python -m venv: %v\n%s", err, out)
	}
}

// sitePackages returns the venv's (or prefix's) lib/pythonX.Y/site-packages.
func sitePackages(t *testing.T, prefix string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(prefix, "lib", "python3*", "site-packages"))
	if len(m) != 1 {
		t.Fatalf("site-packages under %s: %v", prefix, m)
	}
	return m[0]
}

// installKinds lays out every install kind under home.
func installKinds(t *testing.T, home string) []installKind {
	t.Helper()
	naive := buildNaive(t)
	naiveData, err := os.ReadFile(naive)
	must(t, err)
	pyHome := filepath.Join(home, ".pyenv", "versions", "3.11.7")
	python := pythonInstall(t, pyHome)
	var kinds []installKind
	add := func(k installKind) { kinds = append(kinds, k) }

	// A "#!/bin/sh" script in PREFIX/bin: its file, and sh from /usr.
	{
		prefix := filepath.Join(home, "opt", "shtool")
		srv := filepath.Join(prefix, "bin", "srv")
		writeExec(t, srv, "#!/bin/sh\nexec node -e '"+echoBody+"'\n")
		add(installKind{"sh script", prefix, []string{srv}, nil, "read", secretsBeside(t, prefix)})
	}
	// A static binary a harness copied into WORK/bin, beside its secrets.
	{
		work := filepath.Join(home, "work")
		x := filepath.Join(work, "bin", "x")
		writeExec(t, x, string(naiveData))
		add(installKind{"static binary in WORK/bin", work, []string{x}, nil, "read_file", secretsBeside(t, work, "secrets.env")})
	}
	// A venv on a pyenv-like interpreter.
	{
		venv := filepath.Join(home, "venvs", "echo")
		makeVenv(t, python, venv)
		srv := filepath.Join(venv, "bin", "echo-py")
		writeExec(t, srv, "#!"+filepath.Join(venv, "bin", "python")+"\n"+echoPy)
		add(installKind{"venv", venv, []string{srv}, nil, "read", secretsBeside(t, venv)})
	}
	// An editable install: the venv's .pth names the project's src/, whose
	// package holds the server; the rest of the project stays out.
	{
		proj := filepath.Join(home, "proj")
		venv := filepath.Join(proj, ".venv")
		makeVenv(t, python, venv)
		mustWrite(t, filepath.Join(proj, "src", "echoed", "__init__.py"), "")
		mustWrite(t, filepath.Join(proj, "src", "echoed", "server.py"), echoPy)
		mustWrite(t, filepath.Join(sitePackages(t, venv), "__editable__.echoed-0.1.pth"), filepath.Join(proj, "src")+"\n")
		srv := filepath.Join(venv, "bin", "echoed")
		writeExec(t, srv, "#!"+filepath.Join(venv, "bin", "python")+"\nimport echoed.server\n")
		add(installKind{"editable venv", proj, []string{srv}, nil, "read", secretsBeside(t, proj, ".venv/notes.txt")})
	}
	// A console script installed into a pyenv-like version directory.
	{
		srv := filepath.Join(pyHome, "bin", "echo-py")
		writeExec(t, srv, "#!"+python+"\n"+echoPy)
		add(installKind{"pyenv version directory", pyHome, []string{srv}, nil, "read", secretsBeside(t, pyHome)})
	}
	// An nvm-like node version directory with a global package.
	{
		prefix := filepath.Join(home, ".nvm", "versions", "node", "v20.0.0")
		copyTree(t, nodeBin(t), filepath.Join(prefix, "bin", "node"))
		pkg := filepath.Join(prefix, "lib", "node_modules", "echo-nvm")
		mustWrite(t, filepath.Join(pkg, "package.json"), `{"name":"echo-nvm","bin":{"echo-nvm":"server.js"}}`)
		writeExec(t, filepath.Join(pkg, "server.js"), "#!/usr/bin/env node\n"+echoBody)
		must(t, os.Symlink("../lib/node_modules/echo-nvm/server.js", filepath.Join(prefix, "bin", "echo-nvm")))
		add(installKind{"nvm version directory", prefix, []string{filepath.Join(prefix, "bin", "echo-nvm")},
			[]string{"--setenv", "PATH=" + filepath.Join(prefix, "bin") + ":/usr/bin:/bin"}, "read", secretsBeside(t, prefix)})
	}
	// A node global prefix (npm install -g --prefix): bin/srv links into
	// lib/node_modules/pkg, whose own node_modules holds a dependency.
	{
		prefix := filepath.Join(home, "npm-global")
		pkg := filepath.Join(prefix, "lib", "node_modules", "echo-pkg")
		mustWrite(t, filepath.Join(pkg, "package.json"), `{"name":"echo-pkg","bin":{"echo-pkg":"bin/server.js"}}`)
		mustWrite(t, filepath.Join(pkg, "node_modules", "echo-dep", "package.json"), `{"name":"echo-dep","main":"index.js"}`)
		mustWrite(t, filepath.Join(pkg, "node_modules", "echo-dep", "index.js"), "module.exports = () => { "+echoBody+" };\n")
		writeExec(t, filepath.Join(pkg, "bin", "server.js"), "#!/usr/bin/env node\nrequire(\"echo-dep\")();\n")
		must(t, os.MkdirAll(filepath.Join(prefix, "bin"), 0o755))
		must(t, os.Symlink("../lib/node_modules/echo-pkg/bin/server.js", filepath.Join(prefix, "bin", "echo-pkg")))
		add(installKind{"node prefix", prefix, []string{filepath.Join(prefix, "bin", "echo-pkg")}, nil, "read",
			secretsBeside(t, prefix, "lib/node_modules/other-pkg/secret.txt")})
	}
	// A conda-like environment.
	{
		env := filepath.Join(home, "miniconda3", "envs", "echo")
		py := pythonInstall(t, env)
		mustWrite(t, filepath.Join(env, "conda-meta", "history"), "==> 2026-12-01 <==\n")
		srv := filepath.Join(env, "bin", "echo-py")
		writeExec(t, srv, "#!"+py+"\n"+echoPy)
		add(installKind{"conda env", env, []string{srv}, nil, "read", secretsBeside(t, env)})
	}
	// pip install --user: ~/.local/bin/x on /usr/bin/python3, its package
	// in the user site.
	{
		local := filepath.Join(home, ".local")
		ver := filepath.Base(python) // python3.11, as /usr/bin/python3 is
		site := filepath.Join(local, "lib", ver, "site-packages")
		mustWrite(t, filepath.Join(site, "echouser.py"), echoPy)
		srv := filepath.Join(local, "bin", "echo-user")
		writeExec(t, srv, "#!/usr/bin/python3\nimport echouser\n")
		add(installKind{"~/.local/bin", local, []string{srv}, nil, "read", secretsBeside(t, local, "share/keyrings/login.keyring")})
	}
	// Static binaries in ~/bin, ~/go/bin and ~/.cargo/bin.
	for _, d := range []struct{ name, prefix string }{
		{"~/bin", home},
		{"~/go/bin", filepath.Join(home, "go")},
		{"~/.cargo/bin", filepath.Join(home, ".cargo")},
	} {
		x := filepath.Join(d.prefix, "bin", "naive-"+strings.Trim(filepath.Base(d.prefix), "."))
		writeExec(t, x, string(naiveData))
		extra := []string{"pkg/mod/private.txt"}
		if d.prefix == home {
			extra = []string{".ssh/id_ed25519"}
		}
		add(installKind{d.name, d.prefix, []string{x}, nil, "read_file", secretsBeside(t, d.prefix, extra...)})
	}
	return kinds
}

func TestAutoBindInstallKinds(t *testing.T) {
	rootfs := buildRootfs(t)
	nodeBin(t)
	home, _ := launchHome(t)
	for _, k := range installKinds(t, home) {
		t.Run(strings.NewReplacer("/", "_", "~", "home", " ", "_").Replace(k.name), func(t *testing.T) {
			steps := []step{{"op": "listTools", "label": "tools"}}
			for i, s := range k.secrets {
				steps = append(steps, call("secret"+string(rune('0'+i)), k.readTool, map[string]any{"path": s}))
			}
			tr := runTS(t, wrap(rootfs, k.flags, k.argv...), scenario{Env: map[string]string{"HOME": home}, Roots: []mcpRoot{}, Steps: steps})
			tools := tr.step(t, "tools")
			expect(t, kindWorks, k.name+": the server starts under auto-bind alone", tools.OK && strings.Contains(tools.Text, k.readTool), "%s\nstderr:\n%s", tools, tr.stderr)
			for i, s := range k.secrets {
				r := tr.step(t, "secret"+string(rune('0'+i)))
				expect(t, kindContain, k.name+": "+strings.TrimPrefix(s, home)+" beside the install is unreachable", !r.succeeded() && !strings.Contains(r.Text, "secret-"), "%s", r)
			}

			// Negative control: with the prefix bound explicitly, the same
			// server reads every file the test asserts unreachable.
			ctl := runTS(t, wrap(rootfs, append(append([]string{}, k.flags...), "--ro-bind", k.prefix), k.argv...), scenario{Env: map[string]string{"HOME": home}, Roots: []mcpRoot{}, Steps: steps})
			for i, s := range k.secrets {
				r := ctl.step(t, "secret"+string(rune('0'+i)))
				expect(t, kindControl, k.name+": with --ro-bind "+strings.TrimPrefix(k.prefix, home)+" the server reads "+strings.TrimPrefix(s, home), r.succeeded() && strings.Contains(r.Text, "secret-"), "%s\nstderr:\n%s", r, ctl.stderr)
			}
		})
	}
}
