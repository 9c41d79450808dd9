//go:build linux

package e2e

//lint:file-ignore SA1019 go-sdk deprecates roots (SEP-2577), but rootfs exists to enforce them and every real client still sends them until at least 2027-07-28

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// Host layout (issue 14): under "rootfs run" each root appears at its own
// host path, below synthetic read-only directories that list only what
// leads to a root; roots under /tmp appear at their path inside the
// server's private /tmp. These tests put their roots under /tmp
// (t.TempDir, with TMPDIR forced to /tmp) and check that the paths the
// client names work unchanged while everything beside them stays out.

// hostTmp makes t.TempDir (and so every fixture) live under /tmp, the case
// issue 14 must handle: the sandbox has a private /tmp of its own.
func hostTmp(t *testing.T) {
	t.Helper()
	t.Setenv("TMPDIR", "/tmp")
}

// hostFlags asks for host layout explicitly (it is run's default; the
// default itself is checked by TestHostLayoutServerFilesystem).
func hostFlags(extra ...string) []string { return append([]string{"--layout", "host"}, extra...) }

// ancestors returns the directories above p, from / down to p's parent.
func ancestors(p string) []string {
	var out []string
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		out = append(out, d)
		if d == "/" {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) < len(out[j]) })
	return out
}

// leadsTo returns, for directory dir, the sorted names of its children that
// are or hold one of roots: all a synthetic directory of the view may list.
func leadsTo(dir string, roots ...string) []string {
	seen := map[string]bool{}
	for _, r := range roots {
		rel, err := filepath.Rel(dir, r)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		first, _, _ := strings.Cut(rel, "/")
		seen[first] = true
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// hostTopLeaks returns the names in a listing of the sandbox's / that are
// host directories the view must not show.
func hostTopLeaks(listing string) []string {
	var leaked []string
	for _, name := range strings.Split(listing, "\n") {
		switch name {
		case "home", "root", "srv", "opt", "mnt", "boot", "media", "work", "snap":
			leaked = append(leaked, name)
		}
	}
	return leaked
}

// --- 1. the TypeScript SDK client and server-filesystem --------------------------

// hostFilesystemSteps drives server-filesystem with the client's host paths:
// the roots, a read, a search, files beside and outside the roots, then a
// roots change (beta out, gamma in).
func hostFilesystemSteps(f *fixture, beside string) []step {
	p := paths{f: f} // host layout: the paths inside are the host's
	return []step{
		until("allowed", "list_allowed_directories", nil, []string{p.in("proj-alpha"), p.in("proj-beta")}, nil),
		call("read", "read_text_file", map[string]any{"path": p.in("proj-alpha", "proj-alpha.txt")}),
		call("read deep", "read_text_file", map[string]any{"path": p.in("proj-beta", "sub", "deep.md")}),
		call("search", "search_files", map[string]any{"path": p.in("proj-alpha"), "pattern": "**/*.md"}),
		call("write", "write_file", map[string]any{"path": p.in("proj-alpha", "notes.txt"), "content": "written at the host path\n"}),
		call("list parent", "list_directory", map[string]any{"path": filepath.Dir(p.in("proj-alpha"))}),
		call("beside", "read_text_file", map[string]any{"path": beside}),
		call("outside host path", "read_text_file", map[string]any{"path": f.secret}),
		call("outside symlink", "read_text_file", map[string]any{"path": p.in("proj-alpha", "escape")}),
		call("outside dir symlink", "read_text_file", map[string]any{"path": p.in("proj-alpha", "up", "secret.txt")}),
		setRoots("change roots", f.rootsFor("proj-alpha", "proj-gamma"), 1),
		until("allowed after change", "list_allowed_directories", nil, []string{p.in("proj-alpha"), p.in("proj-gamma")}, []string{p.in("proj-beta")}),
		call("read new root", "read_text_file", map[string]any{"path": p.in("proj-gamma", "proj-gamma.txt")}),
		call("read removed root", "read_text_file", map[string]any{"path": p.in("proj-beta", "proj-beta.txt")}),
	}
}

// TestHostLayoutServerFilesystem is the first case of issue 14: the official
// TypeScript SDK client drives @modelcontextprotocol/server-filesystem
// through "rootfs run" (no --layout: host is run's default) with roots under
// /tmp, and every path is the client's own. The negative control is the same
// scenario with --layout flat, where the failure shows: the allowed
// directories are /proj-alpha..., and the host paths are refused. It is also
// the check that --layout flat still gives /<name>.
func TestHostLayoutServerFilesystem(t *testing.T) {
	hostTmp(t)
	node := nodeBin(t)
	server := []string{node, serverFilesystemJS()}
	rootfs := buildRootfs(t)

	newHost := func(t *testing.T) (*fixture, string) {
		f := newFixture(t, "proj-alpha", "proj-beta", "proj-gamma")
		beside := filepath.Join(f.base, "host", "beside.txt")
		mustWrite(t, beside, f.token+" beside the roots\n")
		return f, beside
	}

	t.Run("flat", func(t *testing.T) {
		f, beside := newHost(t)
		tr := runTS(t, wrap(rootfs, append([]string{"--layout", "flat"}, nodeFlags()...), server...),
			scenario{Roots: f.rootsFor("proj-alpha", "proj-beta"), Steps: []step{
				until("allowed", "list_allowed_directories", nil, []string{"/proj-alpha", "/proj-beta"}, nil),
				call("read", "read_text_file", map[string]any{"path": filepath.Join(f.roots["proj-alpha"], "proj-alpha.txt")}),
				call("read flat", "read_text_file", map[string]any{"path": "/proj-alpha/proj-alpha.txt"}),
				call("beside", "read_text_file", map[string]any{"path": beside}),
			}})
		r := tr.step(t, "allowed")
		expect(t, kindWorks, "--layout flat still gives /<name>", r.Satisfied && r.Text == "Allowed directories:\n/proj-alpha\n/proj-beta",
			"%s\nstderr:\n%s", r, tr.stderr)
		r = tr.step(t, "read")
		expect(t, kindControl, "--layout flat: a read at the client's host path fails (issue 14's report)",
			!r.succeeded() && !strings.Contains(r.Text, "content of"), "%s", r)
		expect(t, kindWorks, "--layout flat: the read at /<name> works", strings.Contains(tr.step(t, "read flat").Text, "content of proj-alpha"),
			"%s", tr.step(t, "read flat"))
		r = tr.step(t, "beside")
		expect(t, kindContain, "--layout flat: a host file beside the roots stays out", !r.succeeded() && !strings.Contains(r.Text, f.token), "%s", r)
	})

	t.Run("host", func(t *testing.T) {
		f, beside := newHost(t)
		p := paths{f: f}
		flags := nodeFlags() // host layout is the default...
		if flatLayout() {
			flags = hostFlags(flags...) // ...which the suite's flat pass overrides
		}
		tr := runTS(t, wrap(rootfs, flags, server...), scenario{Roots: f.rootsFor("proj-alpha", "proj-beta"),
			Steps: hostFilesystemSteps(f, beside)})
		works := func(label, what string, ok bool) {
			t.Helper()
			r := tr.step(t, label)
			expect(t, kindWorks, what, r.succeeded() && ok, "%s\nstderr:\n%s", r, tr.stderr)
		}
		fails := func(label, what string) {
			t.Helper()
			r := tr.step(t, label)
			expect(t, kindContain, what, !r.succeeded() && !strings.Contains(r.Text+r.Error, f.token), "%s", r)
		}

		r := tr.step(t, "allowed")
		expect(t, kindWorks, "host layout (run's default): list_allowed_directories returns the client's host paths",
			r.Satisfied && r.Text == "Allowed directories:\n"+p.in("proj-alpha")+"\n"+p.in("proj-beta"), "%s\nstderr:\n%s", r, tr.stderr)
		works("read", "host layout: read_text_file at the client's path", strings.Contains(tr.step(t, "read").Text, "content of proj-alpha"))
		works("read deep", "host layout: read_text_file deep in a root", strings.Contains(tr.step(t, "read deep").Text, "# deep in proj-beta"))
		works("search", "host layout: search_files at the client's path returns the client's paths",
			strings.Contains(tr.step(t, "search").Text, p.in("proj-alpha", "sub", "deep.md")))
		works("write", "host layout: write_file at the client's path", true)
		b, err := os.ReadFile(p.in("proj-alpha", "notes.txt"))
		expect(t, kindWorks, "host layout: the write lands in the host root", err == nil && string(b) == "written at the host path\n", "%q %v", b, err)
		// server-filesystem refuses the parent itself (outside its allowed
		// directories); TestHostLayoutAncestors lists it with a raw server.
		fails("list parent", "host layout: server-filesystem does not list the roots' parent")
		fails("beside", "host layout: a host file beside the root is unreachable")
		fails("outside host path", "host layout: a host path outside the roots")
		fails("outside symlink", "host layout: an absolute symlink in a root naming a real host path outside")
		fails("outside dir symlink", "host layout: a relative symlink in a root pointing out")

		r = tr.step(t, "allowed after change")
		expect(t, kindWorks, "host layout: after list_changed the allowed directories are the new host paths",
			r.Satisfied && r.Text == "Allowed directories:\n"+p.in("proj-alpha")+"\n"+p.in("proj-gamma"), "%s\nstderr:\n%s", r, tr.stderr)
		works("read new root", "host layout: the new root reads at its host path", strings.Contains(tr.step(t, "read new root").Text, "content of proj-gamma"))
		fails("read removed root", "host layout: the removed root is gone")
	})
}

// --- 2. a raw server: every ancestor, roots/list verbatim ------------------------

// TestHostLayoutAncestors: the naive server (it checks nothing) lists every
// ancestor of each root from / down: each lists only the names that lead to
// a root; the roots read and write at their host paths, a file beside them
// and a directory outside them are absent, the synthetic directories are
// read-only, and the server's own roots/list answer is the client's URIs,
// names and _meta unchanged (a URI with an escaped space included). After
// the client changes roots the listings follow. As root and as nobody, on
// both data paths. The negative control is the same naive server run
// directly, which lists and reads everything beside the roots.
func TestHostLayoutAncestors(t *testing.T) {
	hostTmp(t)
	naive := buildNaive(t)
	token := "secret-" + randHex(8)
	files := map[string]string{
		"host/proj-alpha/a.txt": "content of alpha\n", "host/proj-beta/b.txt": "content of beta\n",
		"host/proj gamma/g.txt": "content of gamma\n", "host/beside.txt": token + " beside\n", "outside/secret.txt": token + "\n"}
	mkRoots := func(base string, names ...string) []*mcp.Root {
		var out []*mcp.Root
		for _, n := range names {
			u := "file://" + filepath.Join(base, "host", n)
			if n == "proj gamma" {
				u = "file://" + filepath.Join(base, "host") + "/proj%20gamma"
			}
			out = append(out, &mcp.Root{URI: u, Name: "Root " + n, Meta: mcp.Meta{"example.com/kind": "repo", "n": n}})
		}
		return out
	}

	t.Run("direct", func(t *testing.T) {
		base := dpHost(t, 0, files)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, cs, stderr, err := connectAs(t, ctx, []string{naive}, nil, mkRoots(base, "proj-alpha", "proj-beta")...)
		if err != nil {
			t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
		}
		ls, _, _ := toolText(ctx, cs, "list_dir", map[string]any{"path": filepath.Join(base, "host")})
		expect(t, kindControl, "the roots' parent lists what is beside them without rootfs",
			strings.Contains(ls, "beside.txt"), "list_dir %s: %q", filepath.Join(base, "host"), ls)
		text, _, _ := toolText(ctx, cs, "read_file", map[string]any{"path": filepath.Join(base, "host", "beside.txt")})
		expect(t, kindControl, "a file beside the roots reads without rootfs", strings.Contains(text, token), "%q", text)
		ls, _, _ = toolText(ctx, cs, "list_dir", map[string]any{"path": "/"})
		expect(t, kindControl, "the host's / holds more than the path to the roots", len(hostTopLeaks(ls)) > 0, "%q", ls)
	})

	for _, m := range nestedModes(t) {
		t.Run(m.name, func(t *testing.T) {
			rootfs := buildRootfs(t)
			base := dpHost(t, m.uid, files)
			host := filepath.Join(base, "host")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, hostFlags(m.flags...), naive), m.cred, mkRoots(base, "proj-alpha", "proj gamma")...)
			unprivilegedRefused(t, m, err, stderr)
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			text := waitRoots(t, ctx, cs, func(s string) bool { return strings.Contains(s, "proj%20gamma") }, stderr)
			var lr mcp.ListRootsResult
			_ = json.Unmarshal([]byte(text), &lr)
			want := mkRoots(base, "proj-alpha", "proj gamma")
			// _meta comes back through JSON: compare it as JSON does.
			wantJSON, _ := json.Marshal(mcp.ListRootsResult{Roots: want})
			var wantLR mcp.ListRootsResult
			_ = json.Unmarshal(wantJSON, &wantLR)
			// The order is the view's (by path), not necessarily the client's.
			byURI := func(rs []*mcp.Root) { sort.Slice(rs, func(i, j int) bool { return rs[i].URI < rs[j].URI }) }
			byURI(lr.Roots)
			byURI(wantLR.Roots)
			expect(t, kindWorks, "host layout: the server's roots/list is the client's URIs, names and _meta unchanged ("+m.name+")",
				reflect.DeepEqual(lr.Roots, wantLR.Roots), "got %s\nwant %s\nstderr:\n%s", text, wantJSON, stderr)

			check := func(when string, rootNames ...string) {
				t.Helper()
				var rootPaths []string
				for _, n := range rootNames {
					rootPaths = append(rootPaths, filepath.Join(host, n))
				}
				for _, d := range ancestors(rootPaths[0]) {
					ls, isErr, err := toolText(ctx, cs, "list_dir", map[string]any{"path": d})
					if d == "/" {
						leaked := hostTopLeaks(ls)
						expect(t, kindContain, "host layout: / holds the runtime and the way to the roots, no other host directory ("+when+", "+m.name+")",
							err == nil && !isErr && len(leaked) == 0 && strings.Contains("\n"+ls+"\n", "\ntmp\n"),
							"list_dir /: %q isError=%v err=%v, host names %q\nstderr:\n%s", ls, isErr, err, leaked, stderr)
						continue
					}
					if d == "/tmp" {
						// The server's own tmpfs: the way to the roots, what
						// the server wrote there (own.txt) and COMMAND's
						// directory (the test's build directory, bound);
						// nothing else of the host's /tmp.
						ok := map[string]bool{"own.txt": true, filepath.Base(binDir): true}
						var other []string
						for _, n := range strings.Split(ls, "\n") {
							if !ok[n] && !slices.Contains(leadsTo(d, rootPaths...), n) {
								other = append(other, n)
							}
						}
						expect(t, kindContain, "host layout: /tmp holds the way to the roots and nothing else of the host's /tmp ("+when+", "+m.name+")",
							err == nil && !isErr && len(other) == 0 && slices.Contains(strings.Split(ls, "\n"), leadsTo(d, rootPaths...)[0]),
							"list_dir /tmp: %q isError=%v err=%v, unexpected %q\nstderr:\n%s", ls, isErr, err, other, stderr)
						continue
					}
					want := strings.Join(leadsTo(d, rootPaths...), "\n")
					expect(t, kindContain, "host layout: "+d+" lists only the way to the roots ("+when+", "+m.name+")",
						err == nil && !isErr && ls == want, "list_dir %s: %q isError=%v err=%v, want %q\nstderr:\n%s", d, ls, isErr, err, want, stderr)
				}
				for _, n := range rootNames {
					text, isErr, err := toolText(ctx, cs, "list_dir", map[string]any{"path": filepath.Join(host, n)})
					expect(t, kindWorks, "host layout: the root "+n+" lists at its host path ("+when+", "+m.name+")",
						err == nil && !isErr && strings.HasSuffix(text, ".txt"), "%q isError=%v err=%v\nstderr:\n%s", text, isErr, err, stderr)
				}
			}
			check("start", "proj-alpha", "proj gamma")

			// The server's /tmp stays its own: writable, holding what it
			// writes and COMMAND's directory (bound below /tmp: the test's
			// build directory), beside the first component of the roots.
			first := strings.Split(base, "/")[2]
			tmpState := func() string {
				return sh(t, ctx, cs, `touch /tmp/own.txt && echo writable; ls /tmp | grep -v '^rootfs-e2e-bin-' | tr '\n' ' '; test -x '`+naive+`' && echo command-there`)
			}
			out := tmpState()
			expect(t, kindWorks, "host layout: with roots below /tmp the server's /tmp stays its own, writable, with COMMAND's bind ("+m.name+")",
				strings.Contains(out, "writable") && strings.Contains(out, first+" own.txt ") && strings.Contains(out, "command-there"),
				"in the sandbox (want writable, %q and own.txt, command-there):\n%s\nstderr:\n%s", first, out, stderr)

			text, isErr, err := toolText(ctx, cs, "read_file", map[string]any{"path": filepath.Join(host, "proj gamma", "g.txt")})
			expect(t, kindWorks, "host layout: a root whose URI escapes a space reads at its path ("+m.name+")",
				err == nil && !isErr && text == "content of gamma\n", "%q isError=%v err=%v", text, isErr, err)
			out = sh(t, ctx, cs, `echo hi > '`+filepath.Join(host, "proj-alpha", "w.txt")+`' && echo wrote`)
			b, _ := os.ReadFile(filepath.Join(host, "proj-alpha", "w.txt"))
			expect(t, kindWorks, "host layout: a write at the host path lands in the root ("+m.name+")", string(b) == "hi\n", "%q, in the sandbox %q", b, out)

			for _, a := range []struct{ what, path string }{
				{"a file beside the root", filepath.Join(host, "beside.txt")},
				{"a file outside the roots under their common ancestor", filepath.Join(base, "outside", "secret.txt")},
			} {
				text, isErr, err := toolText(ctx, cs, "read_file", map[string]any{"path": a.path})
				expect(t, kindContain, "host layout: "+a.what+" is unreachable ("+m.name+")",
					(err != nil || isErr) && !strings.Contains(text, token), "%s: %q isError=%v err=%v", a.path, text, isErr, err)
			}
			// The synthetic directories are read-only, owned by root, 0555.
			out = sh(t, ctx, cs, `for d in '`+base+`' '`+host+`'; do stat -c '%a %u %n' "$d"; mkdir "$d/new" 2>&1; touch "$d/new.txt" 2>&1; ln -s /etc "$d/lnk" 2>&1; done; true`)
			_, e1 := os.Lstat(filepath.Join(host, "new"))
			_, e2 := os.Lstat(filepath.Join(base, "new.txt"))
			expect(t, kindContain, "host layout: the roots' ancestors are read-only, root-owned, 0555 ("+m.name+")",
				strings.Count(out, "555 0 ") == 2 && strings.Count(out, "Operation not permitted")+strings.Count(out, "Read-only file system")+strings.Count(out, "Permission denied") == 6 &&
					os.IsNotExist(e1) && os.IsNotExist(e2), "in the sandbox:\n%s", out)

			// The client changes its roots: gamma out, beta in.
			c.RemoveRoots(want[1].URI)
			c.AddRoots(mkRoots(base, "proj-beta")...)
			waitRoots(t, ctx, cs, func(s string) bool { return strings.Contains(s, "proj-beta") && !strings.Contains(s, "gamma") }, stderr)
			check("after list_changed", "proj-alpha", "proj-beta")
			text, isErr, err = toolText(ctx, cs, "read_file", map[string]any{"path": filepath.Join(host, "proj-beta", "b.txt")})
			expect(t, kindWorks, "host layout: the new root reads at its host path ("+m.name+")", err == nil && !isErr && text == "content of beta\n",
				"%q isError=%v err=%v\nstderr:\n%s", text, isErr, err, stderr)
			text, isErr, err = toolText(ctx, cs, "read_file", map[string]any{"path": filepath.Join(host, "proj gamma", "g.txt")})
			expect(t, kindContain, "host layout: the removed root is gone ("+m.name+")", (err != nil || isErr) && !strings.Contains(text, "content of"),
				"%q isError=%v err=%v", text, isErr, err)

			// Every root leaves /tmp: the server's /tmp is still its own.
			c.RemoveRoots(mkRoots(base, "proj-alpha")[0].URI, mkRoots(base, "proj-beta")[0].URI)
			waitRoots(t, ctx, cs, func(s string) bool { return !strings.Contains(s, "proj-") }, stderr)
			out = tmpState()
			expect(t, kindWorks, "host layout: once no root is below /tmp the server's /tmp is still its own ("+m.name+")",
				strings.Contains(out, "writable") && strings.Contains(out, "own.txt") && !strings.Contains(out, first) && strings.Contains(out, "command-there"),
				"in the sandbox (want writable, own.txt, no %q, command-there):\n%s\nstderr:\n%s", first, out, stderr)
		})
	}
}

