package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

var (
	e2eDir   string // absolute path of this package's directory
	repoRoot string // the module root
	binDir   string // built binaries, removed after the run
)

func TestMain(m *testing.M) {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	e2eDir, repoRoot = wd, filepath.Dir(wd)
	binDir, err = os.MkdirTemp("", "rootfs-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	// The sandbox may run the server as another user; let it reach the binaries.
	_ = os.Chmod(binDir, 0o755)
	code := m.Run()
	printTally(os.Stdout)
	// go test shows a passing package's output only with -v; CI can ask for
	// the tally in a file instead.
	if p := os.Getenv("ROOTFS_E2E_TALLY"); p != "" {
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
			printTally(f)
			f.Close()
		}
	}
	os.RemoveAll(binDir)
	os.Exit(code)
}

// --- tally of cases and negative controls -----------------------------------

// Kinds of counted assertions. A containment case is an attack under rootfs
// that must fail; a negative control is the same attack on the same server
// without rootfs, which must succeed (so the case can fail); a functional case
// is something that must work through rootfs.
const (
	kindContain = "containment"
	kindControl = "negative control"
	kindWorks   = "functional"
)

var tally struct {
	sync.Mutex
	n map[string][2]int // kind -> {passed, failed}
}

// expect records one counted assertion and reports it when it fails.
func expect(t *testing.T, kind, what string, ok bool, detail string, args ...any) bool {
	t.Helper()
	tally.Lock()
	if tally.n == nil {
		tally.n = map[string][2]int{}
	}
	c := tally.n[kind]
	if ok {
		c[0]++
	} else {
		c[1]++
	}
	tally.n[kind] = c
	tally.Unlock()
	if !ok {
		t.Errorf("%s %q failed: %s", kind, what, fmt.Sprintf(detail, args...))
	}
	return ok
}

func printTally(w io.Writer) {
	tally.Lock()
	defer tally.Unlock()
	if len(tally.n) == 0 {
		fmt.Fprintln(w, "e2e tally: no counted cases ran")
		return
	}
	kinds := []string{kindContain, kindControl, kindWorks}
	var parts []string
	for _, k := range kinds {
		c := tally.n[k]
		parts = append(parts, fmt.Sprintf("%d %s (%d passed, %d failed)", c[0]+c[1], k, c[0], c[1]))
	}
	fmt.Fprintln(w, "e2e tally:", strings.Join(parts, "; "))
}

// --- prerequisites and builds -------------------------------------------------

var (
	rootfsOnce sync.Once
	rootfsBin  string
	rootfsSkip string
	rootfsErr  error

	naiveOnce sync.Once
	naiveBin  string
	naiveErr  error
)

// buildRootfs builds ./cmd/rootfs once and returns the binary (or returns
// $ROOTFS_E2E_BIN, to run the suite against an installed rootfs). It skips
// only when cmd/rootfs has no main package yet; a build error fails the test.
// It also requires FUSE, which every "rootfs run" needs.
func buildRootfs(t *testing.T) string {
	t.Helper()
	rootfsOnce.Do(func() {
		if bin := os.Getenv("ROOTFS_E2E_BIN"); bin != "" { // an installed or stand-in binary
			rootfsBin, rootfsErr = filepath.Abs(bin)
			return
		}
		out, err := goCmd("list", "-f", "{{.Name}}", "./cmd/rootfs").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "main" {
			rootfsSkip = "cmd/rootfs not built yet (no main package: " + strings.TrimSpace(string(out)) + ")"
			return
		}
		bin := filepath.Join(binDir, "rootfs", "rootfs")
		if out, err := goCmd("build", "-o", bin, "./cmd/rootfs").CombinedOutput(); err != nil {
			rootfsErr = fmt.Errorf("go build ./cmd/rootfs: %v\n%s", err, out)
			return
		}
		rootfsBin = bin
	})
	if rootfsSkip != "" {
		t.Skip(rootfsSkip)
	}
	if rootfsErr != nil {
		t.Fatal(rootfsErr)
	}
	testutil.RequireFUSE(t)
	return rootfsBin
}

// buildNaive builds the naive server, static, once. It lives alone in its
// directory because rootfs binds COMMAND's directory into the sandbox.
func buildNaive(t *testing.T) string {
	t.Helper()
	naiveOnce.Do(func() {
		bin := filepath.Join(binDir, "naive", "naive")
		cmd := goCmd("build", "-o", bin, "./e2e/naive")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			naiveErr = fmt.Errorf("go build ./e2e/naive: %v\n%s", err, out)
			return
		}
		naiveBin = bin
	})
	if naiveErr != nil {
		t.Fatal(naiveErr)
	}
	return naiveBin
}

func goCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	return cmd
}

// nodeBin returns node's absolute path and checks that the pinned npm peers
// are installed.
func nodeBin(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Skip(t, "needs node 20+ on PATH")
	}
	node, _ = filepath.Abs(node)
	for _, p := range []string{"sdk", "server-filesystem", "server-everything"} {
		if _, err := os.Stat(filepath.Join(nodeModules(), "@modelcontextprotocol", p, "package.json")); err != nil {
			testutil.Skip(t, "e2e/node_modules is missing @modelcontextprotocol/"+p+": run npm ci --prefix e2e")
		}
	}
	return node
}

func nodeModules() string { return filepath.Join(e2eDir, "node_modules") }

func serverFilesystemJS() string {
	return filepath.Join(nodeModules(), "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
}

func serverEverythingJS() string {
	return filepath.Join(nodeModules(), "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// dataPaths are rootfs run's two data paths. Tests that must hold on both
// loop over them; every other test runs on the one ROOTFS_TEST_MODE names
// ("strict", or the default, "kernel"), and CI runs the package once per
// mode.
var dataPaths = []struct {
	name  string
	flags []string
}{{"kernel", []string{"--strict=false"}}, {"strict", []string{"--strict"}}}

// wrap returns the command line that runs argv under "rootfs run" with flags
// (after the data path ROOTFS_TEST_MODE asks for, so flags can override it).
func wrap(rootfs string, flags []string, argv ...string) []string {
	out := []string{rootfs, "run"}
	if os.Getenv("ROOTFS_TEST_MODE") == "strict" {
		out = append(out, "--strict")
	}
	if flatLayout() {
		out = append(out, "--layout", "flat")
	}
	out = append(out, flags...)
	out = append(out, "--")
	return append(out, argv...)
}

// flatLayout says the suite runs roots at /<name> (ROOTFS_TEST_LAYOUT=flat)
// rather than at their own paths, rootfs run's default.
func flatLayout() bool { return os.Getenv("ROOTFS_TEST_LAYOUT") == "flat" }

// inView is where rootfs run shows the root at host path p: p itself, or
// /<last name> in flat layout.
func inView(p string) string {
	if flatLayout() {
		return "/" + filepath.Base(p)
	}
	return p
}

// flat returns flags with --layout flat first: for tests whose scripts
// name roots /<name> (hostlayout_test.go has their host-layout twins).
func flat(flags ...string) []string { return append([]string{"--layout", "flat"}, flags...) }

// nodeFlags are the rootfs flags a node server from e2e/node_modules needs:
// node_modules is not a runtime directory, so it is bound read-only.
func nodeFlags() []string { return []string{"--ro-bind", nodeModules()} }

var (
	helpOnce  sync.Once
	helpFlags map[string]bool
)

// runFlag reports whether "rootfs run --help" lists flag (e.g. "--roots-timeout").
func runFlag(t *testing.T, rootfs, flag string) bool {
	helpOnce.Do(func() {
		helpFlags = map[string]bool{}
		out, _ := exec.Command(rootfs, "run", "--help").CombinedOutput()
		for _, m := range regexp.MustCompile(`--[a-z][a-z0-9-]+`).FindAllString(string(out), -1) {
			helpFlags[m] = true
		}
	})
	return helpFlags[flag]
}

// --- host fixtures -------------------------------------------------------------

// fixture is a host layout: roots under base/host, a secret outside them.
type fixture struct {
	base   string
	secret string // absolute host path of a file outside every root
	token  string // its content: a random value no sandboxed server may see
	outDir string // the directory holding secret
	roots  map[string]string
}

func newFixture(t *testing.T, rootNames ...string) *fixture {
	t.Helper()
	dir := t.TempDir()
	// t.TempDir's parent is 0700; a sandboxed server may run as another uid.
	must(t, os.Chmod(filepath.Dir(dir), 0o755))
	return newFixtureIn(t, dir, rootNames...)
}

// newFixtureIn is newFixture in dir, an empty directory the test removes
// (one outside /tmp, say, where the sandbox shows roots differently).
func newFixtureIn(t *testing.T, dir string, rootNames ...string) *fixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.Chmod(base, 0o755))
	f := &fixture{base: base, token: "secret-" + randHex(8), roots: map[string]string{}}
	f.outDir = filepath.Join(base, "outside")
	f.secret = filepath.Join(f.outDir, "secret.txt")
	mustWrite(t, f.secret, f.token+"\n")
	for _, name := range rootNames {
		dir := filepath.Join(base, "host", name)
		mustWrite(t, filepath.Join(dir, name+".txt"), "content of "+name+"\n")
		mustWrite(t, filepath.Join(dir, "sub", "deep.md"), "# deep in "+name+"\n")
		// Links that point out of the root, absolute and relative.
		must(t, os.Symlink(f.secret, filepath.Join(dir, "escape")))
		must(t, os.Symlink("../../outside", filepath.Join(dir, "up")))
		f.roots[name] = dir
	}
	return f
}

// root returns the MCP root for name, as a client would send it.
func (f *fixture) root(name string) mcpRoot {
	return mcpRoot{URI: "file://" + f.roots[name], Name: "Root " + name}
}

// v is the path of root name (and elem below it) inside rootfs run's view:
// its host path, or /<name> in flat layout.
func (f *fixture) v(name string, elem ...string) string {
	return paths{f: f, wrapped: true}.in(name, elem...)
}

// vuri is the URI the server's roots/list gives for root name under
// rootfs run: the client's own, or file:///<name> in flat layout.
func (f *fixture) vuri(name string) string {
	if flatLayout() {
		return "file:///" + filepath.Base(f.roots[name])
	}
	return f.root(name).URI
}

func (f *fixture) rootsFor(names ...string) []mcpRoot {
	var out []mcpRoot
	for _, n := range names {
		out = append(out, f.root(n))
	}
	return out
}

// paths renders paths as the server sees them: host paths when the server
// runs directly or under rootfs's host layout, "/<entry>/..." in flat layout.
type paths struct {
	f       *fixture
	wrapped bool
}

func (p paths) base(root string) string {
	if p.wrapped && flatLayout() {
		return "/" + filepath.Base(p.f.roots[root])
	}
	return p.f.roots[root]
}

func (p paths) in(root string, elem ...string) string {
	return filepath.Join(append([]string{p.base(root)}, elem...)...)
}

// raw joins without cleaning, for ".." tricks.
func (p paths) raw(root, rest string) string {
	return p.base(root) + "/" + rest
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// shadowHead is the first line of the host's /etc/shadow, or "" when this
// user cannot read it (then /etc/shadow cases have no negative control).
func shadowHead() string {
	b, err := os.ReadFile("/etc/shadow")
	if err != nil || len(b) == 0 {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}

// --- the TypeScript client -------------------------------------------------------

type mcpRoot struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

type scenario struct {
	Command          string            `json:"command"`
	Args             []string          `json:"args"`
	Env              map[string]string `json:"env,omitempty"`
	Capabilities     any               `json:"capabilities,omitempty"` // nil: roots with listChanged; map[string]any{}: none
	Roots            []mcpRoot         `json:"roots"`
	AnswerRoots      *bool             `json:"answerRoots,omitempty"`
	RequestTimeoutMs int               `json:"requestTimeoutMs,omitempty"`
	Cwd              string            `json:"cwd,omitempty"` // the client's working directory, which the server inherits
	Steps            []step            `json:"steps"`
}

type step map[string]any

func call(label, tool string, args map[string]any) step {
	if args == nil {
		args = map[string]any{}
	}
	return step{"op": "call", "label": label, "name": tool, "arguments": args}
}

// until repeats a tool call until its text holds every string of contains and
// none of absent (10 s at most): roots arrive asynchronously after initialize.
func until(label, tool string, args map[string]any, contains, absent []string) step {
	s := call(label, tool, args)
	s["op"] = "until"
	s["contains"] = contains
	s["absent"] = absent
	s["isError"] = false
	s["timeoutMs"] = 15000
	return s
}

func setRoots(label string, roots []mcpRoot, notify int) step {
	if roots == nil {
		roots = []mcpRoot{}
	}
	return step{"op": "setRoots", "label": label, "roots": roots, "notify": notify}
}

type stepRec struct {
	Label          string `json:"label"`
	Op             string `json:"op"`
	OK             bool   `json:"ok"`
	IsError        bool   `json:"isError"`
	Text           string `json:"text"`
	Error          string `json:"error"`
	Attempts       int    `json:"attempts"`
	Satisfied      bool   `json:"satisfied"`
	Ms             int    `json:"ms"`
	RootsListCalls int    `json:"rootsListCalls"`
}

// succeeded reports a tool call that returned a non-error result.
func (r *stepRec) succeeded() bool { return r.OK && !r.IsError }

func (r *stepRec) String() string {
	s := r.Text
	if r.Error != "" {
		s = "error: " + r.Error
	}
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return fmt.Sprintf("[%s ok=%v isError=%v] %q", r.Label, r.OK, r.IsError, s)
}

type transcript struct {
	Steps          []*stepRec        `json:"steps"`
	RootsListCalls int               `json:"rootsListCalls"`
	Logs           []json.RawMessage `json:"logs"`
	ServerInfo     json.RawMessage   `json:"serverInfo"`
	Fatal          string            `json:"fatal"`

	stderr string
}

func (tr *transcript) step(t *testing.T, label string) *stepRec {
	t.Helper()
	for _, s := range tr.Steps {
		if s.Label == label {
			return s
		}
	}
	t.Fatalf("no step %q in transcript; stderr:\n%s", label, tr.stderr)
	return nil
}

// runTS runs the scenario through client.mjs with command line argv.
func runTS(t *testing.T, argv []string, sc scenario) *transcript {
	t.Helper()
	tr := runTSMayFail(t, argv, sc)
	if tr.Fatal != "" {
		t.Fatalf("client.mjs: %s\nstderr:\n%s", tr.Fatal, tr.stderr)
	}
	return tr
}

// runTSMayFail is runTS for a session that may not start: the transcript's
// Fatal then says what the SDK client reported ("connect: ...").
func runTSMayFail(t *testing.T, argv []string, sc scenario) *transcript {
	t.Helper()
	node := nodeBin(t)
	sc.Command, sc.Args = argv[0], argv[1:]
	in, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(e2eDir, "client.mjs"), "-")
	cmd.Dir = e2eDir
	cmd.Stdin = bytes.NewReader(in)
	var stdout bytes.Buffer
	stderr := newTail(64 << 10)
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	runErr := cmd.Run()
	tr := &transcript{stderr: stderr.String()}
	last := lastLine(stdout.String())
	if err := json.Unmarshal([]byte(last), tr); err != nil {
		t.Fatalf("client.mjs printed no transcript (%v, run: %v)\nstdout: %q\nstderr:\n%s", err, runErr, stdout.String(), tr.stderr)
	}
	t.Logf("%s: %d steps, %d roots/list answered by the client", filepath.Base(argv[0]), len(tr.Steps), tr.RootsListCalls)
	if os.Getenv("E2E_DUMP") != "" { // debugging: the whole transcript
		for _, s := range tr.Steps {
			t.Logf("  %s", s)
		}
	}
	return tr
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tail keeps the first and the last bytes written to it (a flood of stderr
// must not fill the test's memory).
type tail struct {
	mu    sync.Mutex
	max   int
	head  []byte
	buf   []byte
	total int64
}

func newTail(max int) *tail { return &tail{max: max} }

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total += int64(len(p))
	if len(w.head) < w.max/4 {
		n := min(w.max/4-len(w.head), len(p))
		w.head = append(w.head, p[:n]...)
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) > w.max {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.max:]...)
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.total <= int64(w.max) {
		return string(w.buf)
	}
	return fmt.Sprintf("%s\n... (%d bytes in all) ...\n%s", w.head, w.total, w.buf)
}

func (w *tail) Total() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total
}

// --- raw JSON-RPC client, for faults ----------------------------------------------

// rawPeer speaks newline-delimited JSON-RPC to a process it starts, so a
// test controls every byte and sees the exit status.
type rawPeer struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *tail
	msgs   chan map[string]json.RawMessage
	exited chan struct{}
	status int

	mu          sync.Mutex
	roots       []mcpRoot
	answerRoots bool
	rootsCalls  int
	nextID      int
}

