package docs

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rootfs-dev/rootfs"

// A rule says that no package matching from may depend, directly or not,
// on one matching to. A pattern ending in "/" matches everything below it;
// one ending in "$" matches that package only (mountmgr$ is the sandbox,
// not its sub-packages); any other matches the package and its
// sub-packages. A pattern whose
// first element has a dot is a full import path (another module);
// otherwise it is relative to this module. From "" is every package of the
// module outside cmd/ (a command's own packages may import each other).
//
// With tests set, the rule holds for the from packages' tests too (their
// internal and external test packages, as go list -test shows them).
// Where a rule leaves tests out, a test may cross it on purpose: mountmgr's
// sandbox tests serve a real view.
//
// at is the package in which TestLayersBite plants the deliberate
// violation (from when empty).
type rule struct {
	from, to string
	tests    bool
	why      string
	at       string
}

// goFUSE is the FUSE library: only vfs (the view), the session that
// mounts it, and cmd/ may link it.
const goFUSE = "github.com/hanwen/go-fuse/"

// cobra is the command tree: only cmd/ parses a command line.
const cobra = "github.com/spf13/cobra"

var rules = []rule{
	{from: "vfs", to: "mcpbridge", tests: true, why: "the view knows nothing of MCP"},
	{from: "vfs", to: "mountmgr", tests: true, why: "the view knows nothing of processes or the sandbox"},
	{from: "vfs", to: "cmd/", tests: true, why: "the view is a library"},
	{from: "vfs", to: "session", tests: true, why: "the view knows nothing of the session that mounts it"},
	{from: "rootset", to: "vfs", tests: true, why: "the roots table is a leaf: it needs no view"},
	{from: "rootset", to: "mcpbridge", tests: true, why: "the roots table is a leaf: it knows nothing of MCP"},
	{from: "rootset", to: "mountmgr", tests: true, why: "the roots table is a leaf: it knows nothing of processes"},
	{from: "rootset", to: "cmd/", tests: true, why: "the roots table is a library"},
	{from: "rootset", to: goFUSE, tests: true, why: "the roots table is a leaf: it links no FUSE"},
	{from: "rootset", to: "session", tests: true, why: "the roots table is a leaf: it knows nothing of sessions"},
	{from: "mcpbridge", to: "vfs", tests: true, why: "the bridge reaches the view only through its RootInstaller seam"},
	{from: "mcpbridge", to: goFUSE, tests: true, why: "the bridge links no FUSE"},
	{from: "mcpbridge", to: "mountmgr", tests: true, why: "the bridge knows nothing of processes or mounts"},
	{from: "mcpbridge", to: "cmd/", tests: true, why: "the bridge is a library"},
	{from: "mountmgr", to: "vfs", why: "the sandbox and the kernel data path take the view as an interface (kpath.View)"},
	{from: "mountmgr", to: goFUSE, why: "the sandbox, its init stage included, links no FUSE"},
	{from: "mountmgr", to: "mcpbridge", tests: true, why: "the sandbox knows nothing of MCP"},
	{from: "mountmgr", to: "cmd/", tests: true, why: "the sandbox is a library"},
	{from: "mountmgr/resolve", to: "mountmgr$", tests: true, why: "command resolution lies below the sandbox, whose init explains a failed exec with it"},
	{from: "mountmgr/resolve", to: "mountmgr/kpath", tests: true, why: "command resolution knows nothing of the kernel data path"},
	{from: "mountmgr/resolve", to: goFUSE, tests: true, why: "command resolution runs in the sandbox's init: it links no FUSE, tests included"},
	{from: "mountmgr/kpath", to: "mountmgr$", tests: true, why: "the kernel data path lies below the sandbox, whose init mounts the roots below /tmp with it"},
	{from: "mountmgr/kpath", to: "mountmgr/resolve", tests: true, why: "the kernel data path knows nothing of commands"},
	{from: "mountmgr/kpath", to: "vfs", tests: true, why: "the kernel data path takes the view as an interface (kpath.View)"},
	{from: "mountmgr/internal/", to: "mountmgr", tests: true, why: "the spec lies below the sandbox, command resolution and the kernel data path", at: "mountmgr/internal/spec"},
	{from: "mcpbridge", to: "session", tests: true, why: "the session assembles the bridge, not the other way round"},
	{from: "mountmgr", to: "session", tests: true, why: "the session starts the sandbox, not the other way round"},
	{from: "session", to: "cmd/", tests: true, why: "the session is a library: the command line fills its options"},
	{from: "session", to: cobra, tests: true, why: "the session parses no command line"},
	{from: "audit", to: "vfs", tests: true, why: "every plane reports to the audit stream; it knows none of them"},
	{from: "audit", to: "mountmgr", tests: true, why: "every plane reports to the audit stream; it knows none of them"},
	{from: "audit", to: "mcpbridge", tests: true, why: "every plane reports to the audit stream; it knows none of them"},
	{from: "audit", to: "session", tests: true, why: "the session feeds the audit stream, not the other way round"},
	{from: "audit", to: goFUSE, tests: true, why: "the audit stream links no FUSE"},
	{from: "instance", to: "session", tests: true, why: "a session serves its state through instance, which knows no session"},
	{from: "instance", to: "vfs", tests: true, why: "status and why read a session's state, never the view"},
	{from: "instance", to: goFUSE, tests: true, why: "rootfs status and why link no FUSE"},
	{from: "internal/", to: "rootset", tests: true, why: "internal/ is the bottom layer", at: "internal/linux"},
	{from: "internal/", to: "vfs", tests: true, why: "internal/ is the bottom layer", at: "internal/linux"},
	{from: "internal/", to: "mcpbridge", tests: true, why: "internal/ is the bottom layer", at: "internal/linux"},
	{from: "internal/", to: "mountmgr", tests: true, why: "internal/ is the bottom layer", at: "internal/linux"},
	{from: "internal/", to: "session", tests: true, why: "internal/ is the bottom layer", at: "internal/linux"},
	{from: "internal/", to: "cmd/", tests: true, why: "internal/ is the bottom layer", at: "internal/linux"},
	{from: "", to: "cmd/", why: "nothing imports a command", at: "mcpbridge"},
}

