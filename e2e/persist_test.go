package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A server that keeps its data in its own package directory, inside the
// npx cache: @modelcontextprotocol/server-memory writes its knowledge
// graph to dist/memory.jsonl beside its code. Under rootfs the cache is
// the read-only lower layer of an overlay; what the server writes must be
// there at its next start, in a layer of its own, while the cache stays
// as it was and no other server sees that layer.

const memoryPkg = "@modelcontextprotocol/server-memory"

// regPkg is one package version a local registry serves.
type regPkg struct {
	name, version string
	manifest      map[string]any // package.json, to which dist is added
	tgz           []byte
}

// localRegistry serves pkgs like the npm registry (packuments and
// tarballs), so that npx installs with no outside service.
func localRegistry(t testing.TB, pkgs []regPkg) *httptest.Server {
	t.Helper()
	return localRegistryOn(t, pkgs, "127.0.0.1:0")
}

// localRegistryOn is localRegistry listening on addr. Tarball URLs name
// the host the client asked (its Host header), so that a registry reached
// by a name gives tarballs by that name.
func localRegistryOn(t testing.TB, pkgs []regPkg, addr string) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	return registryOn(t, pkgs, ln)
}

// registryOn is localRegistryOn serving on ln.
func registryOn(t testing.TB, pkgs []regPkg, ln net.Listener) *httptest.Server {
	t.Helper()
	byName := map[string][]regPkg{}
	tarballs := map[string][]byte{}
	for _, p := range pkgs {
		byName[p.name] = append(byName[p.name], p)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tgz, ok := tarballs[r.URL.Path]; ok {
			_, _ = w.Write(tgz)
			return
		}
		versions, ok := byName[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		doc := map[string]any{"name": versions[0].name}
		vs := map[string]any{}
		latest := ""
		for _, p := range versions {
			m := map[string]any{}
			for k, v := range p.manifest {
				m[k] = v
			}
			m["name"], m["version"] = p.name, p.version
			sum512 := sha512.Sum512(p.tgz)
			sum1 := sha1.Sum(p.tgz)
			m["dist"] = map[string]string{
				"tarball":   "http://" + r.Host + "/-/tarball/" + strings.ReplaceAll(p.name, "/", "%2f") + "/" + p.version + ".tgz",
				"shasum":    hex.EncodeToString(sum1[:]),
				"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum512[:]),
			}
			vs[p.version] = m
			if latest == "" || semverLess(latest, p.version) {
				latest = p.version
			}
		}
		doc["versions"] = vs
		doc["dist-tags"] = map[string]string{"latest": latest}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	for _, p := range pkgs {
		tarballs["/-/tarball/"+p.name+"/"+p.version+".tgz"] = p.tgz
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// semverLess compares MAJOR.MINOR.PATCH numerically (enough to pick the
// latest of the versions a lock file holds).
func semverLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < 3 && i < len(pa) && i < len(pb); i++ {
		x, _ := strconv.Atoi(strings.SplitN(pa[i], "-", 2)[0])
		y, _ := strconv.Atoi(strings.SplitN(pb[i], "-", 2)[0])
		if x != y {
			return x < y
		}
	}
	return false
}

// lockedPackages packs every package e2e/package-lock.json installed
// (server-memory and all it needs among them) from e2e/node_modules, as
// "npm pack" would: the files under package/, the package's own
// node_modules left out.
func lockedPackages(t testing.TB) []regPkg {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e2eDir, "package-lock.json"))
	mustTB(t, err)
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	mustTB(t, json.Unmarshal(b, &lock))
	var out []regPkg
	for key, p := range lock.Packages {
		i := strings.LastIndex(key, "node_modules/")
		if i < 0 {
			continue
		}
		dir := filepath.Join(e2eDir, key)
		mb, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			t.Fatalf("%s: %v (run npm ci --prefix e2e)", key, err)
		}
		var m map[string]any
		mustTB(t, json.Unmarshal(mb, &m))
		delete(m, "scripts") // installed already built; nothing runs at install
		out = append(out, regPkg{name: key[i+len("node_modules/"):], version: p.Version, manifest: m, tgz: packDir(t, dir)})
	}
	return out
}

