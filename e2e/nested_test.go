package e2e

//lint:file-ignore SA1019 go-sdk deprecates roots (SEP-2577), but rootfs exists to enforce them and every real client still sends them until at least 2027-07-28

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// The nested-root attack (issue 10, finding 1): with roots /ws and /ws/app
// (or a static --root /ws and a client root /ws/app), the server swaps
// /ws/app for a symlink to a host directory; the next roots/list fetch must
// not admit that directory. Each case runs the real "rootfs run" with a
// go-sdk client and the naive server, as root and as nobody, and again with
// a control build of rootfs (control.NoWriteSet) that resolves roots as
// before the fix, where the server does read the planted target.

// nestedKnob turns off what the nested-root tests prove (the tests' loops
// name their flag control).
const nestedKnob = control.NoWriteSet

var (
	controlOnce sync.Once
	controlBin  string
	controlErr  error
)

// buildRootfsControl builds a control build of rootfs (-tags
// rootfs_control), once, and turns knobs on for the processes t starts
// (control.EnvVar, which the normal build ignores): the negative controls
// run the attack on a build without the protection.
func buildRootfsControl(t *testing.T, knobs ...control.Knob) string {
	t.Helper()
	buildRootfs(t) // the same prerequisites
	controlOnce.Do(func() {
		if bin := os.Getenv("ROOTFS_E2E_CONTROL_BIN"); bin != "" { // beside ROOTFS_E2E_BIN: a control build made elsewhere
			controlBin, controlErr = filepath.Abs(bin)
			return
		}
		bin := filepath.Join(binDir, "rootfs-control", "rootfs")
		if out, err := goCmd("build", "-tags", "rootfs_control", "-o", bin, "./cmd/rootfs").CombinedOutput(); err != nil {
			controlErr = fmt.Errorf("go build -tags rootfs_control ./cmd/rootfs: %v\n%s", err, out)
			return
		}
		controlBin = bin
	})
	if controlErr != nil {
		t.Fatal(controlErr)
	}
	t.Setenv(control.EnvVar, control.Names(knobs...))
	return controlBin
}

// nestedHost is base/ws (writable by the server's uid) holding the real
// directory app, base/secret-<hex> holding a token no root holds, base/other
// (an unrelated root, to make the client send list_changed), and base/proj
// reached through the host symlink base/link.
type nestedHost struct {
	base, ws, app, secret, token, other, proj, link string
}

// openTempDir is a temporary directory of the test, its symlinks
// resolved, that other users may traverse (it and its parent 0755): the
// place for what a server running as another user (nobody) must reach.
func openTempDir(t *testing.T) string {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	for _, d := range []string{filepath.Dir(base), base} {
		must(t, os.Chmod(d, 0o755))
	}
	return base
}

func newNestedHost(t *testing.T, uid uint32) nestedHost {
	t.Helper()
	base := openTempDir(t)
	h := nestedHost{base: base, ws: filepath.Join(base, "ws"), secret: filepath.Join(base, "secret-"+randHex(4)),
		token: "token-" + randHex(8), other: filepath.Join(base, "other"), proj: filepath.Join(base, "proj"), link: filepath.Join(base, "link")}
	h.app = filepath.Join(h.ws, "app")
	mustWrite(t, filepath.Join(h.app, "app.txt"), "content of app\n")
	mustWrite(t, filepath.Join(h.secret, "token.txt"), h.token+"\n")
	mustWrite(t, filepath.Join(h.other, "other.txt"), "other\n")
	mustWrite(t, filepath.Join(h.proj, "proj.txt"), "content of proj\n")
	must(t, os.Symlink("proj", h.link))
	for _, p := range []string{h.ws, h.app, filepath.Join(h.app, "app.txt")} {
		must(t, os.Chown(p, int(uid), int(uid)))
	}
	return h
}

// plantScript is what the server runs inside the sandbox: the outer root is
// /ws there, and the link's target is a host path, meaningless inside.
func (h nestedHost) plantScript() string {
	return "mv /ws/app /ws/app.orig && ln -s " + h.secret + " /ws/app"
}

func fileRoot(p string) *mcp.Root { return &mcp.Root{URI: "file://" + p, Name: filepath.Base(p)} }

// connectAs starts argv as cred (nil: as the test) under a go-sdk client
// with roots.
func connectAs(t *testing.T, ctx context.Context, argv []string, cred *syscall.Credential, roots ...*mcp.Root) (*mcp.Client, *mcp.ClientSession, *tail, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "rootfs-e2e-nested", Version: "0.0.1"}, nil)
	c.AddRoots(roots...)
	stderr := newTail(256 << 10)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Stderr = stderr
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return c, cs, stderr, err
}

