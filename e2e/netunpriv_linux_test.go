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
// the test LAN by default, over IPv4 or IPv6; --allow-net ADDR:PORT lets
// it reach exactly that, over either family, through rootfs. Negative
// control: --host-network reaches them all. /dev/net/tun is opened to
// others for the test, as Debian and Ubuntu ship it.
func TestNetworkUnprivileged(t *testing.T) {
	testutil.RequireRoot(t)
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	fetch := curlFetch(t)
	if st, err := os.Stat("/dev/net/tun"); err != nil {
		t.Fatalf("the sandbox's network needs /dev/net/tun: %v", err)
	} else if st.Mode().Perm()&0o006 != 0o006 {
		must(t, os.Chmod("/dev/net/tun", 0o666))
		t.Cleanup(func() { os.Chmod("/dev/net/tun", st.Mode().Perm()) })
	}
	const body = "host-private-service-unpriv"
	urls := map[string]string{"own": serveBody(t, "tcp", body, hostIPv4(t)+":0")[0]}
	urls["lan"] = serveOn(t, body, lanListener(t))
	families := []string{"own", "lan"}
	if ip6, err := hostIPv6Addr(); err == nil { // else the sandbox has no IPv6 to test
		urls["own6"] = serveBody(t, "tcp6", body, "["+ip6+"]:0")[0]
		families = append(families, "own6")
	}
	base := openTempDir(t)
	proj := filepath.Join(base, "proj")
	must(t, os.Mkdir(proj, 0o755))
	must(t, os.Chown(proj, 65534, 65534))
	cred := &syscall.Credential{Uid: 65534, Gid: 65534}

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
	hostOf := func(u string) string { return strings.TrimPrefix(u, "http://") }

	def, stderr := run()
	for _, k := range families {
		expect(t, kindContain, "as nobody, the default policy keeps curl from the host's "+k+" service", !strings.Contains(def[k], body), "%s", def[k])
		expect(t, kindWorks, "as nobody, the refusal of "+k+" names the flag", strings.Contains(stderr, "--allow-net "+hostOf(urls[k])), "stderr:\n%s", stderr)
	}
	for _, k := range families {
		if k == "own" {
			continue // the host's own address is allowed by address too; lan and own6 show both families
		}
		got, stderr := run("--allow-net", hostOf(urls[k]))
		expect(t, kindWorks, "as nobody, --allow-net "+hostOf(urls[k])+" reaches it", strings.Contains(got[k], body), "%s\nstderr:\n%s", got[k], stderr)
		expect(t, kindContain, "as nobody, --allow-net "+hostOf(urls[k])+" reaches nothing else", !strings.Contains(got["own"], body), "%s", got["own"])
	}
	opt, _ := run("--host-network")
	for _, k := range families {
		expect(t, kindControl, "as nobody with --host-network curl reaches the host's "+k+" service", strings.Contains(opt[k], body), "%s", opt[k])
	}
}
