package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/tailscale/hujson"
)

// Each client's own configuration file, as a user has it (comments, env
// blocks, the client's variables), is wrapped by "rootfs wrap"; then every
// stdio server in the wrapped file is started exactly as that client
// starts it (the command and arguments after the client's own variable
// expansion, the env block over the client's environment, the working
// directory the client gives it, the roots it declares), and a real MCP
// client (the TypeScript SDK) lists its tools and reads a file in the
// project. The servers: server-filesystem given the project as an
// argument, a node script named by its path in the project, a Python
// server in a venv outside the project, and server-memory from npx, whose
// graph must survive a restart (npm's cache served by a local registry).

// clientFormat is how one client keeps and starts its servers.
type clientFormat struct {
	name string // rootfs wrap --client NAME
	file string // the config file, relative to home or project ("~/" or "./")
	toml bool
	key  string // the servers' table
	// expand replaces the client's variables in a command, argument or env
	// value; nil: the client expands none.
	expand func(s, project, home string, env map[string]string) string
	// roots the client declares (nil: no roots capability).
	roots func(project string) []mcpRoot
}

var envVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

func clientFormats() []clientFormat {
	vscodeLike := func(s, project, home string, env map[string]string) string {
		s = strings.NewReplacer("${workspaceFolder}", project, "${userHome}", home).Replace(s)
		return regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}`).ReplaceAllStringFunc(s, func(m string) string {
			return env[m[6:len(m)-1]]
		})
	}
	shellLike := func(s, project, home string, env map[string]string) string {
		return envVar.ReplaceAllStringFunc(s, func(m string) string {
			sub := envVar.FindStringSubmatch(m)
			if v, ok := env[sub[1]]; ok {
				return v
			}
			return sub[3]
		})
	}
	projectRoot := func(project string) []mcpRoot { return []mcpRoot{{URI: "file://" + project, Name: "project"}} }
	return []clientFormat{
		{"vscode", "./.vscode/mcp.json", false, "servers", vscodeLike, projectRoot},
		{"claude-code", "./.mcp.json", false, "mcpServers", shellLike, nil},
		{"cursor", "~/.cursor/mcp.json", false, "mcpServers", vscodeLike, projectRoot},
		{"gemini", "~/.gemini/settings.json", false, "mcpServers", shellLike, projectRoot},
		{"codex", "~/.codex/config.toml", true, "mcp_servers", nil, nil},
	}
}

// clientServer is one server of a test config, before wrapping.
type clientServer struct {
	name    string
	command string
	args    []string
	env     map[string]string
	// tool and arguments that read the project's file, and what it holds.
	tool string
	arg  string
}

// configText writes servers in the client's own syntax, with a comment
// and an env block.
func configText(f clientFormat, servers []clientServer) string {
	if f.toml {
		var b strings.Builder
		b.WriteString("# Codex configuration\nmodel = \"o4\"\n")
		for _, s := range servers {
			b.WriteString("\n# " + s.name + ", from the README\n[mcp_servers." + s.name + "]\n")
			q, _ := json.Marshal(s.command)
			b.WriteString("command = " + string(q) + "\n")
			qa, _ := json.Marshal(s.args)
			b.WriteString("args = " + string(qa) + "\n")
			if len(s.env) > 0 {
				qe, _ := json.Marshal(s.env)
				b.WriteString("env = " + strings.NewReplacer(`":"`, `" = "`).Replace(strings.Replace(string(qe), "{", "{ ", 1)) + "\n")
			}
		}
		return b.String()
	}
	var b strings.Builder
	b.WriteString("// " + f.name + " settings (JSON with comments)\n{\n  \"" + f.key + "\": {\n")
	for i, s := range servers {
		q, _ := json.Marshal(s.command)
		qa, _ := json.Marshal(s.args)
		b.WriteString("    // " + s.name + "\n    \"" + s.name + "\": {\n      \"command\": " + string(q) + ",\n      \"args\": " + string(qa))
		if len(s.env) > 0 {
			qe, _ := json.Marshal(s.env)
			b.WriteString(",\n      \"env\": " + string(qe))
		}
		b.WriteString("\n    }")
		if i < len(servers)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

type startedEntry struct {
	Command string            `json:"command" toml:"command"`
	Args    []string          `json:"args" toml:"args"`
	Env     map[string]string `json:"env" toml:"env"`
	Cwd     string            `json:"cwd" toml:"cwd"`
}

// readEntries reads the servers of a config file as the client does.
func readEntries(t *testing.T, f clientFormat, path string) map[string]startedEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	if f.toml {
		var doc struct {
			Servers map[string]startedEntry `toml:"mcp_servers"`
		}
		must(t, toml.Unmarshal(data, &doc))
		return doc.Servers
	}
	std, err := hujson.Standardize(data)
	must(t, err)
	var doc map[string]map[string]startedEntry
	must(t, json.Unmarshal(std, &doc))
	return doc[f.key]
}

func TestClientFormatsWrapAndStart(t *testing.T) {
	rootfs := buildRootfs(t)
	node := nodeBin(t)
	bin := t.TempDir()
	must(t, os.Symlink(rootfs, filepath.Join(bin, "rootfs")))
	path := bin + ":/usr/local/bin:/usr/bin:/bin"

	reg := localRegistry(t, lockedPackages(t))
	registry := reg.URL + "/"

	for _, f := range clientFormats() {
		t.Run(f.name, func(t *testing.T) {
			home, secret := launchHome(t)
			project := filepath.Join(home, "src", "proj")
			must(t, os.MkdirAll(project, 0o755))
			warmPackage(t, home, project, registry, memoryPkg)
			mustWrite(t, filepath.Join(project, "README.md"), "the project of "+f.name+"\n")
			script := filepath.Join(project, "tools", "server.mjs")
			esm := strings.Replace(echoJS, `const fs = require("fs");`, `import fs from "fs"; import readline from "readline";`, 1)
			writeExec(t, script, strings.Replace(esm, `require("readline")`, `readline`, 1))
			_, venv := pythonPrefix(t, filepath.Join(home, ".venvs"))
			pyServer := filepath.Join(venv, "bin", "echo-py")

			// Paths as this client's users write them.
			projArg, scriptArg := project, script
			if f.name == "vscode" {
				projArg, scriptArg = "${workspaceFolder}", "${workspaceFolder}/tools/server.mjs"
			}
			servers := []clientServer{
				{name: "filesystem", command: node, args: []string{serverFilesystemJS(), projArg}, tool: "read_text_file", arg: filepath.Join(project, "README.md")},
				{name: "script", command: "node", args: []string{scriptArg}, env: map[string]string{"GREETING": "hello"}, tool: "read", arg: filepath.Join(project, "README.md")},
				{name: "venv", command: pyServer, args: []string{}, tool: "read", arg: filepath.Join(project, "README.md")},
			}
			// server-memory from npx, its package in the npm cache: its
			// graph must outlive a restart (started below, twice).
			memory := clientServer{name: "memory", command: "npx", args: []string{"-y", memoryPkg}, env: map[string]string{"npm_config_registry": registry}}
			cfg := filepath.Join(project, strings.TrimPrefix(f.file, "./"))
			if strings.HasPrefix(f.file, "~/") {
				cfg = filepath.Join(home, f.file[2:])
			}
			all := append(append([]clientServer{}, servers...), memory)
			mustWrite(t, cfg, configText(f, all))

			cmd := exec.Command(rootfs, "wrap", "--client", f.name)
			cmd.Dir = project
			cmd.Env = []string{"HOME=" + home, "PATH=" + path, "XDG_CONFIG_HOME=", "XDG_STATE_HOME=", "CODEX_HOME="}
			out, err := cmd.CombinedOutput()
			expect(t, kindWorks, f.name+": rootfs wrap succeeds", err == nil && strings.Count(string(out), ": wrapped") == len(all), "%v\n%s", err, out)
			expect(t, kindWorks, f.name+": wrap names the project as a root from server-filesystem's argument",
				strings.Contains(string(out), "roots from its arguments (kept whatever the client sends): "+project), "%s", out)

			entries := readEntries(t, f, cfg)
			clientEnv := map[string]string{"HOME": home, "PATH": path}
			// start is how the client starts an entry: its variables
			// expanded, the env block over its own environment, in its
			// working directory, declaring its roots.
			start := func(name string, steps ...step) (*transcript, bool) {
				t.Helper()
				e, ok := entries[name]
				if !expect(t, kindWorks, f.name+"/"+name+": the wrapped entry runs rootfs", ok && filepath.Base(e.Command) == "rootfs", "%+v", e) {
					return nil, false
				}
				x := func(v string) string {
					if f.expand == nil {
						return v
					}
					return f.expand(v, project, home, clientEnv)
				}
				argv := []string{x(e.Command)}
				for _, a := range e.Args {
					argv = append(argv, x(a))
				}
				env := map[string]string{}
				for k, v := range clientEnv {
					env[k] = v
				}
				for k, v := range e.Env {
					env[k] = x(v)
				}
				cwd := project
				if e.Cwd != "" {
					cwd = x(e.Cwd)
				}
				sc := scenario{Env: env, Cwd: cwd, Steps: steps}
				if f.roots != nil {
					sc.Roots = f.roots(project)
				} else {
					sc.Capabilities, sc.Roots = map[string]any{}, []mcpRoot{}
				}
				return runTS(t, argv, sc), true
			}
			for _, s := range servers {
				tr, ok := start(s.name,
					step{"op": "listTools", "label": "tools"},
					call("read", s.tool, map[string]any{"path": s.arg}),
					call("secret", s.tool, map[string]any{"path": filepath.Join(home, ".ssh", "id_ed25519")}))
				if !ok {
					continue
				}
				tools := tr.step(t, "tools")
				expect(t, kindWorks, f.name+"/"+s.name+": starts as the client starts it and lists its tools", tools.OK && strings.Contains(tools.Text, s.tool), "%s\nstderr:\n%s", tools, tr.stderr)
				r := tr.step(t, "read")
				expect(t, kindWorks, f.name+"/"+s.name+": reads a file in the project", r.succeeded() && strings.Contains(r.Text, "the project of "+f.name), "%s\nstderr:\n%s", r, tr.stderr)
				sec := tr.step(t, "secret")
				expect(t, kindContain, f.name+"/"+s.name+": ~/.ssh stays out", !sec.succeeded() && !strings.Contains(sec.Text, secret), "%s", sec)
			}
			entity := "rootfs-e2e-" + f.name + "-" + randHex(4)
			if tr, ok := start("memory", call("create", "create_entities", map[string]any{"entities": []any{
				map[string]any{"name": entity, "entityType": "test", "observations": []string{"kept"}}}})); ok {
				expect(t, kindWorks, f.name+"/memory: create_entities", tr.step(t, "create").succeeded(), "%s\nstderr:\n%s", tr.step(t, "create"), tr.stderr)
				tr, _ = start("memory", call("read", "read_graph", nil))
				expect(t, kindWorks, f.name+"/memory: the graph survives a restart", strings.Contains(tr.step(t, "read").Text, entity), "%s\nstderr:\n%s", tr.step(t, "read"), tr.stderr)
			}
			if f.name == "vscode" {
				// Negative control: the script server started without rootfs
				// reads the key the wrapped one could not.
				direct := runTS(t, []string{node, script}, scenario{Cwd: project, Capabilities: map[string]any{}, Roots: []mcpRoot{}, Steps: []step{
					call("secret", "read", map[string]any{"path": filepath.Join(home, ".ssh", "id_ed25519")}),
				}})
				expect(t, kindControl, "without rootfs the script server reads ~/.ssh", strings.Contains(direct.step(t, "secret").Text, secret), "%s", direct.step(t, "secret"))
			}
			// Unwrap gives the file back byte for byte.
			cmd = exec.Command(rootfs, "unwrap", "--client", f.name)
			cmd.Dir = project
			cmd.Env = []string{"HOME=" + home, "PATH=" + path, "XDG_CONFIG_HOME=", "XDG_STATE_HOME=", "CODEX_HOME="}
			out, err = cmd.CombinedOutput()
			got, _ := os.ReadFile(cfg)
			expect(t, kindWorks, f.name+": unwrap restores the file byte for byte", err == nil && string(got) == configText(f, all), "%v\n%s\n%s", err, out, got)
		})
	}
}