type nestedMode struct {
	name  string
	uid   uint32
	cred  *syscall.Credential
	flags []string // the data path's flag (dataPaths)
}

// nestedModes are root and, where the machine allows it, nobody in an
// unprivileged user namespace (/dev/fuse is opened to others for the test,
// as TestRunUnprivilegedWithFUSE does).
func nestedModes(t *testing.T) []nestedMode {
	t.Helper()
	testutil.RequireRoot(t)
	users := []nestedMode{{name: "root"}}
	if st, err := os.Stat("/dev/fuse"); err == nil {
		if st.Mode().Perm()&0o006 != 0o006 {
			must(t, os.Chmod("/dev/fuse", 0o666))
			t.Cleanup(func() { os.Chmod("/dev/fuse", st.Mode().Perm()) })
		}
		users = append(users, nestedMode{name: "nobody", uid: 65534, cred: &syscall.Credential{Uid: 65534, Gid: 65534}})
	}
	var modes []nestedMode
	for _, u := range users {
		for _, p := range dataPaths {
			m := u
			m.name += "/" + p.name
			m.flags = p.flags
			modes = append(modes, m)
		}
	}
	return modes
}

// unprivilegedRefused skips when rootfs refused to start as nobody because
// the machine forbids unprivileged user namespaces (the refusal itself is
// tested in cmd/rootfs/cli and mountmgr).
func unprivilegedRefused(t *testing.T, m nestedMode, err error, stderr *tail) {
	t.Helper()
	if err != nil && m.cred != nil && strings.Contains(stderr.String(), "namespace") {
		testutil.Skip(t, "unprivileged user namespaces unavailable: "+lastLine(stderr.String()))
	}
}

// reach reports whether the server can read the planted target: through an
// entry named after it (what the unprotected build installs) or anywhere in
// its roots.
// refusalLine is rootfs's log line about the refused root.
func refusalLine(stderr *tail) string {
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "symlink the server could have planted") {
			return l
		}
	}
	return ""
}

func (h nestedHost) reach(ctx context.Context, cs *mcp.ClientSession) (string, bool) {
	text, isErr, err := toolText(ctx, cs, "read_file", map[string]any{"path": "/" + filepath.Base(h.secret) + "/token.txt"})
	if err == nil && !isErr && strings.Contains(text, h.token) {
		return text, true
	}
	text, _, _ = toolText(ctx, cs, "exec", map[string]any{"argv": []string{"/bin/sh", "-c", "cat /*/token.txt /*/*/token.txt 2>/dev/null; ls /"}})
	return text, strings.Contains(text, h.token)
}

