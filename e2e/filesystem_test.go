package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// filesystemSteps drives server-filesystem through its tools with two roots,
// then changes the roots (beta out, gamma in) and checks again.
func filesystemSteps(f *fixture, p paths) []step {
	dirs := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, p.in(n))
		}
		return out
	}
	return []step{
		until("allowed", "list_allowed_directories", nil, dirs("proj-alpha", "proj-beta"), nil),
		call("read", "read_text_file", map[string]any{"path": p.in("proj-alpha", "proj-alpha.txt")}),
		call("read multiple", "read_multiple_files", map[string]any{"paths": []string{
			p.in("proj-alpha", "proj-alpha.txt"), p.in("proj-beta", "sub", "deep.md")}}),
		call("write", "write_file", map[string]any{"path": p.in("proj-alpha", "notes.txt"), "content": "one\ntwo\n"}),
		call("overwrite", "write_file", map[string]any{"path": p.in("proj-alpha", "notes.txt"), "content": "one\ntwo\nthree\n"}),
		call("edit", "edit_file", map[string]any{"path": p.in("proj-alpha", "notes.txt"),
			"edits": []map[string]any{{"oldText": "two", "newText": "TWO"}}}),
		call("mkdir", "create_directory", map[string]any{"path": p.in("proj-alpha", "made", "here")}),
		call("move", "move_file", map[string]any{"source": p.in("proj-alpha", "notes.txt"), "destination": p.in("proj-alpha", "made", "moved.txt")}),
		call("list", "list_directory", map[string]any{"path": p.in("proj-beta")}),
		call("tree", "directory_tree", map[string]any{"path": p.in("proj-beta")}),
		call("sizes", "list_directory_with_sizes", map[string]any{"path": p.in("proj-beta"), "sortBy": "size"}),
		call("media", "read_media_file", map[string]any{"path": p.in("proj-beta", "proj-beta.txt")}),
		call("info", "get_file_info", map[string]any{"path": p.in("proj-beta", "proj-beta.txt")}),
		call("search", "search_files", map[string]any{"path": p.in("proj-alpha"), "pattern": "**/*.txt"}),
		// Out of bounds: a host path, dot-dot tricks, symlinks that point out.
		call("outside host path", "read_text_file", map[string]any{"path": f.secret}),
		call("outside dot-dot", "read_text_file", map[string]any{"path": p.raw("proj-alpha", "../../outside/secret.txt")}),
		call("outside dot-dot above /", "read_text_file", map[string]any{"path": "/../../../.." + f.secret}),
		call("outside symlink", "read_text_file", map[string]any{"path": p.in("proj-alpha", "escape")}),
		call("outside dir symlink", "read_text_file", map[string]any{"path": p.in("proj-alpha", "up", "secret.txt")}),
		call("outside /etc/shadow", "read_text_file", map[string]any{"path": "/etc/shadow"}),
		call("outside write", "write_file", map[string]any{"path": filepath.Join(f.outDir, "fs-pwned.txt"), "content": "x"}),
		// The client changes its roots; the server re-fetches without restarting.
		setRoots("change roots", f.rootsFor("proj-alpha", "proj-gamma"), 1),
		until("allowed after change", "list_allowed_directories", nil, dirs("proj-alpha", "proj-gamma"), dirs("proj-beta")),
		call("read new root", "read_text_file", map[string]any{"path": p.in("proj-gamma", "proj-gamma.txt")}),
		call("write new root", "write_file", map[string]any{"path": p.in("proj-gamma", "g.txt"), "content": "gamma"}),
		call("read removed root", "read_text_file", map[string]any{"path": p.in("proj-beta", "proj-beta.txt")}),
		call("list removed root", "list_directory", map[string]any{"path": p.in("proj-beta")}),
	}
}