func startRaw(t *testing.T, argv []string, roots []mcpRoot, answerRoots bool) *rawPeer {
	t.Helper()
	p := &rawPeer{t: t, roots: roots, answerRoots: answerRoots, stderr: newTail(64 << 10),
		msgs: make(chan map[string]json.RawMessage, 1024), exited: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if p.stdout, err = p.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read()
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *rawPeer) read() {
	sc := bufio.NewScanner(p.stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if string(m["method"]) == `"roots/list"` && m["id"] != nil {
			p.mu.Lock()
			p.rootsCalls++
			answer, roots := p.answerRoots, p.roots
			p.mu.Unlock()
			if answer {
				if roots == nil {
					roots = []mcpRoot{}
				}
				p.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"roots": roots}})
			}
			continue
		}
		p.msgs <- m
	}
	close(p.msgs)
	err := p.cmd.Wait()
	p.status = exitStatus(err)
	close(p.exited)
}

func exitStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() >= 0 {
			return ee.ExitCode()
		}
		return 128 + 9 // killed; ExitCode is -1 for signals
	}
	if err != nil {
		return -1
	}
	return 0
}

func (p *rawPeer) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.stdin.Write(append(b, '\n'))
}

// sendLine writes one raw line (no validation) to the process.
func (p *rawPeer) sendLine(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.stdin, line+"\n")
}

