package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// Servers installed the usual ways (npx, a venv on an interpreter outside
// /usr, a "#!/usr/bin/env node" script, a static binary inside a root)
// start under "rootfs run" with no bind flag: rootfs binds what each needs,
// read-only, and nothing more.

// echoJS is a dependency-free stdio MCP server in plain node: tools/list
// answers one tool, "read" returns a file's content (or an error result),
// "env" a variable of the server's environment ("(unset)" when absent).
const echoJS = `#!/usr/bin/env node
const fs = require("fs");
const rl = require("readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
rl.on("line", (l) => {
  let m;
  try { m = JSON.parse(l); } catch { return; }
  if (m.id === undefined || !m.method) return;
  let r = {};
  if (m.method === "initialize") {
    r = { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "echo-js", version: process.version } };
  } else if (m.method === "tools/list") {
    r = { tools: [{ name: "read", inputSchema: { type: "object" } }, { name: "env", inputSchema: { type: "object" } }] };
  } else if (m.method === "tools/call") {
    const a = m.params.arguments || {};
    try {
      const text = m.params.name === "read" ? fs.readFileSync(a.path, "utf8") : (process.env[a.name] ?? "(unset)");
      r = { content: [{ type: "text", text }] };
    } catch (e) {
      r = { content: [{ type: "text", text: String(e.message) }], isError: true };
    }
  }
  send({ jsonrpc: "2.0", id: m.id, result: r });
});
`

// echoPy is echoJS in Python (PyPI is out of reach, so no SDK); "prefix"
// returns sys.base_prefix, to show which installation runs.
const echoPy = `import json, os, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if "id" not in m or "method" not in m:
        continue
    r = {}
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "echo-py", "version": sys.version.split()[0]}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("read", "env", "prefix")]}
    elif m["method"] == "tools/call":
        a = m["params"].get("arguments") or {}
        n = m["params"]["name"]
        try:
            if n == "read":
                text = open(a["path"]).read()
            elif n == "env":
                text = os.environ.get(a["name"], "(unset)")
            else:
                text = sys.base_prefix + " " + sys.prefix
            r = {"content": [{"type": "text", "text": text}]}
        except Exception as e:
            r = {"content": [{"type": "text", "text": str(e)}], "isError": True}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
`

// launchHome makes a home directory for rootfs (its $HOME in the test)
// with credentials in it that no server may see.
func launchHome(t *testing.T) (home, secret string) {
	t.Helper()
	base := openTempDir(t)
	home = filepath.Join(base, "home")
	secret = "ssh-key-" + randHex(8)
	mustWrite(t, filepath.Join(home, ".ssh", "id_ed25519"), secret+"\n")
	mustWrite(t, filepath.Join(home, "notes.txt"), "private notes\n")
	return home, secret
}

func writeExec(t *testing.T, p, content string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o755))
}

// mountsUnder returns the mount points of a mountinfo text at or beneath
// prefix, each with its per-mount options.
func mountsUnder(mountinfo, prefix string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		mp := strings.ReplaceAll(f[4], `\040`, " ")
		if mp == prefix || strings.HasPrefix(mp, prefix+"/") {
			out[mp] = f[5]
		}
	}
	return out
}

func readOnly(opts string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == "ro" {
			return true
		}
	}
	return false
}

// checkOnlyMounts asserts that beneath prefix the sandbox has exactly the
// mount points want, each read-only.
func checkOnlyMounts(t *testing.T, what, mountinfo, prefix string, want ...string) {
	t.Helper()
	got := mountsUnder(mountinfo, prefix)
	var names []string
	for mp, opts := range got {
		names = append(names, mp)
		expect(t, kindContain, what+": "+mp+" read-only", readOnly(opts), "mounted %s", opts)
	}
	sort.Strings(names)
	sort.Strings(want)
	expect(t, kindContain, what+": only the resolved paths are mounted", strings.Join(names, " ") == strings.Join(want, " "),
		"mounts under %s: %q, want %q", prefix, names, want)
}

// --- npx with a warm cache and no network ----------------------------------

const npxPkg = "rootfs-e2e-echo"

