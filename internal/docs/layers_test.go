package docs

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/rootfs-dev/rootfs"

// TestLayers keeps the package layering of README.md's "How it is built"
// true: arrows only point down. It reads the real import graph with
// "go list -deps" (tests excluded), so a new import that breaks a rule
// fails here, whatever file it is in.
func TestLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to read the import graph")
	}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Deps", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deps := map[string][]string{}
	dec := json.NewDecoder(out)
	for {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(p.ImportPath, module) {
			deps[p.ImportPath] = p.Deps
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	if len(deps) < 5 {
		t.Fatalf("go list found only %d packages of the module; the check would prove nothing", len(deps))
	}

	// rule: a package matching from must not depend on one matching to.
	rules := []struct {
		from, to, why string
	}{
		{"vfs", "mcpbridge", "the view knows nothing of MCP"},
		{"vfs", "mountmgr", "the view knows nothing of processes or the sandbox"},
		{"vfs", "cmd/", "the view is a library"},
		{"mcpbridge", "mountmgr", "the bridge knows nothing of processes or mounts"},
		{"mcpbridge", "cmd/", "the bridge is a library"},
		{"mountmgr", "mcpbridge", "the sandbox knows nothing of MCP"},
		{"mountmgr", "cmd/", "the sandbox is a library"},
		{"internal/", "vfs", "internal/ is the bottom layer"},
		{"internal/", "mcpbridge", "internal/ is the bottom layer"},
		{"internal/", "mountmgr", "internal/ is the bottom layer"},
		{"internal/", "cmd/", "internal/ is the bottom layer"},
		{"", "cmd/", "nothing imports a command"},
	}
	match := func(pkg, pattern string) bool {
		rel, ok := strings.CutPrefix(pkg, module+"/")
		if !ok {
			return false
		}
		if strings.HasSuffix(pattern, "/") {
			return strings.HasPrefix(rel, pattern)
		}
		return rel == pattern || strings.HasPrefix(rel, pattern+"/")
	}
	for pkg, ds := range deps {
		for _, d := range ds {
			for _, r := range rules {
				if r.from != "" && !match(pkg, r.from) {
					continue
				}
				if r.from == "" && match(pkg, "cmd/") {
					continue // a command's own packages may import each other
				}
				if match(d, r.to) && !(r.to == "cmd/" && r.from == "" && match(pkg, "cmd/")) {
					t.Errorf("%s imports %s (directly or not): %s", strings.TrimPrefix(pkg, module+"/"), strings.TrimPrefix(d, module+"/"), r.why)
				}
			}
		}
	}
}
