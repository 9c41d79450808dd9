package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/tailscale/hujson"
)

// hostIPv4 is an address of this host's own that is not loopback, or
// the test skips: it stands for "a service on the host's private side".
func hostIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("this host has no IPv4 address besides loopback to serve the test registry on")
	return ""
}

// testDNS answers names[q] for A questions on 127.0.0.1 (UDP and TCP),
// NXDOMAIN for anything else, standing for the internet's DNS; it
// returns its address.
func testDNS(t *testing.T, names map[string]string) string {
	t.Helper()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			ip, ok := names[strings.TrimSuffix(strings.ToLower(q.Name), ".")]
			if !ok {
				m.Rcode = dns.RcodeNameError
				continue
			}
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.ParseIP(ip)})
			}
		}
		_ = w.WriteMsg(m)
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	must(t, err)
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	must(t, err)
	udp, tcp := &dns.Server{PacketConn: pc, Handler: h}, &dns.Server{Listener: ln, Handler: h}
	go udp.ActivateAndServe()
	go tcp.ActivateAndServe()
	t.Cleanup(func() { udp.Shutdown(); tcp.Shutdown() })
	return pc.LocalAddr().String()
}

// TestNetworkRegistryByName: a server whose start needs the npm registry
// (npx from a cold cache) works with --net-only naming the registry, a
// name the test DNS resolves to a machine on the test LAN (lanListener).
// Negative controls: under the default policy the same name is refused (it
// leads to a private address), and with --host-network the same registry
// is reached by its address.
func TestNetworkRegistryByName(t *testing.T) {
	rootfs := buildRootfs(t)
	nodeBin(t)
	reg := registryOn(t, lockedPackages(t), lanListener(t))
	ip := reg.Listener.Addr().(*net.TCPAddr).IP.String()
	port := reg.Listener.Addr().(*net.TCPAddr).Port
	const name = "registry.rootfs-e2e.test"
	dnsAddr := testDNS(t, map[string]string{name: ip})
	create := call("create", "create_entities", map[string]any{"entities": []any{
		map[string]any{"name": "e", "entityType": "test", "observations": []string{"x"}}}})

	start := func(registry string, flags ...string) *transcript {
		t.Helper()
		home, _ := launchHome(t)
		proj := filepath.Join(filepath.Dir(home), "proj")
		must(t, os.Mkdir(proj, 0o755))
		flags = append([]string{"--setenv", "npm_config_registry=" + registry, "--setenv", "npm_config_fetch_retries=0", "--cache-writes", "discard"}, flags...)
		return runTSMayFail(t, wrap(rootfs, flags, "npx", "-y", memoryPkg),
			scenario{Env: map[string]string{"HOME": home, "XDG_STATE_HOME": ""}, Roots: []mcpRoot{}, Cwd: proj, Steps: []step{create}, RequestTimeoutMs: 60000})
	}
	byName := fmt.Sprintf("http://%s:%d/", name, port)
	ok := start(byName, "--net-only", name, "--net-dns", dnsAddr, "--log-level", "debug")
	works := ok.Fatal == "" && ok.step(t, "create").succeeded()
	expect(t, kindWorks, "npx fetches its server from a registry --net-only names, resolved through rootfs", works, "%+v\nstderr:\n%s", ok.Steps, ok.stderr)
	// npm's connections went through the fast path (rootfs run's own
	// debug line counts them), which read their Host on the way.
	expect(t, kindWorks, "npm's connections take the fast path", fastPathUsed(ok.stderr), "stderr:\n%s", ok.stderr)

	refused := start(byName, "--net-dns", dnsAddr)
	expect(t, kindContain, "under the default policy a name that leads to a LAN address is refused", refused.Fatal != "" && strings.Contains(refused.stderr, "network: refused") && strings.Contains(refused.stderr, name),
		"fatal %q\nstderr:\n%s", refused.Fatal, refused.stderr)
	host := start(fmt.Sprintf("http://%s:%d/", ip, port), "--host-network")
	expect(t, kindControl, "with --host-network the same registry is reached", host.Fatal == "" && host.step(t, "create").succeeded(), "%+v\nstderr:\n%s", host.Steps, host.stderr)
}

