package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// attack is one attempt by the naive server to reach what is outside the
// roots. leak is the text whose presence in the answer proves it got there.
type attack struct {
	name   string
	tool   string
	args   func(p paths) map[string]any
	leak   func(f *fixture) string
	shadow bool // needs a readable /etc/shadow for its negative control
	proc1  bool // needs /proc/1/root to be reachable here for its negative control
}

// proc1Reachable reports whether this process may follow /proc/1/root (not
// in a container whose PID 1 belongs to another user namespace).
func proc1Reachable() bool {
	_, err := os.Stat("/proc/1/root/")
	return err == nil
}

func naiveAttacks() []attack {
	token := func(f *fixture) string { return f.token }
	shadow := func(*fixture) string { return shadowHead() }
	read := func(path func(p paths) string) func(p paths) map[string]any {
		return func(p paths) map[string]any { return map[string]any{"path": path(p)} }
	}
	execArgv := func(argv func(p paths) []string) func(p paths) map[string]any {
		return func(p paths) map[string]any { return map[string]any{"argv": argv(p)} }
	}
	return []attack{
		{name: "host path outside the roots", tool: "read_file", leak: token,
			args: read(func(p paths) string { return p.f.secret })},
		{name: "/etc/shadow", tool: "read_file", leak: shadow, shadow: true,
			args: read(func(paths) string { return "/etc/shadow" })},
		{name: "/proc/1/root/etc/shadow", tool: "read_file", leak: shadow, shadow: true, proc1: true,
			args: read(func(paths) string { return "/proc/1/root/etc/shadow" })},
		{name: "/proc/1/root + host path", tool: "read_file", leak: token, proc1: true,
			args: read(func(p paths) string { return "/proc/1/root" + p.f.secret })},
		{name: "/proc/self/root + host path", tool: "read_file", leak: token,
			args: read(func(p paths) string { return "/proc/self/root" + p.f.secret })},
		{name: "/proc/<rootfs pid>/root + host path", tool: "read_file", leak: token,
			args: read(func(p paths) string { return "/proc/{{pid}}/root" + p.f.secret })},
		{name: "/proc/<rootfs child pid>/root + host path", tool: "read_file", leak: token,
			args: read(func(p paths) string { return "/proc/{{child}}/root" + p.f.secret })},
		{name: "/proc/<rootfs child pid>/root/etc/shadow", tool: "read_file", leak: shadow, shadow: true,
			args: read(func(paths) string { return "/proc/{{child}}/root/etc/shadow" })},
		{name: "absolute symlink in a root pointing out", tool: "read_file", leak: token,
			args: read(func(p paths) string { return p.in("proj-alpha", "escape") })},
		{name: "relative symlink in a root pointing out", tool: "read_file", leak: token,
			args: read(func(p paths) string { return p.in("proj-alpha", "up", "secret.txt") })},
		{name: "dot-dot out of a root", tool: "read_file", leak: token,
			args: read(func(p paths) string { return p.raw("proj-alpha", "../../outside/secret.txt") })},
		{name: "dot-dot above /", tool: "read_file", leak: token,
			args: read(func(p paths) string { return "/../../../.." + p.f.secret })},
		{name: "list the directory outside the roots", tool: "list_dir",
			leak: func(*fixture) string { return "secret.txt" },
			args: read(func(p paths) string { return p.f.outDir })},
		{name: "exec cat /etc/shadow", tool: "exec", leak: shadow, shadow: true,
			args: execArgv(func(paths) []string { return []string{"cat", "/etc/shadow"} })},
		{name: "exec cat host secret", tool: "exec", leak: token,
			args: execArgv(func(p paths) []string { return []string{"cat", p.f.secret} })},
		{name: "exec sh through /proc/1/root", tool: "exec", leak: token, proc1: true,
			args: execArgv(func(p paths) []string { return []string{"/bin/sh", "-c", "cat /proc/1/root" + p.f.secret} })},
	}
}

