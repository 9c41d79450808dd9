package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// An example is one client configuration from ../examples and the command
// line it declares.
type example struct {
	file string
	argv []string
	env  map[string]string // the client's env block for the server
}

type serverConfig struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

func examplesDir() string { return filepath.Join(repoRoot, "examples") }

func readJSON(t *testing.T, rel string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examplesDir(), rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v (keep the examples plain JSON, without comments)", rel, err)
	}
}

func oneServer(t *testing.T, rel string, servers map[string]serverConfig) example {
	t.Helper()
	if len(servers) != 1 {
		t.Fatalf("%s: want exactly one server, have %d", rel, len(servers))
	}
	for _, s := range servers {
		return example{file: rel, argv: append([]string{s.Command}, s.Args...), env: s.Env}
	}
	panic("unreachable")
}

// loadExamples parses every client configuration.
func loadExamples(t *testing.T) map[string]example {
	t.Helper()
	out := map[string]example{}

	var vscode struct {
		Servers map[string]serverConfig `json:"servers"`
	}
	readJSON(t, "vscode/.vscode/mcp.json", &vscode)
	out["vscode"] = oneServer(t, "vscode/.vscode/mcp.json", vscode.Servers)

	var desktop struct {
		MCPServers map[string]serverConfig `json:"mcpServers"`
	}
	readJSON(t, "claude-desktop/claude_desktop_config.json", &desktop)
	out["claude-desktop"] = oneServer(t, "claude-desktop/claude_desktop_config.json", desktop.MCPServers)

	var dev struct {
		RunArgs       []string `json:"runArgs"`
		CapAdd        []string `json:"capAdd"`
		SecurityOpt   []string `json:"securityOpt"`
		Customization struct {
			VSCode struct {
				MCP struct {
					Servers map[string]serverConfig `json:"servers"`
				} `json:"mcp"`
			} `json:"vscode"`
		} `json:"customizations"`
	}
	readJSON(t, "devcontainer/.devcontainer/devcontainer.json", &dev)
	out["devcontainer"] = oneServer(t, "devcontainer/.devcontainer/devcontainer.json", dev.Customization.VSCode.MCP.Servers)
	has := func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	}
	if !has(dev.RunArgs, "--device=/dev/fuse") || !has(dev.CapAdd, "SYS_ADMIN") || !has(dev.SecurityOpt, "apparmor=unconfined") {
		t.Errorf("devcontainer.json must pass /dev/fuse (runArgs, = form), capAdd SYS_ADMIN and apparmor=unconfined: %+v %+v %+v",
			dev.RunArgs, dev.CapAdd, dev.SecurityOpt)
	}

	const rel = "claude-code/claude-mcp-add.sh"
	b, err := os.ReadFile(filepath.Join(examplesDir(), rel))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "claude mcp add ") {
			continue
		}
		if strings.ContainsAny(line, `'"\$`+"`") {
			t.Fatalf("%s: keep the command free of quotes and expansions, the test splits it on spaces: %q", rel, line)
		}
		add, cmd, ok := strings.Cut(line, " -- ")
		if !ok {
			t.Fatalf("%s: no ' -- ' before the server command: %q", rel, line)
		}
		env := map[string]string{}
		fields := strings.Fields(add)
		for i := 0; i+1 < len(fields); i++ {
			if fields[i] == "-e" || fields[i] == "--env" {
				k, v, _ := strings.Cut(fields[i+1], "=")
				env[k] = v
			}
		}
		out["claude-code"] = example{file: rel, argv: strings.Fields(cmd), env: env}
		found = true
	}
	if !found {
		t.Fatalf("%s: no 'claude mcp add' line", rel)
	}
	// Every client example shows how a variable of its env block reaches
	// the server: --setenv NAME, with NAME in the env block.
	for name, ex := range out {
		var passed []string
		for i, a := range ex.argv {
			if a == "--setenv" && i+1 < len(ex.argv) && !strings.Contains(ex.argv[i+1], "=") {
				passed = append(passed, ex.argv[i+1])
			}
		}
		if len(passed) == 0 {
			t.Errorf("%s (%s): no --setenv NAME beside the env block", ex.file, name)
		}
		for _, n := range passed {
			if _, ok := ex.env[n]; !ok {
				t.Errorf("%s (%s): --setenv %s but %s is not in the env block", ex.file, name, n, n)
			}
		}
	}
	return out
}