// npmTarball packs echoJS as an npm package (package/package.json,
// package/server.js), as "npm pack" would.
func npmTarball(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	files := []struct {
		name, body string
		mode       int64
	}{
		{"package/package.json", `{"name":"` + npxPkg + `","version":"1.0.0","bin":{"` + npxPkg + `":"server.js"}}`, 0o644},
		{"package/server.js", echoJS, 0o755},
	}
	for _, f := range files {
		mustTB(t, tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), ModTime: time.Unix(499162500, 0)}))
		_, err := tw.Write([]byte(f.body))
		mustTB(t, err)
	}
	mustTB(t, tw.Close())
	mustTB(t, gz.Close())
	return buf.Bytes()
}

// npmRegistry serves npxPkg like the npm registry (packument and tarball),
// so the tests depend on no outside service.
func npmRegistry(t testing.TB) *httptest.Server {
	t.Helper()
	tgz := npmTarball(t)
	sum512 := sha512.Sum512(tgz)
	sum1 := sha1.Sum(tgz)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/" + npxPkg:
			tarURL := srv.URL + "/" + npxPkg + "/-/" + npxPkg + "-1.0.0.tgz"
			doc := map[string]any{
				"name": npxPkg, "dist-tags": map[string]string{"latest": "1.0.0"},
				"versions": map[string]any{"1.0.0": map[string]any{
					"name": npxPkg, "version": "1.0.0", "bin": map[string]string{npxPkg: "server.js"},
					"dist": map[string]string{"tarball": tarURL, "shasum": hex.EncodeToString(sum1[:]),
						"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum512[:])},
				}},
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(doc)
		case "/" + npxPkg + "/-/" + npxPkg + "-1.0.0.tgz":
			_, _ = w.Write(tgz)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// launchEnv is the environment for rootfs or npx with home as $HOME and
// nothing of the test's own npm settings.
func launchEnv(home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || strings.HasPrefix(strings.ToLower(k), "npm_config_") || k == "XDG_CACHE_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "HOME="+home), extra...)
}

// warmNpx runs "npx -y npxPkg" once outside rootfs against registry, so
// the package is in home's npm cache (~/.npm/_npx).
func warmNpx(t testing.TB, home, registry string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npx", "-y", npxPkg)
	cmd.Env = launchEnv(home, "npm_config_registry="+registry)
	cmd.Stdin = strings.NewReader("") // the server exits at EOF
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("warming the npm cache: %v\n%s", err, out)
	}
}

func mustTB(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// listFiles lists the paths under dir (for "the host cache is unchanged").
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// rawRun starts argv with env, sends initialize, initialized and
// tools/list, waits up to wait for the tools/list answer and returns
// whether it came, the status (-1 while running) and stderr.
func rawRun(t *testing.T, argv, env []string, wait time.Duration) (bool, int, string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	stderr := newTail(64 << 10)
	cmd.Stderr = stderr
	must(t, cmd.Start())
	_, _ = io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
	got := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"id":2`) && strings.Contains(sc.Text(), `"tools"`) {
				got <- true
				return
			}
		}
		got <- false
	}()
	var ok bool
	select {
	case ok = <-got:
	case <-time.After(wait):
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	status := -1
	select {
	case err := <-done:
		status = exitStatus(err)
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	return ok, status, stderr.String()
}

func TestLaunchNpxWarmCacheNoNetwork(t *testing.T) {
	rootfs := buildRootfs(t)
	nodeBin(t)
	home, secret := launchHome(t)
	reg := npmRegistry(t)
	registry := reg.URL + "/"
	warmNpx(t, home, registry)
	reg.Close() // from here on nothing can be downloaded, network or not
	before := listFiles(t, filepath.Join(home, ".npm"))

	argv := wrap(rootfs, []string{"--no-network", "--setenv", "npm_config_registry"}, "npx", "-y", npxPkg)
	tr := runTS(t, argv, scenario{
		Env:   map[string]string{"HOME": home, "npm_config_registry": registry},
		Roots: []mcpRoot{},
		Steps: []step{
			{"op": "listTools", "label": "tools"},
			call("mounts", "read", map[string]any{"path": "/proc/self/mountinfo"}),
			call("ssh", "read", map[string]any{"path": filepath.Join(home, ".ssh", "id_ed25519")}),
		},
	})
	tools := tr.step(t, "tools")
	expect(t, kindWorks, "npx server from a warm cache answers tools/list with --no-network", tools.OK && strings.Contains(tools.Text, "read"), "%s\nstderr:\n%s", tools, tr.stderr)
	ssh := tr.step(t, "ssh")
	expect(t, kindContain, "npx server cannot read ~/.ssh", !strings.Contains(ssh.Text, secret), "%s", ssh)
	if m := tr.step(t, "mounts"); m.succeeded() {
		got := mountsUnder(m.Text, home)
		_, cache := got[filepath.Join(home, ".npm")]
		expect(t, kindContain, "only the npm cache of the home directory is mounted", len(got) == 1 && cache, "mounts under home: %v", got)
	} else {
		t.Errorf("reading mountinfo: %s", m)
	}
	after := listFiles(t, filepath.Join(home, ".npm"))
	expect(t, kindContain, "npx's writes stay in the sandbox (the host cache is unchanged)", strings.Join(before, "\n") == strings.Join(after, "\n"),
		"host cache changed: %d entries before, %d after", len(before), len(after))

	// Negative control: without auto-bind the cache is not there, and with
	// no network npx cannot get the package.
	ok, _, stderr := rawRun(t, wrap(rootfs, []string{"--no-network", "--no-auto-bind", "--setenv", "npm_config_registry", "--setenv", "npm_config_fetch_retries=0"}, "npx", "-y", npxPkg),
		launchEnv(home, "npm_config_registry="+registry), 30*time.Second)
	expect(t, kindControl, "npx without the cache cannot start with --no-network", !ok, "it answered tools/list; stderr:\n%s", stderr)
}

// --- a venv on an interpreter outside /usr ---------------------------------

// pythonPrefix copies Debian's python3 and its standard library into
// dir/prefix (an installation like pyenv's) and makes a venv from it.
func pythonPrefix(t *testing.T, dir string) (prefix, venv string) {
	t.Helper()
	py, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skip("needs Debian's /usr/bin/python3")
	}
	ver := filepath.Base(py) // python3.11
	prefix = filepath.Join(dir, "prefix")
	must(t, os.MkdirAll(filepath.Join(prefix, "bin"), 0o755))
	must(t, os.MkdirAll(filepath.Join(prefix, "lib"), 0o755))
	if out, err := exec.Command("cp", "-a", py, filepath.Join(prefix, "bin", ver)).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if out, err := exec.Command("cp", "-a", "/usr/lib/"+ver, filepath.Join(prefix, "lib", ver)).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	must(t, os.Symlink(ver, filepath.Join(prefix, "bin", "python3")))
	venv = filepath.Join(dir, "venv")
	cmd := exec.Command(filepath.Join(prefix, "bin", "python3"), "-m", "venv", "--without-pip", venv)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python -m venv: %v\n%s", err, out)
	}
	writeExec(t, filepath.Join(venv, "bin", "echo-py"), "#!"+filepath.Join(venv, "bin", "python")+"\n"+echoPy)
	return prefix, venv
}

func TestLaunchVenvOutsideUsr(t *testing.T) {
	rootfs := buildRootfs(t)
	nodeBin(t)
	home, secret := launchHome(t)
	prefix, venv := pythonPrefix(t, filepath.Join(home, "tools"))
	server := filepath.Join(venv, "bin", "echo-py")

	tr := runTS(t, wrap(rootfs, nil, server), scenario{
		Env:   map[string]string{"HOME": home},
		Roots: []mcpRoot{},
		Steps: []step{
			{"op": "listTools", "label": "tools"},
			call("prefix", "prefix", nil),
			call("mounts", "read", map[string]any{"path": "/proc/self/mountinfo"}),
			call("ssh", "read", map[string]any{"path": filepath.Join(home, ".ssh", "id_ed25519")}),
		},
	})
	tools := tr.step(t, "tools")
	expect(t, kindWorks, "venv server (interpreter outside /usr) answers tools/list", tools.OK && strings.Contains(tools.Text, "prefix"), "%s\nstderr:\n%s", tools, tr.stderr)
	p := tr.step(t, "prefix")
	expect(t, kindWorks, "the venv runs on its own base prefix, not on /usr's standard library", p.succeeded() && p.Text == prefix+" "+venv, "%s", p)
	if m := tr.step(t, "mounts"); m.succeeded() {
		// What CPython reads, never the directories whole (lib64 is a
		// symlink the view shows, not a mount).
		checkOnlyMounts(t, "venv", m.Text, home, filepath.Join(prefix, "bin"), filepath.Join(prefix, "lib"),
			filepath.Join(venv, "bin"), filepath.Join(venv, "include"), filepath.Join(venv, "lib"), filepath.Join(venv, "pyvenv.cfg"))
	} else {
		t.Errorf("reading mountinfo: %s", m)
	}
	ssh := tr.step(t, "ssh")
	expect(t, kindContain, "venv server cannot read ~/.ssh", ssh.IsError && !strings.Contains(ssh.Text, secret), "%s", ssh)

	// Started in the home directory (as a client may start servers): the
	// home directory is never a root, so it is not taken for something
	// the server can write, and the prefix under it is still followed.
	tr = runTS(t, wrap(rootfs, nil, server), scenario{
		Env:   map[string]string{"HOME": home},
		Cwd:   home,
		Roots: []mcpRoot{},
		Steps: []step{{"op": "listTools", "label": "tools"}},
	})
	tools = tr.step(t, "tools")
	expect(t, kindWorks, "started in the home directory, the venv server under it still starts", tools.OK && strings.Contains(tools.Text, "prefix"), "%s\nstderr:\n%s", tools, tr.stderr)

	// Negative control: the same command without auto-bind fails, and the
	// error names the interpreter that is missing and the flag.
	ok, status, stderr := rawRun(t, wrap(rootfs, []string{"--no-auto-bind"}, server), launchEnv(home), 30*time.Second)
	expect(t, kindControl, "without auto-bind the venv server cannot start", !ok && status == 127, "ok=%v status=%d", ok, status)
	expect(t, kindWorks, "the exec error names the missing interpreter and --ro-bind",
		strings.Contains(stderr, "#! interpreter "+filepath.Join(venv, "bin", "python")) && strings.Contains(stderr, "--ro-bind "+venv) && strings.Contains(stderr, "--no-auto-bind"),
		"stderr:\n%s", stderr)
}

// --- a "#!/usr/bin/env node" script beside a .env --------------------------

func TestLaunchEnvNodeScriptBesideDotEnv(t *testing.T) {
	rootfs := buildRootfs(t)
	node := nodeBin(t)
	home, secret := launchHome(t)
	proj := filepath.Join(home, "proj")
	dotenv := "API_KEY=" + randHex(8)
	mustWrite(t, filepath.Join(proj, ".env"), dotenv+"\n")
	script := filepath.Join(proj, "bin", "echo.js")
	writeExec(t, script, echoJS)

	tr := runTS(t, wrap(rootfs, nil, script), scenario{
		Env:   map[string]string{"HOME": home},
		Roots: []mcpRoot{},
		Steps: []step{
			{"op": "listTools", "label": "tools"},
			call("mounts", "read", map[string]any{"path": "/proc/self/mountinfo"}),
			call("dotenv", "read", map[string]any{"path": filepath.Join(proj, ".env")}),
			call("ssh", "read", map[string]any{"path": filepath.Join(home, ".ssh", "id_ed25519")}),
		},
	})
	tools := tr.step(t, "tools")
	expect(t, kindWorks, "#!/usr/bin/env node script answers tools/list", tools.OK && strings.Contains(tools.Text, "read"), "%s\nstderr:\n%s", tools, tr.stderr)
	if m := tr.step(t, "mounts"); m.succeeded() {
		checkOnlyMounts(t, "env node script", m.Text, home, script)
	} else {
		t.Errorf("reading mountinfo: %s", m)
	}
	de := tr.step(t, "dotenv")
	expect(t, kindContain, "the .env beside the script stays invisible", de.IsError && !strings.Contains(de.Text, dotenv), "%s", de)
	ssh := tr.step(t, "ssh")
	expect(t, kindContain, "~/.ssh stays invisible", ssh.IsError && !strings.Contains(ssh.Text, secret), "%s", ssh)

	// Negative control: the same server run directly reads both.
	direct := runTS(t, []string{node, script}, scenario{Roots: []mcpRoot{}, Steps: []step{
		call("dotenv", "read", map[string]any{"path": filepath.Join(proj, ".env")}),
		call("ssh", "read", map[string]any{"path": filepath.Join(home, ".ssh", "id_ed25519")}),
	}})
	expect(t, kindControl, "without rootfs the script reads the .env", strings.Contains(direct.step(t, "dotenv").Text, dotenv), "%s", direct.step(t, "dotenv"))
	expect(t, kindControl, "without rootfs the script reads ~/.ssh", strings.Contains(direct.step(t, "ssh").Text, secret), "%s", direct.step(t, "ssh"))
}

// --- a static binary in the home directory, and one inside a root -------------

func TestLaunchHomeBinaryHidesTheRestOfHome(t *testing.T) {
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	home, secret := launchHome(t)
	bin := filepath.Join(home, "bin", "naive")
	data, err := os.ReadFile(naive)
	must(t, err)
	writeExec(t, bin, string(data))

	tr := runTS(t, wrap(rootfs, nil, bin), scenario{
		Env:   map[string]string{"HOME": home},
		Roots: []mcpRoot{},
		Steps: []step{
			{"op": "listTools", "label": "tools"},
			call("mounts", "read_file", map[string]any{"path": "/proc/self/mountinfo"}),
			call("ssh", "read_file", map[string]any{"path": filepath.Join(home, ".ssh", "id_ed25519")}),
			call("home", "list_dir", map[string]any{"path": home}),
		},
	})
	tools := tr.step(t, "tools")
	expect(t, kindWorks, "~/bin/naive answers tools/list", tools.OK && strings.Contains(tools.Text, "read_file"), "%s\nstderr:\n%s", tools, tr.stderr)
	if m := tr.step(t, "mounts"); m.succeeded() {
		checkOnlyMounts(t, "~/bin binary", m.Text, filepath.Dir(home), bin)
	} else {
		t.Errorf("reading mountinfo: %s", m)
	}
	ssh := tr.step(t, "ssh")
	expect(t, kindContain, "~/.ssh beside ~/bin stays unreachable", !ssh.succeeded() && !strings.Contains(ssh.Text, secret), "%s", ssh)
	h := tr.step(t, "home")
	expect(t, kindContain, "the home directory shows only bin", h.succeeded() && strings.TrimSpace(h.Text) == "bin", "%s", h)

	direct := runTS(t, []string{bin}, scenario{Roots: []mcpRoot{}, Steps: []step{
		call("ssh", "read_file", map[string]any{"path": filepath.Join(home, ".ssh", "id_ed25519")}),
	}})
	expect(t, kindControl, "without rootfs ~/bin/naive reads ~/.ssh", strings.Contains(direct.step(t, "ssh").Text, secret), "%s", direct.step(t, "ssh"))
}

func TestLaunchStaticBinaryByItsViewPath(t *testing.T) {
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	home, _ := launchHome(t)
	proj := filepath.Join(home, "proj")
	data, err := os.ReadFile(naive)
	must(t, err)
	writeExec(t, filepath.Join(proj, "bin", "server"), string(data))
	mustWrite(t, filepath.Join(proj, "README"), "in the root\n")

	// A path that exists only in the view: flat layout (in host layout
	// the view path is the host path, which runs anyway).
	tr := runTS(t, wrap(rootfs, flat("--root", proj), "/proj/bin/server"), scenario{
		Env:   map[string]string{"HOME": home},
		Roots: []mcpRoot{},
		Steps: []step{
			{"op": "listTools", "label": "tools"},
			call("readme", "read_file", map[string]any{"path": "/proj/README"}),
		},
	})
	tools := tr.step(t, "tools")
	expect(t, kindWorks, "a static binary given by its path in the view answers tools/list", tools.OK && strings.Contains(tools.Text, "read_file"), "%s\nstderr:\n%s", tools, tr.stderr)
	r := tr.step(t, "readme")
	expect(t, kindWorks, "it runs in the view of its root", r.succeeded() && strings.Contains(r.Text, "in the root"), "%s", r)

	// Negative control: with no root holding it, the same path is not found.
	_, status, stderr := rawRun(t, wrap(rootfs, flat(), "/proj/bin/server"), launchEnv(home), 10*time.Second)
	expect(t, kindControl, "without the root the in-view path is not found", status == 127, "status %d, stderr:\n%s", status, stderr)
}

// --- errors that say what is missing -------------------------------------------

func TestLaunchErrorMessages(t *testing.T) {
	rootfs := buildRootfs(t)
	home, _ := launchHome(t)
	bin := filepath.Join(home, "bin")
	writeExec(t, filepath.Join(bin, "no-interp"), "#!/opt/nowhere/bin/python3\n")
	must(t, os.Symlink("/opt/nowhere/server", filepath.Join(bin, "dangling")))
	mustWrite(t, filepath.Join(bin, "not-exec"), "#!/bin/sh\n")
	writeExec(t, filepath.Join(bin, "env-missing"), "#!/usr/bin/env rootfs-no-such-interpreter\n")
	tests := []struct {
		name   string
		flags  []string
		status int
		want   []string
	}{
		{"no-interp", nil, 127, []string{"#! interpreter /opt/nowhere/bin/python3", "no-interp", "does not exist"}},
		{"dangling", nil, 127, []string{"symlink target /opt/nowhere/server", "dangling symlink"}},
		{"not-exec", nil, 126, []string{"not-exec", "no execute permission"}},
		{"env-missing", nil, 127, []string{`"env rootfs-no-such-interpreter"`, "not in the server's PATH", "--setenv PATH="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, status, stderr := rawRun(t, wrap(rootfs, tt.flags, filepath.Join(bin, tt.name)), launchEnv(home), 10*time.Second)
			ok := status == tt.status
			for _, w := range tt.want {
				ok = ok && strings.Contains(stderr, w)
			}
			expect(t, kindWorks, tt.name+": exit status and a message that names what is missing", ok, "status %d (want %d), stderr:\n%s", status, tt.status, stderr)
			lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1
			expect(t, kindWorks, tt.name+": one line", lines == 1, "stderr has %d lines:\n%s", lines, stderr)
		})
	}
}

// --- --setenv NAME ----------------------------------------------------------------

func TestLaunchSetenvName(t *testing.T) {
	rootfs := buildRootfs(t)
	node := nodeBin(t)
	home, _ := launchHome(t)
	script := filepath.Join(home, "bin", "echo.js")
	writeExec(t, script, echoJS)
	passed, kept := "tok-"+randHex(8), "kept-"+randHex(8)
	env := map[string]string{"HOME": home, "ROOTFS_E2E_PASSED": passed, "ROOTFS_E2E_KEPT": kept}
	steps := []step{
		call("passed", "env", map[string]any{"name": "ROOTFS_E2E_PASSED"}),
		call("kept", "env", map[string]any{"name": "ROOTFS_E2E_KEPT"}),
	}
	tr := runTS(t, wrap(rootfs, []string{"--setenv", "ROOTFS_E2E_PASSED"}, script), scenario{Env: env, Roots: []mcpRoot{}, Steps: steps})
	p, k := tr.step(t, "passed"), tr.step(t, "kept")
	expect(t, kindWorks, "--setenv NAME passes NAME's value from rootfs's environment", p.succeeded() && p.Text == passed, "%s\nstderr:\n%s", p, tr.stderr)
	expect(t, kindContain, "a variable not passed does not reach the server", k.succeeded() && k.Text == "(unset)", "%s", k)

	direct := runTS(t, []string{node, script}, scenario{Env: env, Roots: []mcpRoot{}, Steps: steps})
	expect(t, kindControl, "without rootfs the server sees the variable not passed", direct.step(t, "kept").Text == kept, "%s", direct.step(t, "kept"))

	// NAME unset in rootfs's environment is refused before anything starts.
	_, status, stderr := rawRun(t, wrap(rootfs, []string{"--setenv", "ROOTFS_E2E_UNSET"}, script), launchEnv(home), 10*time.Second)
	expect(t, kindWorks, "--setenv of an unset NAME is refused in one line", status == 125 && strings.Contains(stderr, "ROOTFS_E2E_UNSET is not set"), "status %d, stderr:\n%s", status, stderr)
}

// --- --git-identity --------------------------------------------------------------

func TestLaunchGitIdentity(t *testing.T) {
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	testutil.RequireRoot(t) // to give the repository another owner
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("needs git")
	}
	home, _ := launchHome(t)
	mustWrite(t, filepath.Join(home, ".gitconfig"), "[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n")
	// A checkout owned by someone else, as a user's repository is for the
	// server running as root: git refuses it without safe.directory.
	repo := filepath.Join(filepath.Dir(home), "repo")
	must(t, os.MkdirAll(repo, 0o755))
	if out, err := exec.Command(git, "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	must(t, filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 12345, 12345)
	}))
	steps := []step{
		call("ident", "exec", map[string]any{"argv": []string{"git", "var", "GIT_AUTHOR_IDENT"}}),
		call("status", "exec", map[string]any{"argv": []string{"git", "-C", inView(repo), "status", "--short"}}),
	}
	env := map[string]string{"HOME": home}
	tr := runTS(t, wrap(rootfs, []string{"--git-identity", "--root", repo}, naive), scenario{Env: env, Roots: []mcpRoot{}, Steps: steps})
	id, st := tr.step(t, "ident"), tr.step(t, "status")
	expect(t, kindWorks, "--git-identity: git inside knows the user's name and email", id.succeeded() && strings.Contains(id.Text, "Ada Lovelace <ada@example.org>"), "%s\nstderr:\n%s", id, tr.stderr)
	expect(t, kindWorks, "--git-identity: git accepts a root owned by another user", st.succeeded(), "%s", st)

	plain := runTS(t, wrap(rootfs, []string{"--root", repo}, naive), scenario{Env: env, Roots: []mcpRoot{}, Steps: steps})
	id, st = plain.step(t, "ident"), plain.step(t, "status")
	expect(t, kindControl, "without --git-identity git inside does not know the user", !strings.Contains(id.Text, "Ada Lovelace"), "%s", id)
	expect(t, kindControl, "without --git-identity git refuses the root (dubious ownership)", !st.succeeded() && strings.Contains(st.Text, "dubious ownership"), "%s", st)
}

// --- no roots from anywhere ------------------------------------------------------

func TestLaunchWorkingDirectoryIsTheFallbackRoot(t *testing.T) {
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	home, _ := launchHome(t)
	proj := filepath.Join(home, "proj")
	mustWrite(t, filepath.Join(proj, "plan.md"), "the plan\n")
	noRoots := map[string]any{}
	env := map[string]string{"HOME": home}

	// At the default level the choice is not logged (TestQuietByDefault);
	// --log-level debug says which root it chose.
	tr := runTS(t, wrap(rootfs, []string{"--log-level", "debug"}, naive), scenario{Env: env, Cwd: proj, Capabilities: noRoots, Steps: []step{
		until("plan", "read_file", map[string]any{"path": inView(proj) + "/plan.md"}, []string{"the plan"}, nil),
	}})
	r := tr.step(t, "plan")
	expect(t, kindWorks, "a client without roots and no --root: the working directory is the root", r.Satisfied, "%s\nstderr:\n%s", r, tr.stderr)
	expect(t, kindWorks, "the debug log says which root it chose", strings.Contains(tr.stderr, "the working directory is a root") && strings.Contains(tr.stderr, proj), "stderr:\n%s", tr.stderr)

	// Started in the home directory itself: no root; once the client turns out to declare
	// none, rootfs refuses in one line naming --root (and the server is stopped).
	tr = runTS(t, wrap(rootfs, nil, naive), scenario{Env: env, Cwd: home, Capabilities: noRoots, Steps: []step{
		call("notes", "read_file", map[string]any{"path": inView(home) + "/notes.txt"}),
		call("list", "list_dir", map[string]any{"path": "/"}),
	}})
	n := tr.step(t, "notes")
	expect(t, kindContain, "started in the home directory, the home directory is not made a root", !n.succeeded() && !strings.Contains(n.Text, "private notes"), "%s", n)
	expect(t, kindWorks, "and rootfs refuses in one line naming --root", strings.Contains(tr.stderr, "rootfs run: ") && strings.Contains(tr.stderr, "which it will not serve whole; give --root DIR"), "stderr:\n%s", tr.stderr)

	// Control: given as --root, the same file is read (so the case can fail).
	tr = runTS(t, wrap(rootfs, []string{"--root", home}, naive), scenario{Env: env, Cwd: home, Capabilities: noRoots, Steps: []step{
		call("notes", "read_file", map[string]any{"path": inView(home) + "/notes.txt"}),
	}})
	n = tr.step(t, "notes")
	expect(t, kindControl, "with --root the home directory's file is read", n.succeeded() && strings.Contains(n.Text, "private notes"), "%s", n)
}