// TestNestedRootListChanged: client roots /ws and /ws/app; the server plants
// the link, the client adds an unrelated root (list_changed). Then the host
// re-creates a real /ws/app and adds a root through a host symlink: both work.
func TestNestedRootListChanged(t *testing.T) {
	naive := buildNaive(t)
	for _, m := range nestedModes(t) {
		for _, control := range []bool{false, true} {
			name := m.name
			if control {
				name += "/control"
			}
			t.Run(name, func(t *testing.T) {
				rootfs := buildRootfs(t)
				if control {
					rootfs = buildRootfsControl(t, nestedKnob)
				}
				h := newNestedHost(t, m.uid)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				c, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, flat(m.flags...), naive), m.cred, fileRoot(h.ws), fileRoot(h.app))
				unprivilegedRefused(t, m, err, stderr)
				if err != nil {
					t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
				}
				text, err := pollTool(ctx, cs, "get_roots", nil, func(s string) bool {
					return strings.Contains(s, "file:///ws") && strings.Contains(s, "file:///app")
				})
				if err != nil {
					t.Fatalf("roots before the attack: %q %v\nstderr:\n%s", text, err, stderr)
				}
				out, isErr, err := toolText(ctx, cs, "exec", map[string]any{"argv": []string{"/bin/sh", "-c", h.plantScript()}})
				if err != nil || isErr {
					t.Fatalf("planting inside the sandbox: %q isError=%v err=%v", out, isErr, err)
				}
				if target, _ := os.Readlink(h.app); target != h.secret {
					t.Fatalf("the server's link on the host: %q, want %q", target, h.secret)
				}
				c.AddRoots(fileRoot(h.other)) // any list_changed makes rootfs fetch again
				roots, err := pollTool(ctx, cs, "get_roots", nil, func(s string) bool { return strings.Contains(s, "file:///other") })
				if err != nil {
					t.Fatalf("roots after list_changed: %q %v\nstderr:\n%s", roots, err, stderr)
				}
				seen, reached := h.reach(ctx, cs)
				if control {
					expect(t, kindControl, "nested root re-pointed by the server after list_changed ("+m.name+"), unprotected build",
						reached, "the server did not reach the planted target: %q\nroots %s\nstderr:\n%s", seen, roots, stderr)
					return
				}
				expect(t, kindContain, "nested root re-pointed by the server after list_changed ("+m.name+")",
					!reached && !strings.Contains(roots, filepath.Base(h.secret)) && !strings.Contains(roots, "file:///app"),
					"the server reached %q\nroots %s\nstderr:\n%s", seen, roots, stderr)
				expect(t, kindWorks, "a refused root is logged at warn level in one line ("+m.name+")",
					strings.Contains(stderr.String(), "symlink the server could have planted") && strings.Contains(stderr.String(), "WARN"), "stderr:\n%s", stderr)

				t.Logf("%s", refusalLine(stderr))
				// The host (not the server) re-clones app and offers a root
				// through a host symlink outside every root.
				must(t, os.Remove(h.app))
				mustWrite(t, filepath.Join(h.app, "fresh.txt"), "fresh clone\n")
				c.AddRoots(fileRoot(h.link))
				roots, err = pollTool(ctx, cs, "get_roots", nil, func(s string) bool {
					return strings.Contains(s, "file:///proj") && strings.Contains(s, "file:///app")
				})
				fresh, _, ferr := toolText(ctx, cs, "read_file", map[string]any{"path": "/app/fresh.txt"})
				proj, _, perr := toolText(ctx, cs, "read_file", map[string]any{"path": "/proj/proj.txt"})
				expect(t, kindWorks, "a re-created /ws/app and a root through a host symlink work ("+m.name+")",
					err == nil && ferr == nil && perr == nil && strings.Contains(fresh, "fresh clone") && strings.Contains(proj, "content of proj"),
					"roots %q err %v; fresh %q %v; proj %q %v\nstderr:\n%s", roots, err, fresh, ferr, proj, perr, stderr)
			})
		}
	}
}

// TestNestedRootBeforeInitialize: a static --root /ws, a client root
// /ws/app; the server plants the link before it answers initialize, so the
// first fetch already meets it.
func TestNestedRootBeforeInitialize(t *testing.T) {
	naive := buildNaive(t)
	for _, m := range nestedModes(t) {
		for _, control := range []bool{false, true} {
			name := m.name
			if control {
				name += "/control"
			}
			t.Run(name, func(t *testing.T) {
				rootfs := buildRootfs(t)
				if control {
					rootfs = buildRootfsControl(t, nestedKnob)
				}
				h := newNestedHost(t, m.uid)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				flags := append([]string{"--root", h.ws, "--ro-bind", filepath.Dir(naive)}, m.flags...)
				argv := wrap(rootfs, flat(flags...), "/bin/sh", "-c", h.plantScript()+" && exec "+naive)
				_, cs, stderr, err := connectAs(t, ctx, argv, m.cred, fileRoot(h.app))
				unprivilegedRefused(t, m, err, stderr)
				if err != nil {
					t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
				}
				if target, _ := os.Readlink(h.app); target != h.secret {
					t.Fatalf("the server's link on the host: %q, want %q\nstderr:\n%s", target, h.secret, stderr)
				}
				roots, _, err := toolText(ctx, cs, "get_roots", nil)
				seen, reached := h.reach(ctx, cs)
				if st, err := os.Lstat(h.app); err == nil {
					t.Logf("planted %s owned by uid %d", h.app, st.Sys().(*syscall.Stat_t).Uid)
				}
				if control {
					expect(t, kindControl, "nested root planted before initialize ("+m.name+"), unprotected build",
						reached, "the server did not reach the planted target: %q\nroots %s %v\nstderr:\n%s", seen, roots, err, stderr)
					return
				}
				expect(t, kindContain, "nested root planted before initialize ("+m.name+")",
					err == nil && !reached && !strings.Contains(roots, filepath.Base(h.secret)) && !strings.Contains(roots, "file:///app"),
					"the server reached %q\nroots %s %v\nstderr:\n%s", seen, roots, err, stderr)
				t.Logf("%s", refusalLine(stderr))
				expect(t, kindWorks, "the refusal names the planted link ("+m.name+")",
					strings.Contains(stderr.String(), "symlink the server could have planted"), "stderr:\n%s", stderr)
			})
		}
	}
}
