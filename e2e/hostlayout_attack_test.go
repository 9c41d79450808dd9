//go:build linux

package e2e

//lint:file-ignore SA1019 go-sdk deprecates roots (SEP-2577), but rootfs exists to enforce them and every real client still sends them until at least 2027-07-28

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/internal/control"
)

// Outside review of host layout (issue 14): attacks on roots below /tmp,
// where the sandbox's private /tmp shows a clone of the view's tmp/X.

// attackRuns are the data paths, each once for real and once as the
// negative control on a build with knob (buildRootfsControl).
func attackRuns(knob control.Knob) []struct {
	name    string
	flags   []string
	control bool
} {
	var out []struct {
		name    string
		flags   []string
		control bool
	}
	for _, p := range dataPaths {
		for _, control := range []bool{false, true} {
			name := p.name
			if control {
				name += "/control-" + knob.String()
			}
			out = append(out, struct {
				name    string
				flags   []string
				control bool
			}{name, p.flags, control})
		}
	}
	return out
}

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
	for _, p := range attackRuns(control.NoTmpRefresh) {
		t.Run(p.name, func(t *testing.T) {
			rootfs := buildRootfs(t)
			if p.control {
				rootfs = buildRootfsControl(t, control.NoTmpRefresh)
			}
			x, a, secret, token := tmpHost(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, hostFlags(p.flags...), naive), nil, fileRoot(x))
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			before, err := pollTool(ctx, cs, "read_file", map[string]any{"path": secret}, func(s string) bool { return strings.Contains(s, token) })
			if err != nil {
				t.Fatalf("read %q while /tmp/X is a root: %q %v\nstderr:\n%s", secret, before, err, stderr)
			}
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
			leaked := strings.Contains(after, token)
			if p.control {
				// On the kernel path the stale clone is the old root's
				// bind (the leak); under --strict it is its revoked node.
				expect(t, kindControl, "a root narrowed from /tmp/X to /tmp/X/a, stale /tmp/X ("+p.name+")",
					leaked || !strings.Contains(got, "content of a"), "read %q: %q; a.txt %q; ls %q", secret, after, got, ls)
				return
			}
			expect(t, kindContain, "a root narrowed from /tmp/X to /tmp/X/a loses /tmp/X ("+p.name+")",
				!leaked, "read %q after narrowing: %q isError=%v err=%v; ls %s: %q\nroots %s\nstderr:\n%s",
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
	for _, p := range attackRuns(control.NoTmpRefresh) {
		t.Run(p.name, func(t *testing.T) {
			rootfs := buildRootfs(t)
			if p.control {
				if strings.HasPrefix(p.name, "strict") {
					t.Skip("under --strict the stale clone is the root's node, which follows the re-pointed root")
				}
				rootfs = buildRootfsControl(t, control.NoTmpRefresh)
			}
			x, _, secret, token := tmpHost(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			other := filepath.Join("/tmp", "rfsatk-other-"+randHex(4))
			t.Cleanup(func() { os.RemoveAll(other) })
			mustWrite(t, filepath.Join(other, "o.txt"), "other\n")
			c, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, hostFlags(p.flags...), naive), nil, fileRoot(x))
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			before, err := pollTool(ctx, cs, "read_file", map[string]any{"path": secret}, func(s string) bool { return strings.Contains(s, token) })
			if err != nil {
				t.Fatalf("read %q while it is the root: %q %v\nstderr:\n%s", secret, before, err, stderr)
			}
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
			if p.control {
				expect(t, kindControl, "a re-pointed root /tmp/X, stale /tmp/X ("+p.name+")",
					strings.Contains(after, token), "read %q: %q; ls %s: %q", secret, after, x, ls)
				return
			}
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
			c, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, hostFlags(p.flags...), naive), nil, fileRoot(a))
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
			_, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, hostFlags(p.flags...), naive), nil, fileRoot(f))
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			got, err := pollTool(ctx, cs, "read_file", map[string]any{"path": f}, func(s string) bool { return strings.Contains(s, "file root") })
			expect(t, kindWorks, "a single-file root directly below /tmp reads at its path ("+p.name+")",
				err == nil, "read %q: %q %v\nstderr:\n%s", f, got, err, stderr)
		})
	}
}

