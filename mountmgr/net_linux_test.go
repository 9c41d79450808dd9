package mountmgr

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/internal/testutil"
	"github.com/rootfs-dev/rootfs/mountmgr/resolve"
)

// TestNetHandover: with Spec.Net the server is in a namespace of its own
// whose link is the TUN device P1 receives, with the gateway as its only
// route and resolver, and the localhost ports listened on inside.
func TestNetHandover(t *testing.T) {
	testutil.RequireRoot(t)
	sh, _ := resolve.Command("sh", DefaultPath)
	env, _ := BuildEnv(func(string) string { return "" }, nil, nil)
	spec := Spec{
		Argv: []string{sh, "-c", `cat /etc/resolv.conf; grep -o 'rfs0' /proc/net/dev; awk '$2 == "00000000" {print "default via " $3}' /proc/net/route
grep -c ':176F ' /proc/net/tcp`}, // 0x176F = 5999, listening on 127.0.0.1
		Env: env,
		Net: &NetSpec{Device: "rfs0", Addr: netip.MustParsePrefix("10.0.2.100/24"), Gateway: netip.MustParseAddr("10.0.2.2"), MTU: 65520, LocalPorts: []uint16{5999}},
	}
	out, code := runSandbox(t, sandboxRun{cfg: p1Config{Spec: spec}})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{"p1-net tun=true local=", "nameserver 10.0.2.2", "rfs0", "default via 0202000A", "\n1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
