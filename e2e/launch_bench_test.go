package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkNpxStartup measures "npx -y PKG" from start to the answer to
// initialize, natively and under "rootfs run" (no bind flag), with the npm
// cache cold (a fresh, empty cache: npx downloads the package) and warm
// (the package in ~/.npm/_npx). The package comes from a registry served by
// the test on localhost (npxPkg), or, with ROOTFS_BENCH_NPX_PKG set (e.g.
// @modelcontextprotocol/server-everything@2026.8.31), from the npm
// registry itself; ROOTFS_RUN_ARGS adds flags to "rootfs run". Run with, e.g.:
//
//	go test ./e2e -run '^$' -bench NpxStartup -benchtime 5x
func BenchmarkNpxStartup(b *testing.B) {
	if _, err := exec.LookPath("npx"); err != nil {
		b.Skip("needs npx")
	}
	rootfs := benchRootfs(b)
	pkg, args, registry := npxPkg, []string(nil), ""
	if p := os.Getenv("ROOTFS_BENCH_NPX_PKG"); p != "" {
		pkg, args = p, []string{"stdio"}
	} else {
		srv := benchRegistry(b)
		registry = srv + "/"
	}
	extra := []string{}
	if registry != "" {
		extra = append(extra, "npm_config_registry="+registry)
	}
	npx := append([]string{"npx", "-y", pkg}, args...)
	runFlags := []string{"--setenv", "npm_config_registry"}
	if registry == "" {
		runFlags = nil
	}
	var netFlags []string
	if u, err := url.Parse(registry); err == nil && registry != "" {
		// The registry is on the host's loopback, which the sandbox's
		// network refuses unless allowed (issue 23).
		netFlags = []string{"--allow-net", "localhost:" + u.Port()}
	}
	runFlags = append(runFlags, strings.Fields(os.Getenv("ROOTFS_RUN_ARGS"))...) // to try a flag
	warmHome := filepath.Join(b.TempDir(), "home")
	mustTB(b, os.MkdirAll(warmHome, 0o755))
	if _, err := startToInitialize(npx, launchEnv(warmHome, extra...)); err != nil { // warms ~/.npm
		b.Fatal(err)
	}
	cases := []struct {
		name string
		argv []string
		cold bool
	}{
		{"native/cold", npx, true},
		{"native/warm", npx, false},
		{"rootfs/cold", append(append(append(append([]string{rootfs, "run"}, netFlags...), runFlags...), "--"), npx...), true},
		{"rootfs/warm", append(append(append(append([]string{rootfs, "run"}, netFlags...), runFlags...), "--"), npx...), false},
		{"rootfs/warm-no-network", append(append(append([]string{rootfs, "run", "--no-network"}, runFlags...), "--"), npx...), false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				home := warmHome
				if c.cold {
					b.StopTimer()
					home = filepath.Join(b.TempDir(), "home")
					mustTB(b, os.MkdirAll(home, 0o755))
					b.StartTimer()
				}
				d, err := startToInitialize(c.argv, launchEnv(home, extra...))
				if err != nil {
					b.Fatal(err)
				}
				total += d
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/initialize")
		})
	}
}

// startToInitialize starts argv, sends initialize and returns the time to
// its answer; it then closes stdin and waits for the exit (not timed).
//
// It runs in an empty directory: npx prefers a package installed in the
// working directory's node_modules (e2e/node_modules holds the reference
// servers), which would measure no launcher at all.
func startToInitialize(argv, env []string) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "rootfs-bench-cwd-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	d, stderr, err := timeSession(argv, env, dir,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`,
		func(line string, stdin io.Writer) bool {
			return strings.Contains(line, `"id":1`) && strings.Contains(line, `"result"`)
		})
	if err == nil && os.Getenv("ROOTFS_BENCH_STDERR") != "" {
		os.Stderr.WriteString(stderr)
	}
	return d, err
}

// timeSession starts argv in dir, writes first to its stdin and hands each
// line of its stdout to step (which may answer on stdin) until step says
// done; it returns the time from the start to then, and the tail of
// stderr. It then closes stdin and waits for the exit (not timed).
func timeSession(argv, env []string, dir, first string, step func(line string, stdin io.Writer) bool) (time.Duration, string, error) {
	start := time.Now()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, "", err
	}
	stderr := newTail(16 << 10)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return 0, "", err
	}
	_, _ = io.WriteString(stdin, first+"\n")
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var d time.Duration
	for sc.Scan() {
		if step(sc.Text(), stdin) {
			d = time.Since(start)
			break
		}
	}
	stdin.Close()
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	if d == 0 {
		return 0, stderr.String(), &benchError{argv: argv, stderr: stderr.String()}
	}
	return d, stderr.String(), nil
}

