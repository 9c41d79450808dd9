package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A server whose own arguments name the project checks that directory
// when it starts, before any client root can arrive: the directory is a
// root from the first instruction, and stays one when the client's roots
// come. Started as Claude Code, Cursor and Gemini CLI start
// "npx -y @modelcontextprotocol/server-filesystem /home/alice/proj" (here
// from e2e/node_modules, so that no registry is needed), from a working
// directory elsewhere.
func TestArgRootsServerFilesystem(t *testing.T) {
	rootfs := buildRootfs(t)
	node := nodeBin(t)
	base := t.TempDir()
	proj := filepath.Join(base, "alice", "proj")
	other := filepath.Join(base, "alice", "other")
	elsewhere := filepath.Join(base, "elsewhere")
	secret := "secret-" + randHex(8)
	mustWrite(t, filepath.Join(proj, "a.txt"), "content of proj\n")
	mustWrite(t, filepath.Join(other, "b.txt"), "content of other\n")
	mustWrite(t, filepath.Join(base, "alice", "private.txt"), secret+"\n")
	must(t, os.MkdirAll(elsewhere, 0o755))
	server := []string{node, serverFilesystemJS(), proj}
	// The arguments name host paths: they are roots at those paths only in
	// host layout (flat layout moves every root to /NAME).
	hostLayout := append(nodeFlags(), "--layout", "host")

	for _, c := range []struct {
		name  string
		sc    scenario
		dirs  []string
		extra func(tr *transcript)
	}{
		// A client without roots (Claude Code's default).
		{"client without roots", scenario{Capabilities: map[string]any{}, Roots: []mcpRoot{}}, []string{proj}, nil},
		// A client whose roots name another folder: both are there, and
		// the server's roots/list says so.
		{"client with roots", scenario{Roots: []mcpRoot{{URI: "file://" + other, Name: "other"}}}, []string{proj, other}, nil},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			sc := c.sc
			sc.Cwd = elsewhere
			sc.Steps = []step{
				until("allowed", "list_allowed_directories", nil, c.dirs, nil),
				call("read", "read_text_file", map[string]any{"path": filepath.Join(proj, "a.txt")}),
				call("secret", "read_text_file", map[string]any{"path": filepath.Join(base, "alice", "private.txt")}),
			}
			tr := runTS(t, wrap(rootfs, hostLayout, server...), sc)
			a := tr.step(t, "allowed")
			expect(t, kindWorks, c.name+": server-filesystem started with its directory argument and lists it", a.Satisfied, "%s\nstderr:\n%s", a, tr.stderr)
			r := tr.step(t, "read")
			expect(t, kindWorks, c.name+": a file in the argument's directory reads", r.succeeded() && strings.Contains(r.Text, "content of proj"), "%s\nstderr:\n%s", r, tr.stderr)
			s := tr.step(t, "secret")
			expect(t, kindContain, c.name+": the directory above the argument stays out", !s.succeeded() && !strings.Contains(s.Text, secret), "%s", s)
		})
	}

	// Negative control: without argument roots the server finds no
	// directory at start and exits before answering, as the issue saw.
	ok, status, stderr := rawRun(t, wrap(rootfs, append(hostLayout, "--no-arg-roots", "--root", other), server...), launchEnv(elsewhere), 30*time.Second)
	expect(t, kindControl, "with --no-arg-roots server-filesystem dies at start", !ok && status != 0 && strings.Contains(stderr, proj), "ok=%v status=%d\nstderr:\n%s", ok, status, stderr)
}

// A node script named by its path in the workspace (VS Code's
// "node ${workspaceFolder}/tools/server.mjs", started in the workspace):
// the working directory is a root from the first instruction, and the
// script runs from it.
func TestArgRootsScriptInWorkspace(t *testing.T) {
	rootfs := buildRootfs(t)
	node := nodeBin(t)
	ws := filepath.Join(t.TempDir(), "ws")
	script := filepath.Join(ws, "tools", "server.mjs")
	writeExec(t, script, strings.Replace(echoJS, `const fs = require("fs");`, `import fs from "fs"; import readline from "readline";`, 1))
	// echoJS in ES module form: the require of readline becomes an import.
	data, err := os.ReadFile(script)
	must(t, err)
	must(t, os.WriteFile(script, []byte(strings.Replace(string(data), `require("readline")`, `readline`, 1)), 0o755))
	mustWrite(t, filepath.Join(ws, "data.txt"), "workspace data\n")
	tr := runTS(t, wrap(rootfs, []string{"--layout", "host"}, node, script), scenario{Cwd: ws, Capabilities: map[string]any{}, Roots: []mcpRoot{}, Steps: []step{
		{"op": "listTools", "label": "tools"},
		call("read", "read", map[string]any{"path": "data.txt"}),
	}})
	tools := tr.step(t, "tools")
	expect(t, kindWorks, "node ${workspaceFolder}/tools/server.mjs starts", tools.OK && strings.Contains(tools.Text, "read"), "%s\nstderr:\n%s", tools, tr.stderr)
	r := tr.step(t, "read")
	expect(t, kindWorks, "the server starts in the workspace and reads a relative path", r.succeeded() && strings.Contains(r.Text, "workspace data"), "%s\nstderr:\n%s", r, tr.stderr)
}

// TestArgRootsRefused: an argument naming the home directory or a
// credential directory is refused with one line and 125, unless the same
// path is given with --root.
func TestArgRootsRefused(t *testing.T) {
	rootfs := buildRootfs(t)
	home, _ := launchHome(t)
	for _, arg := range []string{home, filepath.Join(home, ".ssh"), "/"} {
		ok, status, stderr := rawRun(t, wrap(rootfs, nil, "/bin/ls", arg), launchEnv(home), 30*time.Second)
		expect(t, kindContain, "an argument naming "+arg+" is refused", !ok && status == 125 && strings.Contains(stderr, "COMMAND's argument") && strings.Count(strings.TrimSpace(stderr), "\n") == 0,
			"ok=%v status=%d stderr:\n%s", ok, status, stderr)
	}
}
