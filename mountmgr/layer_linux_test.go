package mountmgr

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rootfs-dev/rootfs/internal/testutil"
	ispec "github.com/rootfs-dev/rootfs/mountmgr/internal/spec"
	"github.com/rootfs-dev/rootfs/mountmgr/resolve"
)

// observed is a logger that records what it is given.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// messages lists the recorded messages that contain sub.
func messages(logs *observer.ObservedLogs, sub string) []observer.LoggedEntry {
	var out []observer.LoggedEntry
	for _, e := range logs.TakeAll() {
		if strings.Contains(e.Message, sub) {
			out = append(out, e)
		}
	}
	return out
}

// writeFile writes p, making its directory.
func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// layerSpec is a spec whose overlay binds are the caches, each with its
// layer below base for server argv.
func layerSpec(base string, argv []string, caches ...string) *Spec {
	s := &Spec{}
	for _, c := range caches {
		s.Binds = append(s.Binds, Bind{Source: c, Dest: c, ReadOnly: true, Overlay: true, Reason: "npm cache",
			Layer: ispec.LayerDir(base, ispec.HostUID(), argv, "npm cache", c)})
	}
	return s
}

// TestPrepareLayers: the layers are made (0700, the upper layer with its
// cache's mode), named by their real paths, said once, locked for one
// session at a time, and dropped with a warning when they cannot be made
// or grow large.
func TestPrepareLayers(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	npm, uv := filepath.Join(tmp, "npm"), filepath.Join(tmp, "uv")
	for _, d := range []string{npm, uv} {
		if err := os.Mkdir(d, 0o751); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(tmp, "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	// The state directory through a symlink: the layers get its real path.
	link := filepath.Join(tmp, "state-link")
	if err := os.Symlink(state, link); err != nil {
		t.Fatal(err)
	}
	base := LayerBase("", link)
	argv := []string{"npx", "-y", "server"}
	log, logs := observed()

	spec := layerSpec(base, argv, npm, uv)
	release := PrepareLayers(spec, log)
	real := LayerBase("", state)
	for i, b := range spec.Binds {
		if !strings.HasPrefix(b.Layer, real+"/") {
			t.Fatalf("bind %d: layer %q, want one below %s", i, b.Layer, real)
		}
		mode := func(p string) fs.FileMode {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			return fi.Mode().Perm()
		}
		for p, want := range map[string]fs.FileMode{LayerServerDir(b.Layer): 0o700, b.Layer: 0o700, filepath.Join(b.Layer, "upper"): 0o751, filepath.Join(b.Layer, "work"): 0o700} {
			if got := mode(p); got != want {
				t.Errorf("%s: mode %o, want %o", p, got, want)
			}
		}
	}
	if notes := messages(logs, "kept for its next start"); len(notes) != 2 {
		t.Errorf("%d notes for two new layers, want 2: %v", len(notes), notes)
	} else if f := notes[0].ContextMap(); f["reset"] != "rm -r "+LayerServerDir(spec.Binds[0].Layer) || f["cache"] != npm {
		t.Errorf("note %v: want the cache and rm -r of the server's directory", f)
	}

	// A second session of the same server while the first runs.
	busy := layerSpec(base, argv, npm)
	release2 := PrepareLayers(busy, log)
	release2()
	if busy.Binds[0].Layer != "" {
		t.Errorf("a second session got the layer in use: %q", busy.Binds[0].Layer)
	}
	if w := messages(logs, "another session of this server"); len(w) != 1 || w[0].Level != zapcore.WarnLevel {
		t.Errorf("want one warning for the layer in use, got %v", w)
	}
	// Another server at the same time has its own.
	other := layerSpec(base, []string{"npx", "-y", "other"}, npm)
	release3 := PrepareLayers(other, log)
	release3()
	if other.Binds[0].Layer == "" || LayerServerDir(other.Binds[0].Layer) == LayerServerDir(spec.Binds[0].Layer) {
		t.Errorf("another server's layer %q (the first's %q)", other.Binds[0].Layer, spec.Binds[0].Layer)
	}
	logs.TakeAll()
	release()

	// The next session: the same layers, said no more; a large one warned.
	upper := filepath.Join(spec.Binds[0].Layer, "upper")
	big, err := os.Create(filepath.Join(upper, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(layerWarnSize + 1<<20); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	big.Close()
	next := layerSpec(base, argv, npm, uv)
	PrepareLayers(next, log)()
	if next.Binds[0].Layer != spec.Binds[0].Layer || next.Binds[1].Layer != spec.Binds[1].Layer {
		t.Errorf("next session's layers %q, first's %q", []string{next.Binds[0].Layer, next.Binds[1].Layer}, []string{spec.Binds[0].Layer, spec.Binds[1].Layer})
	}
	all := logs.TakeAll()
	if len(all) != 1 || all[0].Level != zapcore.WarnLevel || !strings.Contains(all[0].Message, "large") || all[0].ContextMap()["writes"] != upper {
		t.Errorf("want one warning naming the large layer %s, got %v", upper, all)
	}

	// A state directory that cannot hold layers: the writes vanish, and
	// a warning says so.
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := layerSpec(LayerBase("", file), argv, npm)
	PrepareLayers(bad, log)()
	if bad.Binds[0].Layer != "" {
		t.Errorf("layer %q below a file", bad.Binds[0].Layer)
	}
	if w := messages(logs, "cannot keep the server's writes"); len(w) != 1 || w[0].Level != zapcore.WarnLevel {
		t.Errorf("want one warning for the layer that cannot be made, got %v", w)
	}
}

// TestPrepareLayersAsRootForAUser: as root with a user's state directory,
// the directories made are the user's and the upper layer its cache
// owner's; a symlink the user planted towards root's files is refused and
// nothing is made there.
func TestPrepareLayersAsRootForAUser(t *testing.T) {
	testutil.RequireRoot(t)
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const user, cacheOwner = 65534, 65533
	home := filepath.Join(tmp, "home")
	npm := filepath.Join(home, ".npm")
	if err := os.MkdirAll(npm, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, uid := range map[string]int{tmp: 0, home: user, npm: cacheOwner} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(tmp, 0o755)
	spec := layerSpec(LayerBase(home, ""), []string{"npx", "-y", "server"}, npm)
	PrepareLayers(spec, nil)()
	layer := spec.Binds[0].Layer
	if layer == "" {
		t.Fatal("no layer")
	}
	owner := func(p string) int {
		var st fs.FileInfo
		if st, err = os.Lstat(p); err != nil {
			t.Fatal(err)
		}
		return int(st.Sys().(*syscall.Stat_t).Uid)
	}
	for p := layer; p != home; p = filepath.Dir(p) {
		if got := owner(p); got != user {
			t.Errorf("%s owned by %d, want the user %d", p, got, user)
		}
	}
	if got := owner(filepath.Join(layer, "upper")); got != cacheOwner {
		t.Errorf("upper layer owned by %d, want the cache's owner %d", got, cacheOwner)
	}

	// ~/.local/state -> a directory of root's, by the user's own symlink.
	rootDir := filepath.Join(tmp, "root-only")
	if err := os.Mkdir(rootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	home2 := filepath.Join(tmp, "home2")
	if err := os.MkdirAll(filepath.Join(home2, ".local"), 0o755); err != nil {
		t.Fatal(err)
	}
	stateLink := filepath.Join(home2, ".local", "state")
	if err := os.Symlink(rootDir, stateLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(stateLink, user, user); err != nil {
		t.Fatal(err)
	}
	log, logs := observed()
	planted := layerSpec(LayerBase(home2, ""), []string{"npx", "-y", "server"}, npm)
	PrepareLayers(planted, log)()
	if planted.Binds[0].Layer != "" {
		t.Errorf("layer %q through the user's symlink to root's directory", planted.Binds[0].Layer)
	}
	if ents, _ := os.ReadDir(rootDir); len(ents) != 0 {
		t.Errorf("root made %v in the directory the user's link names", ents)
	}
	if w := messages(logs, "cannot keep"); len(w) != 1 || !strings.Contains(w[0].ContextMap()["error"].(string), "symlink") {
		t.Errorf("want one warning naming the symlink, got %v", w)
	}
	// Control: the same link owned by root is followed.
	if err := os.Lchown(stateLink, 0, 0); err != nil {
		t.Fatal(err)
	}
	control := layerSpec(LayerBase(home2, ""), []string{"npx", "-y", "server"}, npm)
	PrepareLayers(control, nil)()
	if !strings.HasPrefix(control.Binds[0].Layer, rootDir+"/") {
		t.Errorf("root's own symlink: layer %q, want one below %s", control.Binds[0].Layer, rootDir)
	}
}

// TestPrepareLayersMakesAMissingCache: a launcher cache that does not
// exist yet (npm never ran for this user) is made empty, owned as the home
// it is made in, so that the server's layer can keep what it downloads; a
// cache that cannot be made drops its bind, with a warning.
func TestPrepareLayersMakesAMissingCache(t *testing.T) {
	testutil.RequireRoot(t)
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const user = 65534
	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, user, user); err != nil {
		t.Fatal(err)
	}
	npm := filepath.Join(home, ".npm")
	spec := layerSpec(LayerBase(home, ""), []string{"npx", "-y", "server"}, npm)
	PrepareLayers(spec, nil)()
	st, err := os.Stat(npm)
	if err != nil {
		t.Fatalf("cache not made: %v", err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != user {
		t.Errorf("cache owned by %d, want the home's owner %d", uid, user)
	}
	if len(spec.Binds) != 1 || spec.Binds[0].Layer == "" {
		t.Errorf("binds %+v, want the cache with a layer", spec.Binds)
	}

	// Its parent is a file: nothing can be made there, and the bind goes.
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	log, logs := observed()
	bad := layerSpec(LayerBase(home, ""), []string{"npx", "-y", "other"}, filepath.Join(file, ".npm"), npm)
	PrepareLayers(bad, log)()
	if len(bad.Binds) != 1 || bad.Binds[0].Source != npm {
		t.Errorf("binds %+v, want only %s", bad.Binds, npm)
	}
	if w := messages(logs, "cannot make it"); len(w) != 1 {
		t.Errorf("want one warning, got %v", w)
	}
}

// treeHash is a digest of every name, mode, link target and content below
// dir, for "unchanged byte for byte".
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	var paths []string
	_ = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil {
			paths = append(paths, p)
		}
		return nil
	})
	sort.Strings(paths)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(h, p+"\x00"+fi.Mode().String()+"\x00")
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			io.WriteString(h, l)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestOverlayLayerPersists: what the server writes into a cache's overlay
// is there at its next start, and the cache is unchanged; without a layer
// (the negative control) it is gone; a layer the sandbox cannot open
// falls back to /tmp with a line on stderr. As root, and as an
// unprivileged user (P1 in a user namespace makes the layer itself).
func TestOverlayLayerPersists(t *testing.T) {
	testutil.RequireRoot(t)
	t.Run("root", func(t *testing.T) { overlayLayerPersists(t, nil) })
	t.Run("unprivileged", func(t *testing.T) { overlayLayerPersists(t, nobody) })
}

func overlayLayerPersists(t *testing.T, cred *syscall.Credential) {
	f := newFixture(t)
	exe := ""
	if cred != nil {
		exe = copyTestBinary(t, f.base)
		requireUserNS(t, exe)
	}
	home := filepath.Join(f.base, "home")
	cache := filepath.Join(home, ".npm")
	pkg := filepath.Join(cache, "_npx", "abc", "node_modules", "server")
	writeFile(t, filepath.Join(pkg, "index.js"), "code\n", 0o644)
	if cred != nil {
		chownTree(t, home, int(cred.Uid))
	}
	before := treeHash(t, cache)
	sh, err := resolve.Command("sh", DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := BuildEnv(func(string) string { return "" }, nil, nil)
	script := `cd ` + pkg + ` || exit 1
cat data.json 2>/dev/null || echo "no data"
echo "{\"n\":1}" > data.json && echo wrote
echo more >> index.js && echo changed
touch ` + cache + `/_npx/abc/.lock && echo locked
grep overlay /proc/self/mountinfo`
	run := func(layers bool, layer string) (string, string) {
		t.Helper()
		spec := Spec{Argv: []string{sh, "-c", script}, Env: env, TmpSize: "16m",
			Binds: []Bind{{Source: cache, Dest: cache, ReadOnly: true, Overlay: true, Reason: "npm cache", Layer: layer}}}
		stderr, err := os.CreateTemp(t.TempDir(), "stderr")
		if err != nil {
			t.Fatal(err)
		}
		defer stderr.Close()
		out, code := runSandbox(t, sandboxRun{cfg: p1Config{Spec: spec, Layers: layers}, cred: cred, exe: exe, stderr: stderr})
		errb, _ := os.ReadFile(stderr.Name())
		if code != 0 {
			t.Fatalf("exit status %d:\n%s\nstderr:\n%s", code, out, errb)
		}
		for _, want := range []string{"wrote", "changed", "locked"} {
			if !strings.Contains(out, want) {
				t.Fatalf("the server could not write the overlay (%q missing):\n%s\nstderr:\n%s", want, out, errb)
			}
		}
		t.Logf("server:\n%sstderr:\n%s", out, errb)
		return out, string(errb)
	}
	base := LayerBase(home, "")
	layer := ispec.LayerDir(base, 0, []string{"npx", "-y", "server"}, "npm cache", cache)

	first, stderr := run(true, layer)
	if !strings.Contains(first, "no data") {
		t.Errorf("first start found data:\n%s", first)
	}
	if !strings.Contains(stderr, "kept for its next start") {
		t.Errorf("first start: no note on stderr saying where the writes go:\n%s", stderr)
	}
	if strings.Contains(first, base) {
		t.Errorf("the sandbox's mount table names the layer's host path:\n%s", first)
	}
	second, stderr := run(true, layer)
	if !strings.Contains(second, `{"n":1}`) {
		t.Errorf("second start lost the first one's writes:\n%s\nstderr:\n%s", second, stderr)
	}
	if strings.Contains(stderr, "kept for its next start") {
		t.Errorf("second start repeated the note:\n%s", stderr)
	}
	if b, err := os.ReadFile(filepath.Join(layer, "upper", "_npx", "abc", "node_modules", "server", "data.json")); err != nil || string(b) != "{\"n\":1}\n" {
		t.Errorf("the server's data is not in its layer: %q, %v", b, err)
	}
	if after := treeHash(t, cache); after != before {
		t.Errorf("the cache changed")
	}
	if cred != nil {
		// P1 made the layer in its user namespace: on the host it is the
		// user's, as is what the server wrote.
		_ = filepath.WalkDir(LayerServerDir(layer), func(p string, _ fs.DirEntry, err error) error {
			if fi, err := os.Lstat(p); err == nil && fi.Sys().(*syscall.Stat_t).Uid != cred.Uid {
				t.Errorf("%s owned by uid %d, want %d", p, fi.Sys().(*syscall.Stat_t).Uid, cred.Uid)
			}
			return nil
		})
	}

	// Negative control: no layer, the old behaviour: the writes vanish.
	for i := 0; i < 2; i++ {
		out, _ := run(false, "")
		if !strings.Contains(out, "no data") {
			t.Errorf("without a layer, start %d found data:\n%s", i+1, out)
		}
	}

	// A layer the sandbox refuses (its upper directory became a symlink
	// after P1 prepared it): the session runs, its writes go to /tmp, and
	// stderr says they vanish.
	upper := filepath.Join(layer, "upper")
	if err := os.Rename(upper, upper+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(upper+".away", upper); err != nil {
		t.Fatal(err)
	}
	out, stderr := run(false, layer)
	if !strings.Contains(stderr, "cannot keep the writes to "+cache) || !strings.Contains(stderr, "vanish") {
		t.Errorf("no line saying the writes vanish:\n%s", stderr)
	}
	if !strings.Contains(out, "no data") {
		t.Errorf("the refused layer was used:\n%s", out)
	}
	if after := treeHash(t, cache); after != before {
		t.Errorf("the cache changed")
	}
}

// requireUserNS skips unless uid 65534 may create the user namespace the
// sandbox needs without root (TestUnprivileged checks the refusal).
func requireUserNS(t *testing.T, exe string) {
	t.Helper()
	pf := exec.Command(exe, "-test.run=^$")
	pf.Env = append(os.Environ(), envHelper+"=preflight")
	pf.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
	b, err := pf.Output()
	if err != nil {
		t.Fatalf("preflight as nobody: %v", err)
	}
	var findings []Finding
	if err := json.Unmarshal(b, &findings); err != nil {
		t.Fatal(err)
	}
	if len(findings) == 0 || !findings[0].OK {
		t.Skipf("unprivileged user namespaces unavailable here: %v", findings)
	}
}

// chownTree gives dir and everything below it to uid (and gid uid).
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}