type benchError struct {
	argv   []string
	stderr string
}

func (e *benchError) Error() string {
	return "no answer to initialize from " + strings.Join(e.argv, " ") + "\nstderr:\n" + e.stderr
}

// benchRootfs builds rootfs for a benchmark (buildRootfs wants a *testing.T).
func benchRootfs(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv("ROOTFS_E2E_BIN"); bin != "" {
		p, _ := filepath.Abs(bin)
		return p
	}
	bin := filepath.Join(b.TempDir(), "rootfs")
	if out, err := goCmd("build", "-o", bin, "./cmd/rootfs").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		b.Skip("needs /dev/fuse")
	}
	return bin
}

// benchRegistry serves npxPkg on localhost for the benchmark's lifetime.
func benchRegistry(b *testing.B) string { return npmRegistry(b).URL }

// BenchmarkNodeStartup measures a plain node server (echoJS, a file in
// the root) from start to the answer to its first tools/list, as a client
// that declares roots starts it (startToTools), natively and under
// "rootfs run --root DIR" (ROOTFS_RUN_ARGS adds flags), interleaved in one
// loop (alternating which goes first, with a pause between runs) so both
// see the same machine. It reports the medians and their difference, the
// cost rootfs adds to a server's start:
//
//	go test ./e2e -run '^$' -bench NodeStartup -benchtime 30x
func BenchmarkNodeStartup(b *testing.B) {
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skip("needs node")
	}
	rootfs := benchRootfs(b)
	proj := filepath.Join(b.TempDir(), "proj")
	server := filepath.Join(proj, "tools", "server.js")
	mustTB(b, os.MkdirAll(filepath.Dir(server), 0o755))
	mustTB(b, os.WriteFile(server, []byte(echoJS), 0o755))
	// The same environment on both sides, as rootfs gives the server
	// (PATH, HOME, LANG): this machine sets NODE_EXTRA_CA_CERTS, which
	// costs node 50 ms or more at start, and rootfs does not pass it on.
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + b.TempDir(), "LANG=C.UTF-8"}
	native := []string{node, server}
	wrapped := append(append(append([]string{rootfs, "run", "--root", proj}, strings.Fields(os.Getenv("ROOTFS_RUN_ARGS"))...), "--"), native...)
	for _, argv := range [][]string{native, wrapped} { // page cache, binaries
		if _, err := startToTools(argv, env, proj); err != nil {
			b.Fatal(err)
		}
	}
	var nat, wr []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runs := []struct {
			argv []string
			out  *[]float64
		}{{native, &nat}, {wrapped, &wr}}
		if i%2 == 1 {
			runs[0], runs[1] = runs[1], runs[0]
		}
		for _, c := range runs {
			// A sandbox's namespaces are torn down after it exits; let
			// that finish so it does not weigh on the next start.
			b.StopTimer()
			time.Sleep(100 * time.Millisecond)
			b.StartTimer()
			d, err := startToTools(c.argv, env, proj)
			if err != nil {
				b.Fatal(err)
			}
			*c.out = append(*c.out, float64(d.Microseconds())/1000)
		}
	}
	mn, mw := medianOf(nat), medianOf(wr)
	b.ReportMetric(mn, "ms-native")
	b.ReportMetric(mw, "ms-rootfs")
	b.ReportMetric(mw-mn, "ms-added")
}

// startToTools starts argv as a client that declares roots would: it
// sends initialize (roots with listChanged), answers roots/list with root,
// sends initialized and tools/list, and returns the time to the tools/list
// answer.
func startToTools(argv, env []string, root string) (time.Duration, error) {
	d, _, err := timeSession(argv, env, root,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"bench","version":"0"}}}`,
		func(line string, stdin io.Writer) bool {
			switch {
			case strings.Contains(line, `"method":"roots/list"`):
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				_ = json.Unmarshal([]byte(line), &m)
				_, _ = io.WriteString(stdin, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"roots":[{"uri":"file://`+root+`","name":"proj"}]}}`+"\n")
			case strings.Contains(line, `"id":1`) && strings.Contains(line, `"result"`):
				_, _ = io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
			case strings.Contains(line, `"id":2`) && strings.Contains(line, `"tools"`):
				return true
			}
			return false
		})
	return d, err
}

func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
