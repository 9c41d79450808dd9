package e2e

//lint:file-ignore SA1019 go-sdk deprecates roots (SEP-2577), but rootfs exists to enforce them and every real client still sends them until at least 2027-07-28

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Outside review of host layout (issue 14): attacks on roots below /tmp,
// where the sandbox's private /tmp shows a clone of the view's tmp/X.

// tmpHost makes /tmp/rfsatk-<hex> (the first component X) holding a/ and
// secret.txt, world-readable, and removes it after the test.
func tmpHost(t *testing.T) (x, a, secret, token string) {
	t.Helper()
	x = filepath.Join("/tmp", "rfsatk-"+randHex(4))
	t.Cleanup(func() { os.RemoveAll(x) })
	a = filepath.Join(x, "a")
	token = "token-" + randHex(8)
	mustWrite(t, filepath.Join(a, "a.txt"), "content of a\n")
	secret = filepath.Join(x, "secret.txt")
	mustWrite(t, secret, token+"\n")
	for _, d := range []string{x, a} {
		must(t, os.Chmod(d, 0o755))
	}
	return x, a, secret, token
}

// TestAttackTmpRootNarrowed: the client's root /tmp/X is replaced by its
// subdirectory /tmp/X/a. The server must lose /tmp/X/secret.txt, as it
// does for a root anywhere else. Control: it read the secret while
// /tmp/X was a root.
func TestAttackTmpRootNarrowed(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	for _, p := range dataPaths {
		t.Run(p.name, func(t *testing.T) {
			x, a, secret, token := tmpHost(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, p.flags, naive), nil, fileRoot(x))
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			before, err := pollTool(ctx, cs, "read_file", map[string]any{"path": secret}, func(s string) bool { return strings.Contains(s, token) })
			expect(t, kindControl, "the secret beside a is readable while /tmp/X is a root ("+p.name+")", err == nil,
				"read %q: %q %v\nstderr:\n%s", secret, before, err, stderr)
			// a first, then X leaves: the view never lacks a root below X.
			c.AddRoots(fileRoot(a))
			c.RemoveRoots("file://" + x)
			roots, err := pollTool(ctx, cs, "get_roots", nil, func(s string) bool { return !strings.Contains(s, `"file://`+x+`"`) })
			if err != nil {
				t.Fatalf("roots after narrowing: %q %v\nstderr:\n%s", roots, err, stderr)
			}
			got, _, _ := toolText(ctx, cs, "read_file", map[string]any{"path": filepath.Join(a, "a.txt")})
			after, isErr, err := toolText(ctx, cs, "read_file", map[string]any{"path": secret})
			ls, _, _ := toolText(ctx, cs, "list_dir", map[string]any{"path": x})
			expect(t, kindContain, "a root narrowed from /tmp/X to /tmp/X/a loses /tmp/X ("+p.name+")",
				!strings.Contains(after, token), "read %q after narrowing: %q isError=%v err=%v; ls %s: %q\nroots %s\nstderr:\n%s",
				secret, after, isErr, err, x, ls, roots, stderr)
			expect(t, kindWorks, "/tmp/X/a reads at its path after narrowing ("+p.name+")",
				strings.Contains(got, "content of a"), "read a.txt: %q; ls %s: %q\nstderr:\n%s", got, x, ls, stderr)
		})
	}
}