// responses collects up to n responses (messages with an id and no method)
// for at most timeout.
func (p *rawPeer) responses(n int, timeout time.Duration) []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	deadline := time.After(timeout)
	for len(out) < n {
		select {
		case m, ok := <-p.msgs:
			if !ok {
				return out
			}
			if m["id"] != nil && m["method"] == nil {
				out = append(out, m)
			}
		case <-deadline:
			return out
		}
	}
	return out
}

// request sends method and waits for its response; other messages are dropped.
func (p *rawPeer) request(method string, params any, timeout time.Duration) (map[string]json.RawMessage, error) {
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	p.mu.Unlock()
	p.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-p.msgs:
			if !ok {
				return nil, fmt.Errorf("%s: stdout closed before the response", method)
			}
			if string(m["id"]) == strconv.Itoa(id) && m["method"] == nil {
				return m, nil
			}
		case <-deadline:
			return nil, fmt.Errorf("%s: no response within %v", method, timeout)
		}
	}
}

func (p *rawPeer) initialize(withRoots bool) {
	p.t.Helper()
	caps := map[string]any{}
	if withRoots {
		caps["roots"] = map[string]any{"listChanged": true}
	}
	m, err := p.request("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": caps,
		"clientInfo": map[string]any{"name": "rootfs-e2e-raw", "version": "0.0.1"}}, 30*time.Second)
	if err != nil {
		p.t.Fatalf("%v\nstderr:\n%s", err, p.stderr)
	}
	if m["result"] == nil {
		p.t.Fatalf("initialize failed: %s\nstderr:\n%s", m["error"], p.stderr)
	}
	p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
}