// --- 3. swap under load ------------------------------------------------------------

// TestHostLayoutSwapUnderLoad is TestDataPathSwapUnderLoad in host layout: a
// process in the sandbox lists the roots' common ancestor (a synthetic
// directory under /tmp) while the client flips between two sets of roots;
// every listing is one the client had. The control flips one root per
// notification and must see mixed listings.
func TestHostLayoutSwapUnderLoad(t *testing.T) {
	hostTmp(t)
	swapUnderLoad(t, true)
}

// --- 4. the escape battery, planted symlinks, nested roots ------------------------

// TestHostLayoutNaiveAttacks runs the naive server's attacks (those of
// TestNaiveServer) in host layout, where the paths inside are the host's
// and the roots' ancestors exist: a host path beside or outside the roots
// now names a place the view has a directory for. Added to the battery are
// the ones host layout makes tempting: a file beside the root, the root's
// parent listed, a symlink in a root naming a secret in another directory
// of /tmp (as a client's scratch checkout might hold), a symlink the server
// plants naming the host secret, and a write to a host path under /tmp
// outside the roots. The negative control is the same run without rootfs.
func TestHostLayoutNaiveAttacks(t *testing.T) {
	hostTmp(t)
	naive := buildNaive(t)
	nodeBin(t)
	f := newFixture(t, "proj-alpha", "proj-beta")
	roDir := filepath.Join(f.base, "ro-extra")
	mustWrite(t, filepath.Join(roDir, "lib.js"), "module code\n")
	host := filepath.Join(f.base, "host")
	beside := filepath.Join(host, "beside.txt")
	mustWrite(t, beside, f.token+" beside the roots\n")
	// A shadow-like secret in its own directory of /tmp, and a link to it
	// in a root.
	other, err := os.MkdirTemp("/tmp", "rootfs-e2e-secret-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(other) })
	must(t, os.Chmod(other, 0o755))
	shadowToken := "shadow-" + randHex(8)
	shadow := filepath.Join(other, "shadow")
	mustWrite(t, shadow, "root:"+shadowToken+":19000:0:99999:7:::\n")
	must(t, os.Symlink(shadow, filepath.Join(f.roots["proj-alpha"], "shadow-link")))
	planted := filepath.Join(f.roots["proj-beta"], "planted")
	// (runNaive's "ls parent" lists host, the roots' parent.)
	extra := []step{
		call("beside", "read_file", map[string]any{"path": beside}),
		call("ls base", "list_dir", map[string]any{"path": f.base}),
		call("shadow link", "read_file", map[string]any{"path": filepath.Join(f.roots["proj-alpha"], "shadow-link")}),
		call("shadow direct", "read_file", map[string]any{"path": shadow}),
		call("planted link", "exec", map[string]any{"argv": []string{"/bin/sh", "-c", "ln -sfn " + f.secret + " " + planted + " && cat " + planted}}),
		call("write other tmp", "write_file", map[string]any{"path": filepath.Join(other, "pwned.txt"), "content": "pwned"}),
	}
	leaks := map[string]string{"beside": f.token, "ls parent": "beside.txt", "ls base": "outside",
		"shadow link": shadowToken, "shadow direct": shadowToken, "planted link": f.token}
	order := []string{"beside", "ls parent", "ls base", "shadow link", "shadow direct", "planted link"}

	t.Run("direct", func(t *testing.T) {
		tr := runNaive(t, f, roDir, []string{naive}, paths{f: f}, extra...)
		naiveControls(t, f, roDir, tr)
		for _, label := range order {
			r := tr.step(t, label)
			expect(t, kindControl, "host layout attack: "+label, r.succeeded() && strings.Contains(r.Text, leaks[label]),
				"the naive server without rootfs should reach it: %s", r)
		}
		_, err := os.Stat(filepath.Join(other, "pwned.txt"))
		expect(t, kindControl, "host layout attack: write to a host path in another /tmp directory", err == nil, "stat: %v", err)
		_ = os.Remove(filepath.Join(other, "pwned.txt"))
	})

	t.Run("rootfs", func(t *testing.T) {
		rootfs := buildRootfs(t)
		tr := runNaive(t, f, roDir, wrap(rootfs, hostFlags("--ro-bind", roDir), naive), paths{f: f}, extra...)
		naiveContained(t, f, roDir, tr)
		for _, label := range order {
			r := tr.step(t, label)
			if strings.HasPrefix(label, "ls ") { // a synthetic directory lists, without what is beside
				expect(t, kindContain, "host layout attack: "+label, r.succeeded() && !strings.Contains(r.Text, leaks[label]),
					"%s\nstderr:\n%s", r, tr.stderr)
				continue
			}
			expect(t, kindContain, "host layout attack: "+label, !r.succeeded() && !strings.Contains(r.Text+r.Error, leaks[label]),
				"the sandboxed server reached it: %s\nstderr:\n%s", r, tr.stderr)
		}
		r := tr.step(t, "ls parent")
		expect(t, kindContain, "host layout: the roots' parent lists exactly the roots", r.Text == "proj-alpha\nproj-beta", "%s", r)
		r = tr.step(t, "ls base")
		expect(t, kindContain, "host layout: their common ancestor lists the way to the roots and the --ro-bind path", r.Text == "host\nro-extra", "%s", r)
		_, err := os.Stat(filepath.Join(other, "pwned.txt"))
		expect(t, kindContain, "host layout attack: write to a host path in another /tmp directory", os.IsNotExist(err), "stat: %v; %s", err, tr.step(t, "write other tmp"))

		r = tr.step(t, "roots")
		var lr struct {
			Roots []mcpRoot `json:"roots"`
		}
		_ = json.Unmarshal([]byte(r.Text), &lr)
		expect(t, kindWorks, "host layout: roots/list returns the client's URIs and names",
			reflect.DeepEqual(lr.Roots, f.rootsFor("proj-alpha", "proj-beta")), "%s\nstderr:\n%s", r, tr.stderr)
		r = tr.step(t, "ls /")
		leaked := hostTopLeaks(r.Text)
		expect(t, kindContain, "host layout: / holds the runtime and tmp, no other host directory",
			r.succeeded() && len(leaked) == 0 && !strings.Contains(r.Text, "proj-alpha"), "%s (host names %q)", r, leaked)
	})
}

// hostPlant is nestedHost.plantScript in host layout, where the outer root
// is at its host path inside the sandbox too.
func (h nestedHost) hostPlant() string {
	return "mv '" + h.app + "' '" + h.app + ".orig' && ln -s '" + h.secret + "' '" + h.app + "'"
}

// hostReach reports whether the server reaches the planted target in host
// layout: through the inner root's path, the target's host path, or
// anywhere below the base.
func (h nestedHost) hostReach(ctx context.Context, cs *mcp.ClientSession) (string, bool) {
	text, isErr, err := toolText(ctx, cs, "read_file", map[string]any{"path": filepath.Join(h.app, "token.txt")})
	if err == nil && !isErr && strings.Contains(text, h.token) {
		return text, true
	}
	text, _, _ = toolText(ctx, cs, "exec", map[string]any{"argv": []string{"/bin/sh", "-c",
		"cat '" + h.secret + "/token.txt' '" + h.base + "'/*/token.txt '" + h.base + "'/*/*/token.txt 2>/dev/null; ls '" + h.base + "'"}})
	return text, strings.Contains(text, h.token)
}

// TestHostLayoutNestedRoot is the nested-root re-pointing attack (issue 10)
// in host layout. With roots /ws and /ws/app the inner one is reached
// through /ws, so the server's planted /ws/app -> secret resolves inside
// the view, where the secret's host path is absent. The attack needs the
// client to drop /ws while keeping /ws/app: /ws/app is then an entry of its
// own, and rootfs must not resolve the server's symlink to place it. The
// control build (control.NoWriteSet) does, and the server reads the
// secret at /ws/app. After the attack the host re-creates a real /ws/app
// and adds a root through a host symlink: both appear at their own paths,
// and /ws lists only app.
func TestHostLayoutNestedRoot(t *testing.T) {
	hostTmp(t)
	naive := buildNaive(t)
	for _, m := range nestedModes(t) {
		for _, control := range []bool{false, true} {
			name := m.name
			if control {
				if m.cred != nil {
					continue // the control shows the attack is real; as root is enough
				}
				name += "/control"
			}
			t.Run(name, func(t *testing.T) {
				rootfs := buildRootfs(t)
				if control {
					rootfs = buildRootfsControl(t, nestedKnob)
				}
				h := newNestedHost(t, m.uid)
				quoted := func(p string) string { return `"file://` + p + `"` }
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				c, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, hostFlags(m.flags...), naive), m.cred, fileRoot(h.ws), fileRoot(h.app))
				unprivilegedRefused(t, m, err, stderr)
				if err != nil {
					t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
				}
				waitRoots(t, ctx, cs, func(s string) bool { return strings.Contains(s, quoted(h.ws)) && strings.Contains(s, quoted(h.app)) }, stderr)
				text, isErr, err := toolText(ctx, cs, "read_file", map[string]any{"path": filepath.Join(h.app, "app.txt")})
				expect(t, kindWorks, "host layout: the inner root reads at its path through the outer ("+name+")",
					err == nil && !isErr && text == "content of app\n", "%q isError=%v err=%v\nstderr:\n%s", text, isErr, err, stderr)

				out, isErr, err := toolText(ctx, cs, "exec", map[string]any{"argv": []string{"/bin/sh", "-c", h.hostPlant()}})
				if err != nil || isErr {
					t.Fatalf("planting inside the sandbox: %q isError=%v err=%v", out, isErr, err)
				}
				if target, _ := os.Readlink(h.app); target != h.secret {
					t.Fatalf("the server's link on the host: %q, want %q", target, h.secret)
				}
				c.AddRoots(fileRoot(h.other))
				roots := waitRoots(t, ctx, cs, func(s string) bool { return strings.Contains(s, quoted(h.other)) }, stderr)
				seen, reached := h.hostReach(ctx, cs)
				if !control {
					expect(t, kindContain, "host layout: a covered inner root re-pointed by the server ("+name+")",
						!reached && !strings.Contains(roots, quoted(h.app)), "reached %q\nroots %s\nstderr:\n%s", seen, roots, stderr)
				}

				// The client drops /ws and keeps /ws/app.
				c.RemoveRoots(fileRoot(h.ws).URI)
				roots = waitRoots(t, ctx, cs, func(s string) bool { return !strings.Contains(s, quoted(h.ws)) }, stderr)
				if control {
					// The unprotected build may need a moment to place it.
					deadline := time.Now().Add(5 * time.Second)
					for seen, reached = h.hostReach(ctx, cs); !reached && time.Now().Before(deadline); seen, reached = h.hostReach(ctx, cs) {
						time.Sleep(100 * time.Millisecond)
					}
					expect(t, kindControl, "host layout: nested root re-pointed by the server, outer root dropped ("+name+"), unprotected build",
						reached, "the server did not reach the planted target: %q\nroots %s\nstderr:\n%s", seen, roots, stderr)
					return
				}
				seen, reached = h.hostReach(ctx, cs)
				expect(t, kindContain, "host layout: nested root re-pointed by the server, outer root dropped ("+name+")",
					!reached && !strings.Contains(roots, quoted(h.app)) && !strings.Contains(roots, filepath.Base(h.secret)),
					"the server reached %q\nroots %s\nstderr:\n%s", seen, roots, stderr)
				expect(t, kindWorks, "host layout: the refused root is logged at warn level ("+name+")",
					strings.Contains(stderr.String(), "symlink the server could have planted") && strings.Contains(stderr.String(), "WARN"), "stderr:\n%s", stderr)

				// The host re-creates a real app and offers a root through a
				// host symlink outside every root.
				must(t, os.Remove(h.app))
				mustWrite(t, filepath.Join(h.app, "fresh.txt"), "fresh clone\n")
				c.AddRoots(fileRoot(h.link))
				roots = waitRoots(t, ctx, cs, func(s string) bool { return strings.Contains(s, quoted(h.link)) && strings.Contains(s, quoted(h.app)) }, stderr)
				fresh, _, ferr := toolText(ctx, cs, "read_file", map[string]any{"path": filepath.Join(h.app, "fresh.txt")})
				proj, _, perr := toolText(ctx, cs, "read_file", map[string]any{"path": filepath.Join(h.link, "proj.txt")})
				ws, _, werr := toolText(ctx, cs, "list_dir", map[string]any{"path": h.ws})
				base, _, berr := toolText(ctx, cs, "list_dir", map[string]any{"path": h.base})
				expect(t, kindWorks, "host layout: a re-created /ws/app and a root through a host symlink work at their own paths ("+name+")",
					ferr == nil && perr == nil && strings.Contains(fresh, "fresh clone") && strings.Contains(proj, "content of proj"),
					"roots %s; fresh %q %v; proj %q %v\nstderr:\n%s", roots, fresh, ferr, proj, perr, stderr)
				expect(t, kindContain, "host layout: with /ws gone, /ws lists only app and the base only the way to the roots ("+name+")",
					werr == nil && berr == nil && ws == "app" && base == "link\nother\nws", "ls ws %q %v; ls base %q %v", ws, werr, base, berr)
			})
		}
	}
}