// TestAttackTmpRootRepointed: the host replaces the directory of the
// client's root /tmp/X (renamed away, a new one made) and the client
// lists the same URI again. The server must see the new directory, not
// keep the old one (which no root names any more). Control: it saw the
// old one's secret before.
func TestAttackTmpRootRepointed(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	for _, p := range dataPaths {
		t.Run(p.name, func(t *testing.T) {
			x, _, secret, token := tmpHost(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			other := filepath.Join("/tmp", "rfsatk-other-"+randHex(4))
			t.Cleanup(func() { os.RemoveAll(other) })
			mustWrite(t, filepath.Join(other, "o.txt"), "other\n")
			c, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, p.flags, naive), nil, fileRoot(x))
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			before, err := pollTool(ctx, cs, "read_file", map[string]any{"path": secret}, func(s string) bool { return strings.Contains(s, token) })
			expect(t, kindControl, "the old directory's secret is readable while it is the root ("+p.name+")", err == nil,
				"read %q: %q %v\nstderr:\n%s", secret, before, err, stderr)
			old := x + ".old"
			t.Cleanup(func() { os.RemoveAll(old) })
			must(t, os.Rename(x, old))
			mustWrite(t, filepath.Join(x, "fresh.txt"), "fresh\n")
			must(t, os.Chmod(x, 0o755))
			c.AddRoots(fileRoot(other)) // list_changed: rootfs fetches [x, other]
			if _, err := pollTool(ctx, cs, "get_roots", nil, func(s string) bool { return strings.Contains(s, other) }); err != nil {
				t.Fatalf("roots: %v\nstderr:\n%s", err, stderr)
			}
			fresh, _ := pollTool(ctx, cs, "read_file", map[string]any{"path": filepath.Join(x, "fresh.txt")}, func(s string) bool { return strings.Contains(s, "fresh") })
			after, _, _ := toolText(ctx, cs, "read_file", map[string]any{"path": secret})
			ls, _, _ := toolText(ctx, cs, "list_dir", map[string]any{"path": x})
			expect(t, kindContain, "a re-pointed root /tmp/X no longer shows the old directory ("+p.name+")",
				!strings.Contains(after, token), "read %q: %q; ls %s: %q\nstderr:\n%s", secret, after, x, ls, stderr)
			expect(t, kindWorks, "a re-pointed root /tmp/X shows the new directory ("+p.name+")",
				strings.Contains(fresh, "fresh"), "read fresh.txt: %q; ls %s: %q\nstderr:\n%s", fresh, x, ls, stderr)
		})
	}
}

// TestAttackTmpRootWidened: roots /tmp/X/a, then /tmp/X itself: the
// server must see all of /tmp/X at its path (functional; the sandbox's
// /tmp/X was a clone of the synthetic directory).
func TestAttackTmpRootWidened(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	for _, p := range dataPaths {
		t.Run(p.name, func(t *testing.T) {
			x, a, secret, token := tmpHost(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, p.flags, naive), nil, fileRoot(a))
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			if _, err := pollTool(ctx, cs, "read_file", map[string]any{"path": filepath.Join(a, "a.txt")}, func(s string) bool { return strings.Contains(s, "content of a") }); err != nil {
				t.Fatalf("a before: %v\nstderr:\n%s", err, stderr)
			}
			c.AddRoots(fileRoot(x))
			c.RemoveRoots("file://" + a)
			got, err := pollTool(ctx, cs, "read_file", map[string]any{"path": secret}, func(s string) bool { return strings.Contains(s, token) })
			ls, _, _ := toolText(ctx, cs, "list_dir", map[string]any{"path": x})
			expect(t, kindWorks, "a root widened from /tmp/X/a to /tmp/X shows /tmp/X ("+p.name+")",
				err == nil, "read %q: %q %v; ls %s: %q\nstderr:\n%s", secret, got, err, x, ls, stderr)
		})
	}
}

// TestAttackTmpFileRoot: a single-file root directly below /tmp
// (/tmp/notes-X.txt) appears at its path like one deeper down.
func TestAttackTmpFileRoot(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	for _, p := range dataPaths {
		t.Run(p.name, func(t *testing.T) {
			f := filepath.Join("/tmp", "rfsatk-"+randHex(4)+".txt")
			t.Cleanup(func() { os.Remove(f) })
			mustWrite(t, f, "file root\n")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, p.flags, naive), nil, fileRoot(f))
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			got, err := pollTool(ctx, cs, "read_file", map[string]any{"path": f}, func(s string) bool { return strings.Contains(s, "file root") })
			expect(t, kindWorks, "a single-file root directly below /tmp reads at its path ("+p.name+")",
				err == nil, "read %q: %q %v\nstderr:\n%s", f, got, err, stderr)
		})
	}
}