// tool calls a tool and returns its text and whether it was an error result
// (a JSON-RPC error is returned as err).
func (p *rawPeer) tool(name string, args map[string]any, timeout time.Duration) (text string, isError bool, err error) {
	m, err := p.request("tools/call", map[string]any{"name": name, "arguments": args}, timeout)
	if err != nil {
		return "", false, err
	}
	if m["error"] != nil {
		return "", false, fmt.Errorf("json-rpc error %s", m["error"])
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(m["result"], &res); err != nil {
		return "", false, err
	}
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n"), res.IsError, nil
}

// waitPath polls list_dir of path until it succeeds: the client's roots
// reach the view shortly after initialize, asynchronously.
func (p *rawPeer) waitPath(path string) {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		text, isErr, err := p.tool("list_dir", map[string]any{"path": path}, 30*time.Second)
		if err == nil && !isErr {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s never appeared: %q isError=%v err=%v\nstderr:\n%s", path, text, isErr, err, p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *rawPeer) waitExit(timeout time.Duration) (int, bool) {
	select {
	case <-p.exited:
		return p.status, true
	case <-time.After(timeout):
		return 0, false
	}
}

// --- host state: leftover mounts and processes ----------------------------------

// fuseMounts returns the FUSE lines of a mountinfo text.
func fuseMounts(mountinfo string) []string {
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		_, after, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		if fstype, _, _ := strings.Cut(after, " "); strings.HasPrefix(fstype, "fuse") {
			out = append(out, line)
		}
	}
	return out
}

func hostMountinfo(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newRootfsMounts returns FUSE mounts present now but not in before that
// look like rootfs's (name or source "rootfs", or a mount point under base).
func newRootfsMounts(before, now string, base string) []string {
	old := map[string]bool{}
	for _, l := range fuseMounts(before) {
		old[l] = true
	}
	var out []string
	for _, l := range fuseMounts(now) {
		if old[l] || !(strings.Contains(l, "rootfs") || (base != "" && strings.Contains(l, base))) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// markedProcs returns the pids whose command line holds marker.
func markedProcs(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		// A zombie still counts: it is gone but for its parent's wait.
		if bytes.Contains(b, []byte(marker)) {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}

// procsInfo describes pids for a failure message: each one's command, state,
// kernel wait channel and kernel stack (root reads it), so that a process
// that outlives its session says where it is stuck (a FUSE request, a
// zombie not yet reaped, a mount call).
func procsInfo(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		stat, _ := os.ReadFile(filepath.Join(dir, "stat"))
		wchan, _ := os.ReadFile(filepath.Join(dir, "wchan"))
		stack, _ := os.ReadFile(filepath.Join(dir, "stack"))
		state := string(stat)
		if i := strings.LastIndexByte(state, ')'); i >= 0 && i+3 <= len(state) {
			state = state[i+2 : i+3]
		}
		fmt.Fprintf(&b, "\n  pid %d state %s wchan %s: %s", pid, state, wchan, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " "))
		for _, l := range strings.Split(strings.TrimSpace(string(stack)), "\n") {
			if l != "" {
				fmt.Fprintf(&b, "\n    %s", l)
			}
		}
		if ns := threadNamespaces(pid); len(ns) > 1 {
			fmt.Fprintf(&b, "\n    threads in more than one mount namespace:")
			for _, l := range ns {
				fmt.Fprintf(&b, "\n      %s", l)
			}
		}
	}
	return b.String()
}

// threadNamespaces groups pid's threads by mount namespace, one line per
// namespace ("mnt:[N]: tids 12 (main) 14"), sorted. A daemon thread that
// stays in the sandbox's namespace (setns) keeps it, and its mount of the
// view, alive after the sandbox is gone.
func threadNamespaces(pid int) []string {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	ents, _ := os.ReadDir(dir)
	by := map[string][]string{}
	for _, e := range ents {
		ns, err := os.Readlink(filepath.Join(dir, e.Name(), "ns", "mnt"))
		if err != nil {
			continue
		}
		tid := e.Name()
		if tid == strconv.Itoa(pid) {
			tid += " (main)"
		}
		by[ns] = append(by[ns], tid)
	}
	var out []string
	for ns, tids := range by {
		out = append(out, ns+": tids "+strings.Join(tids, " "))
	}
	sort.Strings(out)
	return out
}

// waitGone waits up to d for no process to carry marker, and returns the
// time it took and the pids still there.
func waitGone(marker string, d time.Duration) (time.Duration, []int) {
	start := time.Now()
	for {
		pids := markedProcs(marker)
		if len(pids) == 0 || time.Since(start) > d {
			return time.Since(start), pids
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHarnessDetectors shows that the leftover detectors can fail: a FUSE
// mount of rootfs in a mountinfo text and a live marked process are found.
func TestHarnessDetectors(t *testing.T) {
	before := "22 1 0:21 / / rw - ext4 /dev/root rw\n"
	now := before + "97 22 0:52 / /tmp/rootfs-view rw,nosuid,nodev - fuse.rootfs rootfs rw,user_id=0\n"
	expect(t, kindControl, "leftover fuse.rootfs mount is detected", len(newRootfsMounts(before, now, "")) == 1,
		"mountinfo with a fuse.rootfs line gave %q", newRootfsMounts(before, now, ""))
	expect(t, kindControl, "no new mount is not reported", len(newRootfsMounts(now, now, "")) == 0, "got %q", newRootfsMounts(now, now, ""))

	marker := "rootfs-e2e-marker-" + randHex(6)
	cmd := exec.Command("/bin/sh", "-c", "sleep 30; : "+marker)
	must(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// Start returns once exec has closed the child's descriptors, but its
	// /proc/PID/cmdline reads empty until the kernel has set up the new
	// program's arguments a little later; on a loaded machine the first look
	// can fall in between. Wait for it, as a leftover is looked for late.
	pids := markedProcs(marker)
	for deadline := time.Now().Add(5 * time.Second); len(pids) == 0 && time.Now().Before(deadline); pids = markedProcs(marker) {
		time.Sleep(10 * time.Millisecond)
	}
	// The shell's child carries the marker too until it has become sleep.
	expect(t, kindControl, "leftover marked process is detected", slices.Contains(pids, cmd.Process.Pid), "pids %v, started %d", pids, cmd.Process.Pid)
	info := procsInfo([]int{cmd.Process.Pid})
	expect(t, kindControl, "a leftover is described by command and state", strings.Contains(info, marker) && regexp.MustCompile(` state [A-Z] `).MatchString(info), "%s", info)
}
