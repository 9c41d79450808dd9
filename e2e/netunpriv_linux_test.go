package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestNetworkUnprivileged: the network half of the boundary as a user
// without privileges (nobody) runs rootfs, where rootfs owns the user
// namespace the sandbox's network namespace belongs to: curl --noproxy
// '*' in the server does not reach the host's own address or a machine on
// the test LAN by default, over IPv4 or IPv6, nor that machine by a name
// the test DNS gives; --allow-net ADDR:PORT (or the name) lets it reach
// exactly that, through rootfs. Negative control: --host-network reaches
// them all.
//
// Twice: with /dev/net/tun opened to others, as Debian and Ubuntu ship
// it, and with it at 0600, as in a container not given the device, where
// the sandbox has no TUN and reaches out only through the fast path, with
// the resolver on lo; the rules must hold the same.
func TestNetworkUnprivileged(t *testing.T) {
	testutil.RequireRoot(t)
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	fetch := curlFetch(t)
	st, err := os.Stat("/dev/net/tun")
	if err != nil {
		t.Fatalf("the sandbox's network needs /dev/net/tun: %v", err)
	}
	t.Cleanup(func() { os.Chmod("/dev/net/tun", st.Mode().Perm()) })
	const body = "host-private-service-unpriv"
	const name = "lan.rootfs-e2e.test"
	urls := map[string]string{"own": serveBody(t, "tcp", body, hostIPv4(t)+":0")[0]}
	urls["lan"] = serveOn(t, body, lanListener(t))
	lanHost := strings.TrimPrefix(urls["lan"], "http://")
	lanIP, lanPort, _ := strings.Cut(strings.TrimSuffix(lanHost, "/"), ":")
	urls["lan-name"] = "http://" + name + ":" + lanPort + "/"
	dnsAddr := testDNS(t, map[string]string{name: lanIP})
	ip6, err6 := hostIPv6Addr()
	if err6 == nil { // else the sandbox has no IPv6 to test
		urls["own6"] = serveBody(t, "tcp6", body, "["+ip6+"]:0")[0]
	}
	base := openTempDir(t)
	proj := filepath.Join(base, "proj")
	must(t, os.Mkdir(proj, 0o755))
	must(t, os.Chown(proj, 65534, 65534))
	cred := &syscall.Credential{Uid: 65534, Gid: 65534}
	hostOf := func(u string) string { return strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/") }

	for _, mode := range []struct {
		name string
		perm os.FileMode
	}{{"tun", 0o666}, {"no-tun", 0o600}} {
		t.Run(mode.name, func(t *testing.T) {
			must(t, os.Chmod("/dev/net/tun", mode.perm))
			families := []string{"own", "lan", "lan-name"}
			if err6 == nil {
				families = append(families, "own6")
			}
			run := func(flags ...string) (map[string]string, string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				_, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, flags, naive), cred, fileRoot(proj))
				unprivilegedRefused(t, nestedMode{cred: cred}, err, stderr)
				if err != nil {
					t.Fatalf("connect as nobody: %v\nstderr:\n%s", err, stderr)
				}
				defer cs.Close()
				got := map[string]string{}
				for _, k := range families {
					s := fetch(k, urls[k])
					text, _, err := toolText(ctx, cs, s["name"].(string), s["arguments"].(map[string]any))
					if err != nil {
						t.Fatalf("exec curl %s: %v\nstderr:\n%s", urls[k], err, stderr)
					}
					got[k] = text
				}
				return got, stderr.String()
			}

			def, stderr := run("--net-dns", dnsAddr)
			for _, k := range families {
				expect(t, kindContain, "as nobody ("+mode.name+"), the default policy keeps curl from the host's "+k+" service", !strings.Contains(def[k], body), "%s", def[k])
				flag := "--allow-net " + hostOf(urls[k])
				if k == "lan-name" {
					flag = "--allow-net " + name
				}
				expect(t, kindWorks, "as nobody ("+mode.name+"), the refusal of "+k+" names the flag", strings.Contains(stderr, flag), "stderr:\n%s", stderr)
			}
			noTUN := strings.Contains(stderr, "no /dev/net/tun here, so TCP and DNS only")
			expect(t, kindWorks, "as nobody ("+mode.name+"), rootfs says whether the sandbox has its device", noTUN == (mode.perm == 0o600), "stderr:\n%s", stderr)
			for _, k := range families {
				if k == "own" {
					continue // the host's own address is allowed by address too; lan and own6 show both families
				}
				allow := hostOf(urls[k])
				if k == "lan-name" {
					allow = name + ":" + lanPort
				}
				got, stderr := run("--net-dns", dnsAddr, "--allow-net", allow)
				expect(t, kindWorks, "as nobody ("+mode.name+"), --allow-net "+allow+" reaches it", strings.Contains(got[k], body), "%s\nstderr:\n%s", got[k], stderr)
				expect(t, kindContain, "as nobody ("+mode.name+"), --allow-net "+allow+" reaches nothing else", !strings.Contains(got["own"], body), "%s", got["own"])
			}
			opt, _ := run("--host-network")
			for _, k := range families {
				if k == "lan-name" {
					continue // the host's resolver does not know the test's name
				}
				expect(t, kindControl, "as nobody ("+mode.name+") with --host-network curl reaches the host's "+k+" service", strings.Contains(opt[k], body), "%s", opt[k])
			}
		})
	}
}