// TestAttackTmpMountRace: the server moves whatever is at /tmp/R back and
// forth while the client adds the root /tmp/R, so that rootfs's mount
// lands on /tmp/moved, a path of the server's choosing, where removing
// /tmp/R does not find it: the root would stay readable there after it
// leaves. The watcher retries a failed mount every second, so the server
// needs no help from the client to try again. Control: a build that does
// not check where the mount landed. As root and as nobody (rootfs in a
// user namespace: the server owns the directory it made at /tmp/R).
func TestAttackTmpMountRace(t *testing.T) {
	naive := buildNaive(t)
	spin := filepath.Join(binDir, "hlattackspin", "hlattackspin")
	cmd := goCmd("build", "-o", spin, "./e2e/hlattackspin")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./e2e/hlattackspin: %v\n%s", err, out)
	}
	for _, m := range nestedModes(t) { // as root and as nobody, on both data paths
		for _, isControl := range []bool{false, true} {
			p := struct {
				name    string
				flags   []string
				control bool
			}{m.name, m.flags, isControl}
			if isControl {
				p.name += "/control-" + control.NoTmpMountCheck.String()
			}
			t.Run(p.name, func(t *testing.T) {
				rootfs := buildRootfs(t)
				if p.control {
					rootfs = buildRootfsControl(t, control.NoTmpMountCheck)
				}
				x, _, secret, token := tmpHost(t)
				other := filepath.Join("/tmp", "rfsatk-other-"+randHex(4))
				t.Cleanup(func() { os.RemoveAll(other) })
				mustWrite(t, filepath.Join(other, "o.txt"), "other\n")
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				flags := append([]string{"--ro-bind", filepath.Dir(spin)}, p.flags...)
				c, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, hostFlags(flags...), naive), m.cred, fileRoot(other))
				unprivilegedRefused(t, m, err, stderr)
				if err != nil {
					t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
				}
				r := filepath.Base(x)
				if out, isErr, err := toolText(ctx, cs, "exec", map[string]any{"argv": []string{"/bin/sh", "-c",
					fmt.Sprintf("%s %s moved 60 >/tmp/spin.out 2>&1 &", spin, r)}}); err != nil || isErr {
					t.Fatalf("starting the spinner: %q %v", out, err)
				}
				landed := ""
				for i := 0; i < 40 && landed == ""; i++ {
					c.AddRoots(fileRoot(x))
					time.Sleep(50 * time.Millisecond)
					if out, _, _ := toolText(ctx, cs, "read_file", map[string]any{"path": "/tmp/spin.out"}); strings.Contains(out, "landed") {
						landed = out
						break
					}
					c.RemoveRoots("file://" + x)
					time.Sleep(50 * time.Millisecond)
				}
				if landed == "" {
					t.Fatalf("the spinner never saw the mount land on /tmp/moved in 40 tries\nstderr:\n%s", stderr)
				}
				c.RemoveRoots("file://" + x)
				if _, err := pollTool(ctx, cs, "get_roots", nil, func(s string) bool { return !strings.Contains(s, r) }); err != nil {
					t.Fatalf("roots after removal: %v", err)
				}
				time.Sleep(200 * time.Millisecond)
				after, _, _ := toolText(ctx, cs, "read_file", map[string]any{"path": "/tmp/moved/secret.txt"})
				leaked := strings.Contains(after, token)
				if p.control {
					// Under --strict the stale mount shows the revoked root
					// (EIO): it stayed, but the daemon serves nothing of it.
					stayed := leaked || strings.Contains(p.name, "strict") && strings.Contains(after, "input/output error")
					expect(t, kindControl, "a mount moved by the server stays after the root left ("+p.name+"), unchecked build",
						stayed, "read /tmp/moved/secret.txt: %q (%s)\nstderr:\n%s", after, landed, stderr)
					return
				}
				expect(t, kindContain, "a mount moved by the server does not keep a removed root ("+p.name+")",
					!leaked, "read /tmp/moved/secret.txt after %s left: %q (%s)\nstderr:\n%s", secret, after, landed, stderr)
			})
		}
	}
}

// TestAttackTmpSymlinkLogFlood: the server makes /tmp/X a symlink before
// the client adds a root below it. The root is not shown there (never
// followed), and rootfs says so once, not once a second for as long as
// the session lasts (the watcher retries every second). It fails on a
// build that warns at each retry.
func TestAttackTmpSymlinkLogFlood(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	x, a, _, _ := tmpHost(t)
	other := filepath.Join("/tmp", "rfsatk-other-"+randHex(4))
	t.Cleanup(func() { os.RemoveAll(other) })
	mustWrite(t, filepath.Join(other, "o.txt"), "other\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, hostFlags(), naive), nil, fileRoot(other))
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
	}
	if out, isErr, err := toolText(ctx, cs, "exec", map[string]any{"argv": []string{"/bin/ln", "-s", "/etc", x}}); err != nil || isErr {
		t.Fatalf("planting /tmp/X -> /etc: %q %v", out, err)
	}
	c.AddRoots(fileRoot(a))
	if _, err := pollTool(ctx, cs, "get_roots", nil, func(s string) bool { return strings.Contains(s, a) }); err != nil {
		t.Fatalf("roots: %v", err)
	}
	time.Sleep(3500 * time.Millisecond) // three retries of the watcher
	got, _, _ := toolText(ctx, cs, "read_file", map[string]any{"path": filepath.Join(a, "a.txt")})
	n := strings.Count(stderr.String(), "are not shown in the server's /tmp")
	t.Logf("read through the planted link: %q", got)
	expect(t, kindWorks, "a /tmp/X the server made a symlink is reported once, not at every retry",
		n == 1, "%d warnings\nstderr:\n%s", n, stderr)
}