var (
	probeOnce sync.Once
	probeBin  string
	probeErr  error
)

// buildProbe builds testcmd/probe (the escape battery of mountmgr's
// TestProbeBattery), static, alone in its directory.
func buildProbe(t *testing.T) string {
	t.Helper()
	probeOnce.Do(func() {
		bin := filepath.Join(binDir, "probe", "probe")
		cmd := goCmd("build", "-o", bin, "./testcmd/probe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			probeErr = fmt.Errorf("go build ./testcmd/probe: %v\n%s", err, out)
			return
		}
		probeBin = bin
	})
	if probeErr != nil {
		t.Fatal(probeErr)
	}
	return probeBin
}

type probeOutcome struct {
	Case    string `json:"case"`
	Escaped bool   `json:"escaped"`
	Detail  string `json:"detail"`
}

func probeOutcomes(out string) map[string]probeOutcome {
	res := map[string]probeOutcome{}
	for _, l := range strings.Split(out, "\n") {
		var r probeOutcome
		if strings.HasPrefix(l, "{") && json.Unmarshal([]byte(l), &r) == nil && r.Case != "" {
			res[r.Case] = r
		}
	}
	return res
}

// probeCases are testcmd/probe's cases; probeNoControl are those whose
// negative control needs what an MCP client cannot give the server (a
// terminal on stdin, a leaked descriptor: mountmgr's TestProbeBattery
// covers them), and probeMaybeAbsent those whose target a host may lack.
var (
	probeCases = []string{
		"caps", "chroot", "dotdot", "cwd", "fds", "setns", "mount", "fsopen", "open_tree", "mknod", "suid", "fcap", "nosuid",
		"pids", "procroot", "proccwd", "procfd", "ptrace", "process_vm_readv", "kill",
		"unshare", "clone_userns", "open_by_handle_at", "keyctl", "i386", "syscalls",
		"tiocsti", "env", "unix_path", "unix_abstract", "sys", "shadow", "proc_sys_write", "sysrq",
	}
	probeNoControl   = map[string]bool{"tiocsti": true, "fds": true}
	probeMaybeAbsent = map[string]bool{"sysrq": true, "i386": true}
)