// TestNaiveServer is case 2 of issue 5: a server that checks nothing, under
// rootfs, cannot reach host files, /proc tricks or /etc/shadow, and its own
// roots/list returns in-view URIs that work. Each attack has a negative
// control: the same server run directly reaches the same file.
func TestNaiveServer(t *testing.T) {
	naive := buildNaive(t)
	nodeBin(t)
	f := newFixture(t, "proj-alpha", "proj-beta") // both modes: the direct run removes what it wrote outside
	if shadowHead() == "" {
		t.Log("/etc/shadow is not readable here: its attacks run without a negative control")
	}
	if !proc1Reachable() {
		t.Log("/proc/1/root is not reachable here (PID 1 in another user namespace): its attacks run without a negative control")
	}

	// A read-only extra path, as the node servers' node_modules are bound.
	roDir := filepath.Join(f.base, "ro-extra")
	mustWrite(t, filepath.Join(roDir, "lib.js"), "module code\n")

	t.Run("direct", func(t *testing.T) {
		tr := runNaive(t, f, roDir, []string{naive}, paths{f: f})
		naiveControls(t, f, roDir, tr)
	})

	t.Run("rootfs", func(t *testing.T) {
		rootfs := buildRootfs(t)
		tr := runNaive(t, f, roDir, wrap(rootfs, []string{"--ro-bind", roDir}, naive), paths{f: f, wrapped: true})
		naiveContained(t, f, roDir, tr)

		// Its own roots/list answers with in-view URIs, names kept, no host path.
		r := tr.step(t, "roots")
		var lr struct {
			Roots []mcpRoot `json:"roots"`
		}
		_ = json.Unmarshal([]byte(r.Text), &lr)
		got := map[string]string{}
		for _, x := range lr.Roots {
			got[x.URI] = x.Name
		}
		expect(t, kindWorks, "roots/list returns translated URIs",
			len(lr.Roots) == 2 && got[f.vuri("proj-alpha")] == "Root proj-alpha" && got[f.vuri("proj-beta")] == "Root proj-beta",
			"want %s and %s with names kept: %s\nstderr:\n%s", f.vuri("proj-alpha"), f.vuri("proj-beta"), r, tr.stderr)
		if flatLayout() {
			expect(t, kindContain, "roots/list shows no host path", !strings.Contains(r.Text, f.base),
				"host path %s in the server's roots/list: %s", f.base, r)
		}

		r = tr.step(t, "ls /")
		var leaked []string
		for _, name := range strings.Split(r.Text, "\n") {
			switch name {
			case "home", "root", "var", "srv", "opt", "mnt", "boot", "media", "host", "outside":
				leaked = append(leaked, name)
			}
		}
		par := tr.step(t, "ls parent")
		expect(t, kindContain, "/ holds only roots and the runtime, the roots' parent only the roots",
			r.succeeded() && len(leaked) == 0 && par.succeeded() && strings.Contains(par.Text, "proj-alpha") && strings.Contains(par.Text, "proj-beta") &&
				!strings.Contains(par.Text, "outside"),
			"unexpected top level %q (host dirs %q) or parent %q: %s", r.Text, leaked, par.Text, r)
	})
}

// runNaive runs the naive server through the TypeScript client with roots
// proj-alpha and proj-beta: what it must reach, then every attack of
// naiveAttacks, then extra; p says where the roots are inside.
func runNaive(t *testing.T, f *fixture, roDir string, argv []string, p paths, extra ...step) *transcript {
	t.Helper()
	alphaURI := "file://" + f.roots["proj-alpha"]
	if p.wrapped {
		alphaURI = f.vuri("proj-alpha")
	}
	steps := []step{
		until("roots", "get_roots", nil, []string{alphaURI}, nil),
		call("ls /", "list_dir", map[string]any{"path": "/"}),
		call("ls parent", "list_dir", map[string]any{"path": filepath.Dir(p.in("proj-alpha"))}), // "/" in flat layout
		call("ls root", "list_dir", map[string]any{"path": p.in("proj-alpha")}),
		call("read in root", "read_file", map[string]any{"path": p.in("proj-alpha", "proj-alpha.txt")}),
		call("read deep in root", "read_file", map[string]any{"path": p.in("proj-beta", "sub", "deep.md")}),
		call("write in root", "write_file", map[string]any{"path": p.in("proj-beta", "written.txt"), "content": "hello from the server"}),
		call("write outside", "write_file", map[string]any{"path": filepath.Join(f.outDir, "pwned.txt"), "content": "pwned"}),
		call("exec in root", "exec", map[string]any{"argv": []string{"cat", p.in("proj-alpha", "proj-alpha.txt")}}),
		call("read ro-bind", "read_file", map[string]any{"path": filepath.Join(roDir, "lib.js")}),
		call("write ro-bind", "write_file", map[string]any{"path": filepath.Join(roDir, "lib.js"), "content": "tampered\n"}),
	}
	for _, a := range naiveAttacks() {
		steps = append(steps, call(a.name, a.tool, a.args(p)))
	}
	steps = append(steps, extra...)
	return runTS(t, argv, scenario{Roots: f.rootsFor("proj-alpha", "proj-beta"), Steps: steps})
}