// fastPathUsed says whether the network's last debug line counts a
// connection carried by the fast path.
func fastPathUsed(stderr string) bool {
	m := regexp.MustCompile(`"tcp_fast": ([0-9]+)`).FindStringSubmatch(stderr)
	return m != nil && m[1] != "0"
}

// TestNetworkHostSide: a program that ignores proxy variables (curl
// --noproxy '*', run by the server) does not reach a service on the host's
// loopback or on the host's own address under the default policy, and the
// refusal is one stderr line naming the flag and one audit record;
// --allow-net localhost:PORT shows the loopback service at the same URL.
// Negative control: --host-network reaches both.
func TestNetworkHostSide(t *testing.T) {
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	ip := hostIPv4(t)
	const body = "host-private-service"
	urls := serveBody(t, "tcp", body, "127.0.0.1:0", ip+":0")
	loop, own := urls[0], urls[1]
	loopPort := loop[strings.LastIndex(loop, ":")+1:]
	fetch := curlFetch(t)
	run := func(flags ...string) *transcript {
		t.Helper()
		return runTS(t, wrap(rootfs, flags, naive), scenario{Roots: []mcpRoot{}, Steps: []step{fetch("loop", loop), fetch("own", own)}})
	}
	logFile := filepath.Join(t.TempDir(), "audit.log")
	def := run("--audit-log", logFile)
	for _, s := range []string{"loop", "own"} {
		expect(t, kindContain, "the default policy keeps curl --noproxy from the host's "+s+" service", !strings.Contains(def.step(t, s).Text, body), "%s", def.step(t, s))
	}
	// 127.0.0.1 in the sandbox is its own loopback, where nothing listens:
	// that attempt never leaves it. The host's own address does, and is
	// refused by rootfs.
	ownHost := strings.TrimPrefix(own, "http://")
	expect(t, kindWorks, "a refusal is one stderr line with the flag that allows it", strings.Count(def.stderr, "network: refused") == 1 && strings.Contains(def.stderr, "--allow-net "+ownHost),
		"stderr:\n%s", def.stderr)
	log, _ := os.ReadFile(logFile)
	expect(t, kindWorks, "a refusal is an audit record", strings.Contains(string(log), `"op":"connect"`) && strings.Contains(string(log), `"result":"refused"`), "%s", log)

	allowed := run("--allow-net", "localhost:"+loopPort)
	expect(t, kindWorks, "--allow-net localhost:PORT shows the host's service at the same URL", strings.Contains(allowed.step(t, "loop").Text, body), "%s\nstderr:\n%s", allowed.step(t, "loop"), allowed.stderr)
	expect(t, kindContain, "--allow-net localhost:PORT shows nothing else of the host's private side", !strings.Contains(allowed.step(t, "own").Text, body), "%s", allowed.step(t, "own"))

	opt := run("--host-network")
	for _, s := range []string{"loop", "own"} {
		expect(t, kindControl, "with --host-network curl reaches the host's "+s+" service", strings.Contains(opt.step(t, s).Text, body), "%s", opt.step(t, s))
	}
}