// TestLayers keeps the package layering of README.md's "How it is built"
// true: arrows only point down. It reads the real import graph with
// "go list -test -deps", so a new import that breaks a rule fails here,
// whatever file it is in.
func TestLayers(t *testing.T) {
	g := importGraph(t, "", module+"/...")
	if len(g.deps) < 5 {
		t.Fatalf("go list found only %d packages of the module; the check would prove nothing", len(g.deps))
	}
	for _, v := range violations(g, rules) {
		t.Error(v)
	}
}

// TestLayersBite shows that each rule fails on a deliberate violation: a
// file that exists only in go list's -overlay (nothing on disk changes)
// makes a package the rule governs import one it forbids, and the same
// graph reader and checker as TestLayers must report exactly that. A rule
// that holds for tests is shown on an external test file of its package;
// any other on a new package below it (a sub-package matches the rule as
// its parent does, and a new package can import its parent's importers
// without a cycle).
func TestLayersBite(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to read the import graph")
	}
	top, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		to := strings.TrimSuffix(strings.TrimSuffix(r.to, "/"), "$")
		switch r.to {
		case goFUSE:
			to = "go-fuse"
		case cobra:
			to = "cobra"
		}
		t.Run(cmp.Or(strings.TrimSuffix(r.from, "/"), "any")+"->"+to, func(t *testing.T) {
			at := cmp.Or(r.at, r.from)
			target := importable(r.to)
			dir, file, pkg := filepath.Join(top, at, "zzlayers"), "zz.go", module+"/"+at+"/zzlayers"
			src := fmt.Sprintf("package zzlayers\n\nimport _ %q\n", target)
			if r.tests {
				name := packageName(t, at)
				dir, file, pkg = filepath.Join(top, at), "zz_layers_test.go", module+"/"+at
				src = fmt.Sprintf("package %s_test\n\nimport _ %q\n", name, target)
			}
			tmp := t.TempDir()
			if err := os.WriteFile(filepath.Join(tmp, file), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(dir, file): filepath.Join(tmp, file)}})
			if err := os.WriteFile(filepath.Join(tmp, "overlay.json"), overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			got := violations(importGraph(t, filepath.Join(tmp, "overlay.json"), pkg), []rule{r})
			want := fmt.Sprintf("%s imports %s", rel(pkg), rel(target))
			if !slices.ContainsFunc(got, func(v string) bool {
				return strings.HasPrefix(v, want) && strings.Contains(v, " in its tests: ") == r.tests
			}) {
				t.Errorf("%s importing %s (%s): the rule %q -> %q reported %q, want %q", pkg, target, file, r.from, r.to, got, want)
			}
		})
	}
}

