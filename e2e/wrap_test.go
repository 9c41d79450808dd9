package e2e

//lint:file-ignore SA1019 go-sdk deprecates roots (SEP-2577), but rootfs exists to enforce them and every real client still sends them until at least 2027-07-28

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tailscale/hujson"
)

// TestWrapConfig runs "rootfs wrap" on a VS Code project file (with
// comments) naming the naive server, then starts the entry exactly as the
// file now says, as a client would, with a go-sdk client: the server gets
// its roots and cannot read a host file outside them. A project file is
// shared, so the entry runs "rootfs" from PATH, where the test puts it. The
// negative control is the original entry, whose server reads that file.
// "rootfs unwrap" then restores the file byte for byte.
func TestWrapConfig(t *testing.T) {
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	f := newFixture(t, "proj-alpha")
	bin := t.TempDir()
	if err := os.Symlink(rootfs, filepath.Join(bin, "rootfs")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(filepath.ListSeparator)+os.Getenv("PATH"))

	home := t.TempDir()
	project := filepath.Join(home, "src", "app")
	cfg := filepath.Join(project, ".vscode", "mcp.json")
	orig := []byte(`{
  // The naive server reads any file it is asked for.
  "servers": {
    "naive": {
      "type": "stdio",
      "command": ` + string(hujson.String(naive)) + `,
      "args": [],
      "env": {"NAIVE_GREETING": "hello from the env block"}
    },
    "remote": {"type": "http", "url": "http://127.0.0.1:1/mcp"}
  }
}
`)
	mustWrite(t, cfg, string(orig))
	rootfsCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(rootfs, args...)
		cmd.Dir = project
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME=", "CODEX_HOME=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rootfs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	out := rootfsCmd("wrap", "--client", "vscode")
	t.Logf("rootfs wrap:\n%s", out)
	if !strings.Contains(out, "remote: left alone") {
		t.Errorf("the HTTP server was not reported as left alone:\n%s", out)
	}
	wrapped, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(wrapped, []byte("// The naive server")) {
		t.Errorf("the comment was lost:\n%s", wrapped)
	}

	entry := func(data []byte) (argv, env []string) {
		std, err := hujson.Standardize(slices.Clone(data))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Servers map[string]struct {
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
			} `json:"servers"`
		}
		if err := json.Unmarshal(std, &doc); err != nil {
			t.Fatal(err)
		}
		s := doc.Servers["naive"]
		for k, v := range s.Env {
			env = append(env, k+"="+v)
		}
		return append([]string{s.Command}, s.Args...), env
	}
	start := func(argv, env []string) (*mcp.ClientSession, *tail, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		c := mcp.NewClient(&mcp.Implementation{Name: "rootfs-e2e-wrap", Version: "0.0.1"}, nil)
		c.AddRoots(&mcp.Root{URI: f.root("proj-alpha").URI, Name: "alpha"})
		stderr := newTail(64 << 10)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = project // clients start servers in the project or their own directory
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = stderr
		cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
		if err == nil {
			t.Cleanup(func() { _ = cs.Close() })
		}
		return cs, stderr, err
	}

	if strings.Contains(out, "not on your PATH") {
		t.Errorf("wrap warns that rootfs is not on PATH, though it is:\n%s", out)
	}
	argv, env := entry(wrapped)
	if argv[0] != "rootfs" || !slices.Contains(argv, "--setenv") {
		t.Fatalf("wrapped entry: %q", argv)
	}
	setenvName := runFlagSetenvName(t, rootfs)
	if !setenvName {
		// "--setenv NAME" (pass the value on) comes with the launchers
		// work; without it rootfs refuses the entry, so run it without.
		t.Logf("this rootfs has no --setenv NAME yet: running the entry without its --setenv")
		argv = slices.Delete(argv, slices.Index(argv, "--setenv"), slices.Index(argv, "--setenv")+2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("wrapped", func(t *testing.T) {
		cs, stderr, err := start(argv, env)
		if !expect(t, kindWorks, "wrapped entry: the server starts under rootfs", err == nil, "connect: %v\nstderr:\n%s", err, stderr) {
			return
		}
		text, err := pollTool(ctx, cs, "get_roots", nil, func(s string) bool { return strings.Contains(s, f.root("proj-alpha").URI) })
		expect(t, kindWorks, "wrapped entry: the client's roots reach the server", err == nil, "get_roots %q err=%v\nstderr:\n%s", text, err, stderr)
		text, isErr, err := toolText(ctx, cs, "read_file", map[string]any{"path": f.secret})
		expect(t, kindContain, "wrapped entry: a host file outside the roots is out of reach",
			(err != nil || isErr) && !strings.Contains(text, f.token), "%q isError=%v err=%v", text, isErr, err)
		if setenvName {
			text, isErr, err := toolText(ctx, cs, "exec", map[string]any{"argv": []string{"/usr/bin/printenv", "NAIVE_GREETING"}})
			expect(t, kindWorks, "wrapped entry: the env block's value reaches the server through --setenv NAME",
				err == nil && !isErr && strings.Contains(text, "hello from the env block"), "%q isError=%v err=%v", text, isErr, err)
		}
	})
	t.Run("control", func(t *testing.T) {
		argv, env := entry(orig)
		cs, stderr, err := start(argv, env)
		if err != nil {
			t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
		}
		text, isErr, err := toolText(ctx, cs, "read_file", map[string]any{"path": f.secret})
		expect(t, kindControl, "original entry: the server reads the host file",
			err == nil && !isErr && strings.Contains(text, f.token), "%q isError=%v err=%v", text, isErr, err)
	})

	rootfsCmd("unwrap", "--client", "vscode")
	if got, _ := os.ReadFile(cfg); !bytes.Equal(got, orig) {
		t.Errorf("unwrap did not restore the file:\n%s\nwant\n%s", got, orig)
	}
}

// runFlagSetenvName reports whether this rootfs accepts "--setenv NAME"
// (a name without "=", whose value rootfs passes on from its environment).
func runFlagSetenvName(t *testing.T, rootfs string) bool {
	out, _ := exec.Command(rootfs, "run", "--help").CombinedOutput()
	return strings.Contains(string(out), "--setenv NAME")
}