// TestNetworkIPv6: where the host routes IPv6, the server's sandbox has
// it too, under the same policy: curl --noproxy over IPv6 does not reach
// the host's loopback ([::1]) or its own IPv6 address by default, the
// refusal names the flag with the address in brackets, and with that
// flag the host's service answers through rootfs over IPv6. Negative
// control: with --host-network curl reaches both.
func TestNetworkIPv6(t *testing.T) {
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	ip := hostIPv6(t)
	const body = "host-private-service-v6"
	urls := serveBody(t, "tcp6", body, "[::1]:0", "["+ip+"]:0")
	loop, own := urls[0], urls[1]
	fetch := curlFetch(t, "-6")
	run := func(flags ...string) *transcript {
		t.Helper()
		return runTS(t, wrap(rootfs, flags, naive), scenario{Roots: []mcpRoot{}, Steps: []step{fetch("loop", loop), fetch("own", own)}})
	}
	def := run()
	for _, s := range []string{"loop", "own"} {
		expect(t, kindContain, "the default policy keeps curl -6 from the host's "+s+" service", !strings.Contains(def.step(t, s).Text, body), "%s", def.step(t, s))
	}
	ownHost := strings.TrimPrefix(own, "http://")
	expect(t, kindWorks, "an IPv6 refusal names the flag with the address in brackets", strings.Contains(def.stderr, "--allow-net "+ownHost),
		"stderr:\n%s", def.stderr)

	allowed := run("--allow-net", ownHost)
	expect(t, kindWorks, "--allow-net [ADDR]:PORT lets the server reach it over IPv6", strings.Contains(allowed.step(t, "own").Text, body), "%s\nstderr:\n%s", allowed.step(t, "own"), allowed.stderr)
	expect(t, kindContain, "--allow-net [ADDR]:PORT shows nothing else of the host's private side", !strings.Contains(allowed.step(t, "loop").Text, body), "%s", allowed.step(t, "loop"))

	opt := run("--host-network")
	for _, s := range []string{"loop", "own"} {
		expect(t, kindControl, "with --host-network curl -6 reaches the host's "+s+" service", strings.Contains(opt.step(t, s).Text, body), "%s", opt.step(t, s))
	}
}

// serveBody serves body over HTTP on each of addrs (network is "tcp" or
// "tcp6") until the test ends, and returns their URLs in order.
func serveBody(t *testing.T, network, body string, addrs ...string) []string {
	t.Helper()
	var urls []string
	for _, a := range addrs {
		ln, err := net.Listen(network, a)
		must(t, err)
		urls = append(urls, serveOn(t, body, ln))
	}
	return urls
}

// serveOn serves body over HTTP on ln until the test ends, and returns
// its URL.
func serveOn(t *testing.T, body string, ln net.Listener) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// curlFetch makes steps in which the server runs curl --noproxy '*' (a
// program that ignores proxy variables) on a URL, with flags; the test
// skips without curl.
func curlFetch(t *testing.T, flags ...string) func(label, url string) step {
	t.Helper()
	const curl = "/usr/bin/curl"
	if _, err := os.Stat(curl); err != nil {
		t.Skip("needs curl in /usr/bin: " + err.Error())
	}
	return func(label, url string) step {
		argv := append(append([]string{curl}, flags...), "--noproxy", "*", "-sS", "--max-time", "5", url)
		return call(label, "exec", map[string]any{"argv": argv})
	}
}

// hostIPv6 is an IPv6 address of this host's own, not loopback or
// link-local, on a host that routes IPv6 (where rootfs gives the sandbox
// IPv6), or the test skips.
func hostIPv6(t *testing.T) string {
	t.Helper()
	ip, err := hostIPv6Addr()
	if err != nil {
		t.Skip(err.Error())
	}
	return ip
}

// hostIPv6Addr is hostIPv6's address, or why there is none.
func hostIPv6Addr() (string, error) {
	c, err := net.Dial("udp6", "[2001:4860:4860::8888]:53")
	if err != nil {
		return "", fmt.Errorf("this host has no IPv6 route, so rootfs gives the sandbox none: %v", err)
	}
	defer c.Close()
	a := c.LocalAddr().(*net.UDPAddr)
	if a.IP.IsLinkLocalUnicast() || a.IP.IsLoopback() {
		return "", fmt.Errorf("this host routes IPv6 only from a link-local address, so rootfs gives the sandbox none")
	}
	return a.IP.String(), nil
}