// packDir makes an npm tarball of dir.
func packDir(t testing.TB, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if rel == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), Size: int64(len(body)), ModTime: time.Unix(499162500, 0)}); err != nil {
			return err
		}
		_, err = tw.Write(body)
		return err
	})
	mustTB(t, err)
	mustTB(t, tw.Close())
	mustTB(t, gz.Close())
	return buf.Bytes()
}

// echoPackage is npmTarball's echo server as a registry package.
func echoPackage(t testing.TB) regPkg {
	return regPkg{name: npxPkg, version: "1.0.0", manifest: map[string]any{"bin": map[string]string{npxPkg: "server.js"}}, tgz: npmTarball(t)}
}

// warmPackage runs "npx -y pkg" once outside rootfs against registry, in
// dir, so that pkg is in home's npm cache, as after a first use without
// rootfs. (npx runs a package that the project in its working directory
// has installed, as e2e has server-memory: dir must be outside e2e.)
func warmPackage(t testing.TB, home, dir, registry, pkg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npx", "-y", pkg)
	cmd.Env = launchEnv(home, "npm_config_registry="+registry)
	cmd.Stdin = strings.NewReader("") // the servers exit at end of input
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("warming the npm cache with %s: %v\n%s", pkg, err, out)
	}
}

// treeDigest is a digest of every name, mode, size, link target and
// content below dir: equal digests mean the tree is unchanged byte for
// byte.
func treeDigest(t *testing.T, dir string) string {
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
		must(t, err)
		io.WriteString(h, p+"\x00"+fi.Mode().String()+"\x00")
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			io.WriteString(h, l)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			must(t, err)
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestLaunchNpxServerMemoryKeepsItsGraph: the real server-memory, started
// by npx from a warm cache with no network, keeps an entity across a
// restart; the npm cache is unchanged byte for byte; the entity is in the
// server's own layer, which another npx server does not see. Negative
// control: with --cache-writes discard (the old behaviour) the graph is
// empty at the second start.
func TestLaunchNpxServerMemoryKeepsItsGraph(t *testing.T) {
	rootfs := buildRootfs(t)
	nodeBin(t)
	home, _ := launchHome(t)
	proj := filepath.Join(filepath.Dir(home), "proj") // the client's project, outside e2e (see warmPackage)
	must(t, os.Mkdir(proj, 0o755))
	reg := localRegistry(t, append(lockedPackages(t), echoPackage(t)))
	registry := reg.URL + "/"
	warmPackage(t, home, proj, registry, memoryPkg)
	warmPackage(t, home, proj, registry, npxPkg)
	reg.Close() // from here on nothing can be downloaded, network or not
	cache := filepath.Join(home, ".npm")
	before := treeDigest(t, cache)
	layers := filepath.Join(home, ".local", "state", "rootfs", "overlay")

	env := map[string]string{"HOME": home, "npm_config_registry": registry, "XDG_STATE_HOME": ""}
	run := func(flags []string, pkg string, steps ...step) *transcript {
		t.Helper()
		return runTS(t, wrap(rootfs, append([]string{"--no-network", "--setenv", "npm_config_registry"}, flags...), "npx", "-y", pkg),
			scenario{Env: env, Roots: []mcpRoot{}, Cwd: proj, Steps: steps})
	}
	create := func(name string) step {
		return call("create", "create_entities", map[string]any{"entities": []any{
			map[string]any{"name": name, "entityType": "test", "observations": []string{"kept across restarts"}}}})
	}
	read := call("read", "read_graph", nil)

	entity := "rootfs-e2e-" + randHex(6)
	first := run(nil, memoryPkg, create(entity), read)
	if c := first.step(t, "create"); !c.succeeded() {
		t.Fatalf("create_entities: %s\nstderr:\n%s", c, first.stderr)
	}
	expect(t, kindWorks, "server-memory sees its entity in the same session", strings.Contains(first.step(t, "read").Text, entity),
		"%s\nstderr:\n%s", first.step(t, "read"), first.stderr)
	expect(t, kindWorks, "the first start says once where the writes to the cache go and how to reset them",
		strings.Contains(first.stderr, "kept for its next start") && strings.Contains(first.stderr, "rm -r "+layers+"/npx-server-memory-"), "stderr:\n%s", first.stderr)

	second := run(nil, memoryPkg, read)
	expect(t, kindWorks, "server-memory's graph survives a restart", strings.Contains(second.step(t, "read").Text, entity),
		"%s\nstderr:\n%s", second.step(t, "read"), second.stderr)
	expect(t, kindWorks, "the second start says nothing more", !strings.Contains(second.stderr, "kept for its next start"), "stderr:\n%s", second.stderr)

	// The graph is in the server's layer, at the path it has in the cache.
	files, _ := filepath.Glob(filepath.Join(layers, "npx-server-memory-*", "npm-cache-*", "upper", "_npx", "*", "node_modules", memoryPkg, "dist", "memory.jsonl"))
	if len(files) != 1 {
		var all []string
		_ = filepath.WalkDir(layers, func(p string, _ fs.DirEntry, _ error) error { all = append(all, p); return nil })
		t.Fatalf("the graph in the layer: %q, want one file; the layers hold:\n%s", files, strings.Join(all, "\n"))
	}
	b, _ := os.ReadFile(files[0])
	expect(t, kindWorks, "the graph is kept in the server's layer", strings.Contains(string(b), entity), "%s: %q", files[0], b)
	upper := files[0][:strings.Index(files[0], "/upper/")+len("/upper")]
	serverDir := filepath.Dir(filepath.Dir(upper))
	if fi, err := os.Stat(serverDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the server's layer directory %s: %v, %v; want mode 0700", serverDir, fi, err)
	}
	rel, _ := filepath.Rel(upper, files[0])
	inCache := filepath.Join(cache, rel)
	if _, err := os.Stat(inCache); err == nil {
		t.Errorf("the graph reached the host cache: %s", inCache)
	}

	// Another server from the same cache: it reads the package directory
	// (control: the path is in its sandbox) but not the first one's graph.
	echo := run(nil, npxPkg,
		call("code", "read", map[string]any{"path": filepath.Join(filepath.Dir(inCache), "index.js")}),
		call("graph", "read", map[string]any{"path": inCache}))
	expect(t, kindWorks, "another npx server reads server-memory's package in the cache", echo.step(t, "code").succeeded() && strings.Contains(echo.step(t, "code").Text, "memory"),
		"%s\nstderr:\n%s", echo.step(t, "code"), echo.stderr)
	expect(t, kindContain, "another npx server does not see server-memory's kept graph", !strings.Contains(echo.step(t, "graph").Text, entity),
		"%s", echo.step(t, "graph"))

	// Negative control: writes discarded, as before layers were kept.
	lost := "rootfs-e2e-lost-" + randHex(6)
	d1 := run([]string{"--cache-writes", "discard"}, memoryPkg, create(lost), read)
	if !strings.Contains(d1.step(t, "read").Text, lost) {
		t.Fatalf("--cache-writes discard: the entity is not there even in its own session: %s\nstderr:\n%s", d1.step(t, "read"), d1.stderr)
	}
	d2 := run([]string{"--cache-writes", "discard"}, memoryPkg, read)
	expect(t, kindControl, "with --cache-writes discard the graph is empty at the next start", d2.step(t, "read").succeeded() && !strings.Contains(d2.step(t, "read").Text, lost),
		"%s\nstderr:\n%s", d2.step(t, "read"), d2.stderr)

	expect(t, kindContain, "the npm cache is unchanged byte for byte", treeDigest(t, cache) == before, "%s changed", cache)
	if ents, _ := os.ReadDir(proj); len(ents) != 0 {
		t.Errorf("the servers wrote in the project: %v", ents)
	}
}

// TestLaunchNpxServerMemoryColdCache: on a machine where npm never ran
// (no ~/.npm), the first start downloads server-memory, and its graph and
// the download are both kept for the next start, which works with the
// registry gone. npm's update notice stays off stderr. Negative control:
// with --cache-writes discard, the next start finds neither.
func TestLaunchNpxServerMemoryColdCache(t *testing.T) {
	rootfs := buildRootfs(t)
	nodeBin(t)
	home, _ := launchHome(t)
	proj := filepath.Join(filepath.Dir(home), "proj")
	must(t, os.Mkdir(proj, 0o755))
	cache := filepath.Join(home, ".npm")
	if _, err := os.Stat(cache); err == nil {
		t.Fatalf("%s exists: not a cold cache", cache)
	}
	reg := localRegistry(t, lockedPackages(t))
	registry := reg.URL + "/"
	allowReg := "localhost:" + reg.URL[strings.LastIndex(reg.URL, ":")+1:] // the host's loopback, at the same URL inside
	env := map[string]string{"HOME": home, "npm_config_registry": registry, "XDG_STATE_HOME": ""}
	run := func(flags []string, steps ...step) *transcript {
		t.Helper()
		return runTS(t, wrap(rootfs, append([]string{"--setenv", "npm_config_registry", "--allow-net", allowReg}, flags...), "npx", "-y", memoryPkg),
			scenario{Env: env, Roots: []mcpRoot{}, Cwd: proj, Steps: steps})
	}
	create := func(name string) step {
		return call("create", "create_entities", map[string]any{"entities": []any{
			map[string]any{"name": name, "entityType": "test", "observations": []string{"kept across restarts"}}}})
	}
	read := call("read", "read_graph", nil)

	entity := "rootfs-e2e-cold-" + randHex(6)
	lost := "rootfs-e2e-cold-lost-" + randHex(6)
	first := run(nil, create(entity), read)
	if c := first.step(t, "create"); !c.succeeded() {
		t.Fatalf("create_entities from a cold cache: %s\nstderr:\n%s", c, first.stderr)
	}
	d1 := run([]string{"--cache-writes", "discard"}, create(lost), read)
	if !strings.Contains(d1.step(t, "read").Text, lost) {
		t.Fatalf("--cache-writes discard: the entity is not there even in its own session: %s\nstderr:\n%s", d1.step(t, "read"), d1.stderr)
	}
	for _, tr := range []*transcript{first, d1} {
		expect(t, kindWorks, "npm's update notice is off", !strings.Contains(tr.stderr, "npm notice") && !strings.Contains(tr.stderr, "New major version"), "stderr:\n%s", tr.stderr)
	}
	fi, err := os.Stat(cache)
	if err != nil || !fi.IsDir() {
		t.Fatalf("the cache was not made: %v", err)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Errorf("the server's downloads reached the host cache: %v", ents)
	}
	reg.Close() // from here on nothing can be downloaded

	second := run(nil, read)
	expect(t, kindWorks, "server-memory starts without the registry and its graph survives, from a cold cache", strings.Contains(second.step(t, "read").Text, entity),
		"%s\nstderr:\n%s", second.step(t, "read"), second.stderr)
	// Without its package npx cannot start the server (it asks the closed
	// registry once, without retries), and the client says so.
	d2 := runTSMayFail(t, wrap(rootfs, []string{"--setenv", "npm_config_registry", "--allow-net", allowReg, "--setenv", "npm_config_fetch_retries=0", "--cache-writes", "discard"}, "npx", "-y", memoryPkg),
		scenario{Env: env, Roots: []mcpRoot{}, Cwd: proj, Steps: []step{read}})
	gone := d2.Fatal != ""
	if !gone {
		gone = !strings.Contains(d2.step(t, "read").Text, lost)
	}
	expect(t, kindControl, "with --cache-writes discard the next start has neither the package nor the graph", gone, "%+v\nstderr:\n%s", d2.Steps, d2.stderr)
}