// TestServerFilesystem is case 1 of issue 5: the official TS client drives
// @modelcontextprotocol/server-filesystem through rootfs run with two roots.
// The negative control runs it directly: it then reports host paths, which
// the translated-roots assertion must reject.
func TestServerFilesystem(t *testing.T) {
	node := nodeBin(t)
	server := []string{node, serverFilesystemJS()}

	// Each mode gets its own fixture: the steps change the files.
	t.Run("direct", func(t *testing.T) {
		f := newFixture(t, "proj-alpha", "proj-beta", "proj-gamma")
		p := paths{f: f}
		tr := runTS(t, server, scenario{Roots: f.rootsFor("proj-alpha", "proj-beta"), Steps: filesystemSteps(f, p)})
		r := tr.step(t, "allowed")
		expect(t, kindControl, "allowed directories are host paths without rootfs",
			r.Satisfied && strings.Contains(r.Text, f.base), "%s", r)
	})

	t.Run("rootfs", func(t *testing.T) {
		rootfs := buildRootfs(t)
		f := newFixture(t, "proj-alpha", "proj-beta", "proj-gamma")
		p := paths{f: f, wrapped: true}
		tr := runTS(t, wrap(rootfs, nodeFlags(), server...), scenario{Roots: f.rootsFor("proj-alpha", "proj-beta"), Steps: filesystemSteps(f, p)})
		works := func(label, what string, ok bool) {
			t.Helper()
			r := tr.step(t, label)
			expect(t, kindWorks, what, r.succeeded() && ok, "%s\nstderr:\n%s", r, tr.stderr)
		}
		fails := func(label, what string) {
			t.Helper()
			r := tr.step(t, label)
			expect(t, kindContain, what, !r.succeeded() && !strings.Contains(r.Text+r.Error, f.token) && !strings.Contains(r.Text, "root:"),
				"%s", r)
		}

		r := tr.step(t, "allowed")
		expect(t, kindWorks, "list_allowed_directories shows the translated roots",
			r.Satisfied && r.Text == "Allowed directories:\n"+p.in("proj-alpha")+"\n"+p.in("proj-beta"), "%s\nstderr:\n%s", r, tr.stderr)
		if flatLayout() {
			expect(t, kindContain, "list_allowed_directories shows no host path", !strings.Contains(r.Text, f.base), "%s", r)
		}

		works("read", "read_text_file", strings.Contains(tr.step(t, "read").Text, "content of proj-alpha"))
		works("read multiple", "read_multiple_files", strings.Contains(tr.step(t, "read multiple").Text, "# deep in proj-beta"))
		works("write", "write_file (new file)", true)
		works("overwrite", "write_file (atomic replace of an existing file)", true)
		works("edit", "edit_file", true)
		works("mkdir", "create_directory", true)
		works("move", "move_file", true)
		b, err := os.ReadFile(filepath.Join(f.roots["proj-alpha"], "made", "moved.txt"))
		expect(t, kindWorks, "write+edit+move land on the host", err == nil && string(b) == "one\nTWO\nthree\n", "host: %q %v", b, err)
		_, err = os.Stat(filepath.Join(f.roots["proj-alpha"], "notes.txt"))
		expect(t, kindWorks, "move removed the source on the host", os.IsNotExist(err), "stat: %v", err)
		works("list", "list_directory", strings.Contains(tr.step(t, "list").Text, "[FILE] proj-beta.txt"))
		works("tree", "directory_tree", strings.Contains(tr.step(t, "tree").Text, "deep.md"))
		works("sizes", "list_directory_with_sizes", strings.Contains(tr.step(t, "sizes").Text, "proj-beta.txt"))
		works("media", "read_media_file", true)
		works("info", "get_file_info", strings.Contains(tr.step(t, "info").Text, "size"))
		works("search", "search_files", strings.Contains(tr.step(t, "search").Text, p.in("proj-alpha", "proj-alpha.txt")) &&
			strings.Contains(tr.step(t, "search").Text, p.in("proj-alpha", "made", "moved.txt")))

		fails("outside host path", "server-filesystem: host path outside the roots")
		fails("outside dot-dot", "server-filesystem: dot-dot out of a root")
		fails("outside dot-dot above /", "server-filesystem: dot-dot above /")
		fails("outside symlink", "server-filesystem: absolute symlink pointing out")
		fails("outside dir symlink", "server-filesystem: relative dir symlink pointing out")
		fails("outside /etc/shadow", "server-filesystem: /etc/shadow")
		fails("outside write", "server-filesystem: write outside")
		_, err = os.Stat(filepath.Join(f.outDir, "fs-pwned.txt"))
		expect(t, kindContain, "server-filesystem: nothing written outside", os.IsNotExist(err), "stat: %v", err)

		r = tr.step(t, "allowed after change")
		expect(t, kindWorks, "roots change reaches the server without restart",
			r.Satisfied && r.Text == "Allowed directories:\n"+p.in("proj-alpha")+"\n"+p.in("proj-gamma"), "%s\nstderr:\n%s", r, tr.stderr)
		works("read new root", "the new root reads", strings.Contains(tr.step(t, "read new root").Text, "content of proj-gamma"))
		works("write new root", "the new root writes", true)
		fails("read removed root", "the removed root is gone (read)")
		fails("list removed root", "the removed root is gone (list)")
	})
}

// TestServerEverything is case 3: server-everything's get-roots-list shows
// the translated roots (and, as negative control, host URIs when run
// directly), before and after a roots change.
func TestServerEverything(t *testing.T) {
	node := nodeBin(t)
	f := newFixture(t, "proj-alpha", "proj-beta")
	server := []string{node, serverEverythingJS(), "stdio"}
	steps := func(alpha, beta string) []step {
		return []step{
			until("roots", "get-roots-list", nil, []string{"(2 total)", alpha, beta}, nil),
			setRoots("change", f.rootsFor("proj-beta"), 1),
			until("roots after change", "get-roots-list", nil, []string{"(1 total)", beta}, []string{alpha}),
		}
	}

	t.Run("direct", func(t *testing.T) {
		tr := runTS(t, server, scenario{Roots: f.rootsFor("proj-alpha", "proj-beta"),
			Steps: steps("URI: file://"+f.roots["proj-alpha"], "URI: file://"+f.roots["proj-beta"])})
		r := tr.step(t, "roots")
		expect(t, kindControl, "get-roots-list shows host URIs without rootfs", r.Satisfied && strings.Contains(r.Text, f.base), "%s", r)
	})

	t.Run("rootfs", func(t *testing.T) {
		rootfs := buildRootfs(t)
		tr := runTS(t, wrap(rootfs, nodeFlags(), server...), scenario{Roots: f.rootsFor("proj-alpha", "proj-beta"),
			Steps: steps("URI: "+f.vuri("proj-alpha")+"\n", "URI: "+f.vuri("proj-beta")+"\n")})
		r := tr.step(t, "roots")
		expect(t, kindWorks, "get-roots-list shows translated roots with names", r.Satisfied &&
			strings.Contains(r.Text, "1. Root proj-alpha\n   URI: "+f.vuri("proj-alpha")) && strings.Contains(r.Text, "Root proj-beta"),
			"%s\nstderr:\n%s", r, tr.stderr)
		if flatLayout() {
			expect(t, kindContain, "get-roots-list shows no host path", !strings.Contains(r.Text, f.base), "%s", r)
		}
		r = tr.step(t, "roots after change")
		expect(t, kindWorks, "get-roots-list follows list_changed", r.Satisfied, "%s\nstderr:\n%s", r, tr.stderr)
	})
}