// TestVSCodeSandboxWrapStarts: a VS Code server with its own sandbox
// ("sandboxEnabled" and sandbox.network.allowedDomains) wrapped by rootfs
// wrap starts as VS Code starts it and works in its project, VS Code's
// sandbox is off in the file, and rootfs applies the domains as
// --net-only: the host's own address is refused as "not in --net-only".
func TestVSCodeSandboxWrapStarts(t *testing.T) {
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	ip := hostIPv4(t)
	home, _ := launchHome(t)
	project := filepath.Join(filepath.Dir(home), "proj")
	mustWrite(t, filepath.Join(project, "notes.md"), "project notes\n")
	cfg := filepath.Join(project, ".vscode", "mcp.json")
	original := `{
  "servers": {
    "tools": {
      "command": "` + naive + `",
      "sandboxEnabled": true,
      "sandbox": {"network": {"allowedDomains": ["registry.npmjs.org", "*.github.com"]}}
    }
  }
}
`
	mustWrite(t, cfg, original)
	cmd := exec.Command(rootfs, "wrap", "--client", "vscode")
	cmd.Dir = project
	cmd.Env = []string{"HOME=" + home, "PATH=" + filepath.Dir(rootfs) + ":" + os.Getenv("PATH"), "XDG_CONFIG_HOME=", "XDG_STATE_HOME="}
	out, err := cmd.CombinedOutput()
	expect(t, kindWorks, "rootfs wrap says VS Code's sandbox is off and why", err == nil && strings.Contains(string(out), "VS Code's own sandbox is off"), "%v\n%s", err, out)
	data, err := os.ReadFile(cfg)
	must(t, err)
	std, err := hujson.Standardize(data)
	must(t, err)
	var doc struct {
		Servers map[string]struct {
			Command        string   `json:"command"`
			Args           []string `json:"args"`
			SandboxEnabled bool     `json:"sandboxEnabled"`
		} `json:"servers"`
	}
	must(t, json.Unmarshal(std, &doc))
	e := doc.Servers["tools"]
	expect(t, kindWorks, "the wrapped entry runs rootfs with the domains and VS Code's sandbox off",
		filepath.Base(e.Command) == "rootfs" && !e.SandboxEnabled && strings.Contains(strings.Join(e.Args, " "), "--net-only registry.npmjs.org,*.github.com"), "%+v\n%s", e, data)

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "lan") }))
	ln, err := net.Listen("tcp", ip+":0")
	must(t, err)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	command := e.Command
	if !filepath.IsAbs(command) {
		command = filepath.Join(filepath.Dir(rootfs), command) // as VS Code finds it on its PATH
	}
	tr := runTS(t, append([]string{command}, e.Args...), scenario{Env: map[string]string{"HOME": home}, Cwd: project,
		Roots: []mcpRoot{{URI: "file://" + project, Name: "proj"}}, Steps: []step{
			// The entry runs rootfs run as wrap wrote it: in its default layout, the host paths.
			call("read", "read_file", map[string]any{"path": filepath.Join(project, "notes.md")}),
			call("lan", "exec", map[string]any{"argv": []string{"/usr/bin/curl", "--noproxy", "*", "-sS", "--max-time", "5", srv.URL}}),
		}})
	expect(t, kindWorks, "the wrapped server starts and reads its project", strings.Contains(tr.step(t, "read").Text, "project notes"), "%s\nstderr:\n%s", tr.step(t, "read"), tr.stderr)
	expect(t, kindContain, "what allowedDomains does not name is refused", !strings.Contains(tr.step(t, "lan").Text, "lan\n") && !strings.HasPrefix(tr.step(t, "lan").Text, "lan"),
		"%s", tr.step(t, "lan"))
	expect(t, kindWorks, "the refusal says --net-only", strings.Contains(tr.stderr, "not in --net-only"), "stderr:\n%s", tr.stderr)

	un := exec.Command(rootfs, "unwrap", "--client", "vscode")
	un.Dir, un.Env = project, cmd.Env
	if out, err := un.CombinedOutput(); err != nil {
		t.Fatalf("unwrap: %v\n%s", err, out)
	}
	back, _ := os.ReadFile(cfg)
	expect(t, kindWorks, "unwrap turns VS Code's sandbox back on, byte for byte", string(back) == original, "%s", back)
}