// substitute turns an example's command line into the test machine's:
// "rootfs" is the built binary; "mcp-server-filesystem" (a global npm
// install, under /usr, bound by default) is the lockfile's copy, which needs
// a --ro-bind of e2e/node_modules; the placeholder folders are test folders.
// Anything else that looks machine-specific fails the test, so an example
// cannot drift into something the suite does not run.
func substitute(t *testing.T, ex example, rootfs, node string, folders map[string]string) []string {
	t.Helper()
	if len(ex.argv) < 3 || ex.argv[0] != "rootfs" || ex.argv[1] != "run" {
		t.Fatalf("%s: want 'rootfs run ...', have %q", ex.file, ex.argv)
	}
	out := []string{rootfs, "run"}
	out = append(out, nodeFlags()...)
	for _, a := range ex.argv[2:] {
		switch {
		case a == "mcp-server-filesystem":
			out = append(out, node, serverFilesystemJS())
		case folders[a] != "":
			out = append(out, folders[a])
		case strings.Contains(a, "${") || strings.HasPrefix(a, "/home/") || strings.HasPrefix(a, "~"):
			t.Fatalf("%s: %q has no substitution in the test; add one (and a check) to examples_test.go", ex.file, a)
		default:
			out = append(out, a)
		}
	}
	return out
}

// TestExamples runs every client configuration in ../examples, exactly as
// written but for machine paths, through rootfs with the TS client playing
// that client's part (its roots behaviour included).
func TestExamples(t *testing.T) {
	examples := loadExamples(t)
	names := make([]string, 0, len(examples))
	for n := range examples {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("examples: %v", names)

	node := nodeBin(t)
	rootfs := buildRootfs(t)
	base, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	workspace := filepath.Join(base, "workspace")
	projects := filepath.Join(base, "projects")
	mustWrite(t, filepath.Join(workspace, "README.md"), "workspace file\n")
	mustWrite(t, filepath.Join(projects, "plan.md"), "projects file\n")
	folders := map[string]string{"${containerWorkspaceFolder}": workspace, "/home/you/projects": projects}
	ws := []mcpRoot{{URI: "file://" + workspace, Name: "workspace"}}
	noRoots := map[string]any{} // a client without the roots capability

	cases := []struct {
		name, example string
		caps          any // nil: roots with listChanged
		roots         []mcpRoot
		dir, file     string // in-view folder the server must be allowed, and a file in it
		want          string
	}{
		// Each root at its own path (host layout): the server is allowed
		// the path the client named.
		{"vscode workspace roots", "vscode", nil, ws, workspace, "README.md", "workspace file"},
		{"claude code working directory", "claude-code", nil, ws, workspace, "README.md", "workspace file"},
		{"claude desktop without roots", "claude-desktop", noRoots, nil, projects, "plan.md", "projects file"},
		{"claude desktop with empty roots", "claude-desktop", nil, []mcpRoot{}, projects, "plan.md", "projects file"},
		{"devcontainer with workspace roots", "devcontainer", nil, ws, workspace, "README.md", "workspace file"},
		{"devcontainer static root only", "devcontainer", noRoots, nil, workspace, "README.md", "workspace file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ex := examples[c.example]
			argv := substitute(t, ex, rootfs, node, folders)
			t.Logf("%s: %q", ex.file, argv)
			tr := runTS(t, argv, scenario{Env: ex.env, Capabilities: c.caps, Roots: c.roots, Steps: []step{
				until("allowed", "list_allowed_directories", nil, []string{"Allowed directories:\n" + c.dir}, nil),
				call("read", "read_text_file", map[string]any{"path": c.dir + "/" + c.file}),
				call("outside", "read_text_file", map[string]any{"path": "/etc/shadow"}),
			}})
			r := tr.step(t, "allowed")
			expect(t, kindWorks, ex.file+": "+c.name+": the server is allowed "+c.dir, r.Satisfied, "%s\nstderr:\n%s", r, tr.stderr)
			r = tr.step(t, "read")
			expect(t, kindWorks, ex.file+": "+c.name+": reads inside", r.succeeded() && strings.Contains(r.Text, c.want), "%s\nstderr:\n%s", r, tr.stderr)
			r = tr.step(t, "outside")
			expect(t, kindContain, ex.file+": "+c.name+": /etc/shadow stays out", !r.succeeded() && !strings.Contains(r.Text, "root:"), "%s", r)
		})
	}
}