// TestHostLayoutProbeBattery runs the escape battery (testcmd/probe, all
// groups A-E) inside "rootfs run" in host layout, through the naive
// server's exec tool, with its root under /tmp and the secret in a sibling
// directory of the root: the host path the probe aims at is one the view
// has ancestors for. The setuid and file-capability copies live in the root
// at their host path. The negative control runs the same probe, same
// arguments (in host layout the paths are the same), on the host: every
// case escapes there (suid and fcap as nobody).
func TestHostLayoutProbeBattery(t *testing.T) {
	hostTmp(t)
	naive := buildNaive(t)
	probe := buildProbe(t)
	t.Setenv("ROOTFS_CANARY_ENV", "T4") // the env case: must not reach the server
	modes := nestedModes(t)

	base := openTempDir(t)
	data := filepath.Join(base, "data")
	must(t, os.MkdirAll(data, 0o777))
	must(t, os.Chmod(data, 0o777))
	b, err := os.ReadFile(probe)
	must(t, err)
	suid, fcap := filepath.Join(data, "suid-probe"), filepath.Join(data, "fcap-probe")
	must(t, os.WriteFile(suid, b, 0o755))
	must(t, os.Chown(suid, 0, 0))
	must(t, unix.Chmod(suid, 0o4755))
	must(t, os.WriteFile(fcap, b, 0o755))
	capData := make([]byte, 20) // security.capability v2: effective, cap_net_raw permitted
	binary.LittleEndian.PutUint32(capData[0:], 0x02000001)
	binary.LittleEndian.PutUint32(capData[4:], 1<<13)
	must(t, unix.Setxattr(fcap, "security.capability", capData, 0))
	token := "T1-" + randHex(8)
	secret := filepath.Join(base, "secret", "secret")
	mustWrite(t, secret, token+"\n")
	handle := ""
	if h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, secret, 0); err == nil {
		handle = fmt.Sprintf("%d:%s", h.Type(), hex.EncodeToString(h.Bytes()))
	}
	marker := "rootfs-e2e-victim-" + randHex(6)
	victim := exec.Command(probe, "sleep", marker)
	must(t, victim.Start())
	t.Cleanup(func() { _ = victim.Process.Kill(); _ = victim.Wait() })
	sock := filepath.Join(base, "canary.sock")
	abstract := "rootfs-e2e-canary-" + randHex(6)
	for _, addr := range []string{sock, "@" + abstract} {
		l, err := net.Listen("unix", addr)
		must(t, err)
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, token)
				c.Close()
			}
		}()
	}
	must(t, os.Chmod(sock, 0o777))
	// Where the host itself defeats an attack, its control cannot escape:
	// a /tmp mounted nosuid (set-ID and file capabilities), a /tmp on
	// another filesystem than /usr and / (the handle is opened through
	// them).
	noControl := map[string]string{}
	var sfs unix.Statfs_t
	if unix.Statfs(data, &sfs) == nil && sfs.Flags&unix.ST_NOSUID != 0 {
		for _, c := range []string{"suid", "fcap", "nosuid"} {
			noControl[c] = "the host's /tmp is mounted nosuid"
		}
	}
	var st, su, sr unix.Stat_t
	if unix.Stat(secret, &st) == nil && unix.Stat("/usr", &su) == nil && unix.Stat("/", &sr) == nil && st.Dev != su.Dev && st.Dev != sr.Dev {
		noControl["open_by_handle_at"] = "the host's /tmp is not on the filesystem of /usr or /"
	}
	scratch := filepath.Join(data, "scratch")
	must(t, os.Mkdir(scratch, 0o777))
	must(t, os.Chmod(scratch, 0o777))
	args := []string{"run", "-secret", secret, "-token", token, "-handle", handle, "-victims", strconv.Itoa(victim.Process.Pid),
		"-marker", reverse(marker), "-sock", sock, "-abstract", abstract, "-suid", suid, "-fcap", fcap, "-rootdir", data}

	t.Run("direct", func(t *testing.T) {
		cmd := exec.Command(probe, args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		must(t, err)
		res := probeOutcomes(string(out))
		for _, c := range []string{"suid", "fcap"} { // need an unprivileged caller to mean anything
			cmd := exec.Command(probe, "case", c, "-suid", suid, "-fcap", fcap)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			b, err := cmd.Output()
			must(t, err)
			for k, v := range probeOutcomes(string(b)) {
				res[k] = v
			}
		}
		for _, c := range probeCases {
			r, ok := res[c]
			switch {
			case probeNoControl[c]:
				t.Logf("%s: no negative control through an MCP client (mountmgr's TestProbeBattery has it): %s", c, r.Detail)
			case noControl[c] != "" && !r.Escaped:
				t.Logf("%s: no negative control here (%s): %s", c, noControl[c], r.Detail)
			case !r.Escaped && probeMaybeAbsent[c] && (strings.Contains(r.Detail, "ENOENT") || strings.Contains(r.Detail, "ENOSYS") || r.Detail == "not amd64"):
				t.Logf("%s: no negative control on this host: %s", c, r.Detail)
			default:
				expect(t, kindControl, "probe "+c+" on the host", ok && r.Escaped, "%+v", r)
			}
		}
	})

	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			rootfs := buildRootfs(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, hostFlags(append([]string{"--root", data, "--ro-bind", filepath.Dir(probe)}, m.flags...)...), naive), m.cred)
			unprivilegedRefused(t, m, err, stderr)
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			// Its scratch directories (chroot, mount) in the root, so that
			// no case depends on the server's /tmp.
			out, _, err := toolText(ctx, cs, "exec", map[string]any{"argv": append([]string{"/usr/bin/env", "TMPDIR=" + scratch, probe}, args...)})
			if err != nil {
				t.Fatalf("exec probe: %v\nstderr:\n%s", err, stderr)
			}
			res := probeOutcomes(out)
			for _, c := range probeCases {
				r, ok := res[c]
				contained := ok && !r.Escaped
				if c == "i386" {
					contained = contained && (r.Detail == "case process failed: signal: bad system call" || r.Detail == "not amd64")
				} else {
					contained = contained && !strings.HasPrefix(r.Detail, "case process failed")
				}
				expect(t, kindContain, "probe "+c+" in host layout ("+m.name+")", contained, "%+v\nprobe output:\n%s\nstderr:\n%s", r, out, stderr)
			}
		})
	}
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}
