package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/clientconfig"
)

// wrapHome makes a temporary home and project with a VS Code project file
// (the clientconfig fixture, with comments, env, HTTP servers and an entry
// already wrapped) and a Cursor user file, and runs the test from the
// project.
func wrapHome(t *testing.T) (vscode, cursor string, vscodeOrig, cursorOrig []byte) {
	t.Helper()
	home := t.TempDir()
	project := filepath.Join(home, "src", "app")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("CODEX_HOME", "")
	t.Setenv("XDG_STATE_HOME", "")
	vscode = filepath.Join(project, ".vscode", "mcp.json")
	cursor = filepath.Join(home, ".cursor", "mcp.json")
	var err error
	if vscodeOrig, err = os.ReadFile("../../../clientconfig/testdata/vscode-mcp.json"); err != nil {
		t.Fatal(err)
	}
	if cursorOrig, err = os.ReadFile("../../../clientconfig/testdata/cursor-mcp.json"); err != nil {
		t.Fatal(err)
	}
	for p, b := range map[string][]byte{vscode: vscodeOrig, cursor: cursorOrig} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(project)
	return vscode, cursor, vscodeOrig, cursorOrig
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWrapVSCode runs "rootfs wrap --client vscode" in a temporary home and
// project: only VS Code's file changes, a backup holds its old bytes, a
// second wrap changes nothing, and "rootfs unwrap" restores it byte for
// byte.
func TestWrapVSCode(t *testing.T) {
	vscode, cursor, vscodeOrig, cursorOrig := wrapHome(t)
	var stderr bytes.Buffer
	if code := Main([]string{"wrap", "--client", "vscode", "--rootfs", "/opt/bin/rootfs"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stderr.String()
	t.Logf("stderr:\n%s", out)
	got := readFile(t, vscode)
	if !bytes.Contains(got, []byte(`"command": "/opt/bin/rootfs"`)) || !bytes.Contains(got, []byte(`"args": ["run", "--setenv", "GITHUB_PERSONAL_ACCESS_TOKEN", "--setenv", "GITHUB_TOOLSETS", "--", "docker",`)) {
		t.Errorf("not wrapped:\n%s", got)
	}
	if !bytes.Contains(got, []byte("// The reference filesystem server")) {
		t.Error("a comment was lost")
	}
	backup := filepath.Join(os.Getenv("HOME"), ".local", "state", "rootfs", "backups", vscode)
	if b := readFile(t, backup); !bytes.Equal(b, vscodeOrig) {
		t.Error("the backup does not hold the old contents")
	}
	if ents, _ := os.ReadDir(filepath.Dir(vscode)); len(ents) != 1 {
		t.Errorf("wrap left %d files in %s, want only mcp.json", len(ents), filepath.Dir(vscode))
	}
	for _, want := range []string{
		"previous contents are in " + backup,
		"remote: left alone: a remote server (type \"http\")",
		"already: already wrapped",
		"filesystem: wrapped",
		"Restart the clients",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if b := readFile(t, cursor); !bytes.Equal(b, cursorOrig) {
		t.Error("--client vscode changed Cursor's file")
	}

	stderr.Reset()
	if code := Main([]string{"wrap", "--client", "vscode", "--rootfs", "/opt/bin/rootfs"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("second wrap: exit %d: %s", code, stderr.String())
	}
	if b := readFile(t, vscode); !bytes.Equal(b, got) {
		t.Error("a second wrap changed the file")
	}
	if !strings.Contains(stderr.String(), "nothing to change") {
		t.Errorf("second wrap did not say nothing changed:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "Restart") {
		t.Errorf("second wrap changed nothing but asks for a restart:\n%s", stderr.String())
	}

	stderr.Reset()
	if code := Main([]string{"unwrap", "--client", "vscode"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("unwrap: exit %d: %s", code, stderr.String())
	}
	// The fixture's own "already" entry is unwrapped too; everything else
	// is back byte for byte.
	want, _, err := clientconfig.Rewrite(vscodeOrig, clientconfig.JSONC, []string{"/servers"}, clientconfig.Unwrap, clientconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b := readFile(t, vscode); !bytes.Equal(b, want) {
		t.Errorf("unwrap did not restore the file:\n%s\nwant\n%s", b, want)
	}
}

// TestWrapDryRun: --dry-run prints a unified diff on stdout and writes
// nothing, not even a backup; without --client it finds both clients.
func TestWrapDryRun(t *testing.T) {
	vscode, cursor, vscodeOrig, cursorOrig := wrapHome(t)
	var stdout, stderr bytes.Buffer
	o := WrapOptions{DryRun: true, Rootfs: "/opt/bin/rootfs"}
	if err := runWrap(context.Background(), clientconfig.Wrap, o, &stdout, &stderr); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	diff := stdout.String()
	for _, want := range []string{"--- " + vscode, "+++ " + vscode, "--- " + cursor, `-      "command": "npx",`, `+      "command": "/opt/bin/rootfs",`} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, diff)
		}
	}
	if !bytes.Equal(readFile(t, vscode), vscodeOrig) || !bytes.Equal(readFile(t, cursor), cursorOrig) {
		t.Error("--dry-run changed a file")
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("HOME"), ".local", "state")); err == nil {
		t.Error("--dry-run made a backup")
	}
}

// TestWrapDefaultRootfs: without --rootfs, a project file (which others
// check out on their machines) names "rootfs", and the user's own file names
// this binary by an absolute path, so a client with a minimal PATH still
// finds it; though this binary (the test binary) is not named rootfs, a
// second wrap sees its entries as wrapped and unwrap restores both files.
// With no rootfs on PATH, wrap warns in one line that the project file's
// command will not be found.
func TestWrapDefaultRootfs(t *testing.T) {
	vscode, cursor, vscodeOrig, cursorOrig := wrapHome(t)
	t.Setenv("PATH", t.TempDir()) // no rootfs here
	var stderr bytes.Buffer
	if code := Main([]string{"wrap"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	t.Logf("stderr:\n%s", stderr.String())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	project, user := readFile(t, vscode), readFile(t, cursor)
	if !bytes.Contains(project, []byte(`"command": "rootfs", "args": ["run", "--", "mcp-server-memory"]`)) || bytes.Contains(project, []byte(exe)) {
		t.Errorf("the project file's command is not \"rootfs\":\n%s", project)
	}
	// The fixture's entry that an earlier wrap wrote with an absolute path
	// gets the bare name too.
	if bytes.Contains(project, []byte(`"/usr/local/bin/rootfs"`)) || !strings.Contains(stderr.String(), `runs "rootfs" from PATH instead of /usr/local/bin/rootfs`) {
		t.Errorf("the project file's absolute rootfs path stayed:\n%s", project)
	}
	if !bytes.Contains(user, []byte(`"command": "`+exe+`"`)) {
		t.Errorf("the user file's command is not %s:\n%s", exe, user)
	}
	if n := strings.Count(stderr.String(), `warning: shared files now run "rootfs", which is not on your PATH`); n != 1 {
		t.Errorf("%d warnings that rootfs is not on PATH, want 1:\n%s", n, stderr.String())
	}
	stderr.Reset()
	if code := Main([]string{"wrap"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !bytes.Equal(readFile(t, vscode), project) || !bytes.Equal(readFile(t, cursor), user) {
		t.Errorf("a second wrap changed a file:\n%s", stderr.String())
	}
	if code := Main([]string{"unwrap"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for p, orig := range map[string][]byte{vscode: vscodeOrig, cursor: cursorOrig} {
		want, _, _ := clientconfig.Rewrite(orig, clientconfig.JSONC, []string{"/servers", "/mcpServers"}, clientconfig.Unwrap, clientconfig.Options{})
		if got := readFile(t, p); !bytes.Equal(got, want) {
			t.Errorf("unwrap did not restore %s:\n%s", p, got)
		}
	}
}

// TestWrapRootfsOnPath: with a rootfs on PATH, wrap writes "rootfs" into
// the project file and does not warn; a user file inside a git work tree
// (a dotfiles repository holding $XDG_CONFIG_HOME) is shared too.
func TestWrapRootfsOnPath(t *testing.T) {
	vscode, _, vscodeOrig, _ := wrapHome(t)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "rootfs"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	dotfiles := filepath.Join(os.Getenv("HOME"), "dotfiles")
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dotfiles, "config"))
	userFile := filepath.Join(dotfiles, "config", "Code", "User", "mcp.json")
	for _, p := range []string{filepath.Join(dotfiles, ".git", "HEAD"), userFile} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(userFile, vscodeOrig, 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := Main([]string{"wrap", "--client", "vscode"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, p := range []string{vscode, userFile} {
		if got := readFile(t, p); !bytes.Contains(got, []byte(`"command": "rootfs", "args": ["run", "--", "mcp-server-memory"]`)) {
			t.Errorf("%s: the command is not \"rootfs\":\n%s", p, got)
		}
	}
	if strings.Contains(stderr.String(), "warning") {
		t.Errorf("warned with rootfs on PATH:\n%s", stderr.String())
	}
}

// TestWrapErrors: an unknown client is a usage error (2); no configuration
// anywhere is an error (1) that says where it looked.
func TestWrapErrors(t *testing.T) {
	wrapHome(t)
	var stderr bytes.Buffer
	if code := Main([]string{"wrap", "--client", "emacs"}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), `unknown client "emacs"`) {
		t.Errorf("unknown client: exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	if code := Main([]string{"wrap", "--client", "codex"}, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "no MCP client configuration found") || !strings.Contains(stderr.String(), "config.toml") {
		t.Errorf("no config: exit %d: %s", code, stderr.String())
	}
}

// TestWrapBackupOutsideGit: in a project that is a git work tree, wrap and
// unwrap leave git nothing new to report but the changed file: the backup
// goes to $XDG_STATE_HOME/rootfs/backups, at the file's path, and unwrap
// still gives back the committed bytes. A backup an older rootfs left
// beside the file is pointed out.
func TestWrapBackupOutsideGit(t *testing.T) {
	gitTool, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	vscode, _, orig, _ := wrapHome(t)
	state := filepath.Join(t.TempDir(), "state")
	t.Setenv("XDG_STATE_HOME", state)
	project := filepath.Dir(filepath.Dir(vscode))
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gitTool, append([]string{"-C", project, "-c", "user.name=t", "-c", "user.email=t@example.org"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("add", ".vscode/mcp.json")
	git("commit", "-q", "-m", "mcp")
	// Unwrap the fixture's own wrapped entries first, so that the round
	// trip below starts from bytes wrap and unwrap give back exactly.
	var stderr bytes.Buffer
	if code := Main([]string{"unwrap", "--client", "vscode"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("unwrap: exit %d: %s", code, stderr.String())
	}
	git("commit", "-q", "-am", "unwrapped")
	committed := readFile(t, vscode)
	if bytes.Equal(committed, orig) {
		t.Fatal("fixture: unwrap changed nothing")
	}
	if err := os.WriteFile(vscode+clientconfig.LegacyBackupSuffix, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := Main([]string{"wrap", "--client", "vscode"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("wrap: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "note: "+vscode+clientconfig.LegacyBackupSuffix+" is an older rootfs backup") {
		t.Errorf("the older backup beside the file is not pointed out:\n%s", stderr.String())
	}
	os.Remove(vscode + clientconfig.LegacyBackupSuffix)
	if st := git("status", "--porcelain", "--untracked-files=all"); st != " M .vscode/mcp.json\n" {
		t.Errorf("git status after wrap:\n%s", st)
	}
	backup := clientconfig.BackupPath(filepath.Join(state, "rootfs", "backups"), vscode)
	if b := readFile(t, backup); !bytes.Equal(b, committed) {
		t.Errorf("%s does not hold the committed bytes", backup)
	}
	if code := Main([]string{"unwrap", "--client", "vscode"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("unwrap: exit %d: %s", code, stderr.String())
	}
	if st := git("status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("git status after unwrap:\n%s", st)
	}
	if !bytes.Equal(readFile(t, vscode), committed) {
		t.Error("unwrap did not give back the committed bytes")
	}
}

// TestWrapShowsArgumentRoots: wrap says which of a server's arguments
// "rootfs run" will make roots, with the variables a client expands.
func TestWrapShowsArgumentRoots(t *testing.T) {
	home := t.TempDir()
	project := filepath.Join(home, "src", "app")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("CODEX_HOME", "")
	t.Setenv("XDG_STATE_HOME", "")
	if err := os.MkdirAll(filepath.Join(project, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "tools", "server.mjs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := `{"servers": {
  "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "` + project + `"]},
  "script": {"command": "node", "args": ["${workspaceFolder}/tools/server.mjs", "--data=${workspaceFolder}/tools", "/usr/share"]},
  "plain": {"command": "mcp-server-git"}
}}`
	p := filepath.Join(project, ".vscode", "mcp.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(project)
	var stderr bytes.Buffer
	if code := Main([]string{"wrap", "--client", "vscode", "--dry-run", "--rootfs", "/opt/bin/rootfs"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stderr.String()
	for _, want := range []string{
		"roots from its arguments (kept whatever the client sends): " + project + "\n",
		"roots from its arguments (kept whatever the client sends): " + filepath.Join(project, "tools") + " (${workspaceFolder}/tools)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "roots from its arguments") != 2 {
		t.Errorf("want two servers with argument roots (not node's script, not /usr/share, not a server without arguments):\n%s", out)
	}
}