// graph is the module's packages and what each depends on: deps for the
// packages themselves, testDeps for each package's tests (its own
// dependencies included), where it has any.
type graph struct {
	deps, testDeps map[string][]string
}

// importGraph runs go list -test -deps on patterns (with overlay, when
// not empty) and keeps the module's packages.
func importGraph(t *testing.T, overlay string, patterns ...string) graph {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to read the import graph")
	}
	args := []string{"list", "-test", "-deps", "-json=ImportPath,ForTest,Deps"}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	cmd := exec.Command("go", append(args, patterns...)...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := graph{deps: map[string][]string{}, testDeps: map[string][]string{}}
	dec := json.NewDecoder(out)
	for {
		var p struct {
			ImportPath, ForTest string
			Deps                []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		var ds []string
		for _, d := range p.Deps {
			d, _, _ = strings.Cut(d, " ") // "pkg [pkg.test]": the package's test variant
			ds = append(ds, d)
		}
		path, _, _ := strings.Cut(p.ImportPath, " ")
		switch {
		case !strings.HasPrefix(path, module):
		case p.ForTest == "":
			if !strings.HasSuffix(path, ".test") { // the test binary's main
				g.deps[path] = ds
			}
		case path == p.ForTest || path == p.ForTest+"_test":
			// The package compiled with its tests, and its external test package.
			g.testDeps[p.ForTest] = append(g.testDeps[p.ForTest], ds...)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	return g
}

// violations returns one line for each package of g, and each of rules it
// breaks: the first dependency that breaks it, and how many more do. A
// rule broken by a package is not reported again for its tests.
func violations(g graph, rules []rule) []string {
	var out []string
	type broken struct {
		pkg string
		r   rule
	}
	seen := map[broken]bool{}
	check := func(pkg string, ds []string, tests bool) {
		for _, r := range rules {
			if tests && !r.tests || seen[broken{pkg, r}] {
				continue
			}
			if r.from != "" && !match(pkg, r.from) || r.from == "" && match(pkg, "cmd/") {
				continue
			}
			var bad []string
			for _, d := range ds {
				if d != pkg && match(d, r.to) {
					bad = append(bad, rel(d))
				}
			}
			if len(bad) == 0 {
				continue
			}
			seen[broken{pkg, r}] = true
			slices.Sort(bad)
			bad = slices.Compact(bad)
			line := rel(pkg) + " imports " + bad[0]
			if len(bad) > 1 {
				line += fmt.Sprintf(" and %d more of %s", len(bad)-1, r.to)
			}
			line += " (directly or not)"
			if tests {
				line += " in its tests"
			}
			out = append(out, line+": "+r.why)
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(g.deps)) {
		check(pkg, g.deps[pkg], false)
	}
	for _, pkg := range slices.Sorted(maps.Keys(g.testDeps)) {
		check(pkg, g.testDeps[pkg], true)
	}
	return out
}

// match reports whether the import path pkg matches pattern (see rule).
func match(pkg, pattern string) bool {
	if first, _, _ := strings.Cut(pattern, "/"); !strings.Contains(first, ".") {
		var ok bool
		if pkg, ok = strings.CutPrefix(pkg, module+"/"); !ok {
			return false
		}
	}
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(pkg, pattern)
	}
	if only, ok := strings.CutSuffix(pattern, "$"); ok {
		return pkg == only
	}
	return pkg == pattern || strings.HasPrefix(pkg, pattern+"/")
}

// importable returns a package that matches the pattern to.
func importable(to string) string {
	switch to {
	case "cmd/":
		return module + "/cmd/rootfs/cli"
	case goFUSE:
		return goFUSE + "v2/fs"
	case cobra:
		return cobra
	}
	return module + "/" + strings.TrimSuffix(to, "$")
}

// packageName returns the name of the package in the module's directory
// dir.
func packageName(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.Name}}", module+"/"+dir)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", dir, err)
	}
	return strings.TrimSpace(string(out))
}

func rel(pkg string) string { return strings.TrimPrefix(pkg, module+"/") }