// naiveControls are the negative controls of runNaive's attacks: the naive
// server run directly reaches each target. It undoes what the attacks
// wrote outside.
func naiveControls(t *testing.T, f *fixture, roDir string, tr *transcript) {
	t.Helper()
	for _, a := range naiveAttacks() {
		leak := a.leak(f)
		if a.shadow && leak == "" || a.proc1 && !proc1Reachable() {
			t.Logf("no negative control here for %q", a.name)
			continue
		}
		r := tr.step(t, a.name)
		expect(t, kindControl, a.name, r.succeeded() && strings.Contains(r.Text, leak),
			"the naive server without rootfs should reach it: %s", r)
	}
	r := tr.step(t, "roots")
	expect(t, kindControl, "roots/list shows host paths", strings.Contains(r.Text, f.base),
		"direct roots/list should hold the host path %s: %s", f.base, r)
	r = tr.step(t, "ls /")
	expect(t, kindControl, "/ is the host's", strings.Contains(r.Text, "proc") && strings.Contains(r.Text, "var"), "%s", r)
	_, err := os.Stat(filepath.Join(f.outDir, "pwned.txt"))
	expect(t, kindControl, "write outside", err == nil, "the direct write outside did not land: %v", err)
	_ = os.Remove(filepath.Join(f.outDir, "pwned.txt"))
	expect(t, kindControl, "write to the --ro-bind path", tr.step(t, "write ro-bind").succeeded(), "%s", tr.step(t, "write ro-bind"))
	mustWrite(t, filepath.Join(roDir, "lib.js"), "module code\n")
}

// naiveContained checks a sandboxed runNaive: every attack contained, the
// roots and the --ro-bind path working as they should (whatever the layout).
func naiveContained(t *testing.T, f *fixture, roDir string, tr *transcript) {
	t.Helper()
	for _, a := range naiveAttacks() {
		r := tr.step(t, a.name)
		leak := a.leak(f)
		if leak == "" { // /etc/shadow unreadable here: check the marker root entries instead
			leak = "root:"
		}
		expect(t, kindContain, a.name, !strings.Contains(r.Text+r.Error, leak) && !r.succeeded(),
			"the sandboxed server reached it: %s\nstderr:\n%s", r, tr.stderr)
	}
	_, err := os.Stat(filepath.Join(f.outDir, "pwned.txt"))
	expect(t, kindContain, "write outside", os.IsNotExist(err) && !tr.step(t, "write outside").succeeded(),
		"the sandboxed write outside landed (stat: %v): %s", err, tr.step(t, "write outside"))
	expect(t, kindWorks, "list a root", tr.step(t, "ls root").succeeded() && strings.Contains(tr.step(t, "ls root").Text, "proj-alpha.txt"),
		"%s", tr.step(t, "ls root"))
	expect(t, kindWorks, "read in a root", strings.Contains(tr.step(t, "read in root").Text, "content of proj-alpha"),
		"%s", tr.step(t, "read in root"))
	expect(t, kindWorks, "read deep in a root", strings.Contains(tr.step(t, "read deep in root").Text, "# deep in proj-beta"),
		"%s", tr.step(t, "read deep in root"))
	b, err := os.ReadFile(filepath.Join(f.roots["proj-beta"], "written.txt"))
	expect(t, kindWorks, "write in a root reaches the host", err == nil && string(b) == "hello from the server",
		"host file: %q, %v; step %s", b, err, tr.step(t, "write in root"))
	expect(t, kindWorks, "--ro-bind path is readable", strings.Contains(tr.step(t, "read ro-bind").Text, "module code"),
		"%s\nstderr:\n%s", tr.step(t, "read ro-bind"), tr.stderr)
	b, _ = os.ReadFile(filepath.Join(roDir, "lib.js"))
	expect(t, kindContain, "--ro-bind path is not writable", !tr.step(t, "write ro-bind").succeeded() && string(b) == "module code\n",
		"%s; host file now %q", tr.step(t, "write ro-bind"), b)
	expect(t, kindWorks, "exec inside reads a root", strings.Contains(tr.step(t, "exec in root").Text, "content of proj-alpha"),
		"%s\nstderr:\n%s", tr.step(t, "exec in root"), tr.stderr)
}
