//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/internal/testutil"

	"github.com/rootfs-dev/rootfs/internal/linux"
)

// TestUnixSocketsInRoots: a host service listens on a socket in a root,
// and a host process dials the socket the server offers in a root, through
// "rootfs run" and the naive server's exec tool, on both data paths, by
// default and with --allow-unix-sockets (on the kernel data path the
// negative control: both directions reach the host). One root is below
// /var/tmp; the other below /tmp, inside the server's private /tmp, where
// the rule that lets the server make sockets in its /tmp covers the root
// too: the README says so, and this test pins it.
func TestUnixSocketsInRoots(t *testing.T) {
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	probe := buildProbe(t)
	abi := linux.LandlockABI()
	if abi < 2 {
		t.Skipf("landlock abi %d: refusing socket files needs abi 2 (Linux 5.19)", abi)
	}
	mkRoot := func(parent string) string {
		d, err := os.MkdirTemp(parent, "rootfs-e2e-unix-")
		must(t, err)
		t.Cleanup(func() { os.RemoveAll(d) })
		must(t, os.Chmod(d, 0o777))
		return d
	}
	varRoot, tmpRoot := mkRoot("/var/tmp"), mkRoot("/tmp")
	l, err := net.Listen("unix", filepath.Join(varRoot, "host.sock"))
	must(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "hello-from-host")
			c.Close()
		}
	}()

	for _, p := range dataPaths {
		for _, allow := range []bool{false, true} {
			name, flags := p.name, append([]string{"--root", varRoot, "--root", tmpRoot, "--ro-bind", filepath.Dir(probe)}, p.flags...)
			if allow {
				name += "/allowed"
				flags = append(flags, "--allow-unix-sockets")
			}
			t.Run(name, func(t *testing.T) {
				kernel := p.name == "kernel"
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				_, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, hostFlags(flags...), naive), nil)
				if err != nil {
					t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
				}
				run := func(args ...string) map[string]string {
					t.Helper()
					out, _, err := toolText(ctx, cs, "exec", map[string]any{"argv": append([]string{probe, "unix"}, args...)})
					if err != nil {
						t.Fatalf("exec probe unix %v: %v\nstderr:\n%s", args, err, stderr)
					}
					res := map[string]string{}
					for _, line := range strings.Split(out, "\n") {
						var r struct{ Op, Err, Line string }
						if json.Unmarshal([]byte(line), &r) == nil && r.Op != "" {
							res[r.Op] = r.Err
							if r.Line != "" {
								res[r.Op+" line"] = r.Line
							}
						}
					}
					return res
				}
				// serve runs the server's listener in dir while a host
				// process dials it; it returns the server's bind and the
				// host's outcome.
				serve := func(dir string) (string, string) {
					t.Helper()
					sock := filepath.Join(dir, "srv.sock")
					done := make(chan struct{})
					host := make(chan string, 1)
					go func() { host <- testutil.DialWhenThere(sock, done) }()
					res := run("serve", sock, "3")
					close(done)
					return res["bind"], <-host
				}

				dial := run("dial", filepath.Join(varRoot, "host.sock"))
				bind, host := serve(varRoot)
				switch {
				case allow && kernel:
					expect(t, kindControl, "the server connects to a host socket in its root ("+name+")",
						dial["dial"] == "ok" && dial["dial line"] == "hello-from-host", "%v", dial)
					expect(t, kindControl, "a host process connects to the server's socket in a root ("+name+")",
						bind == "ok" && host == "hello-from-sandbox", "bind %s, host %s", bind, host)
				case kernel:
					if abi >= 9 {
						expect(t, kindContain, "connect to a host socket in a root ("+name+")", dial["dial"] == "EACCES", "%v", dial)
					} else if dial["dial"] != "ok" {
						t.Errorf("landlock abi %d cannot refuse the connect, and the README says it works; got %v", abi, dial)
					}
					expect(t, kindContain, "a socket file in a root ("+name+")",
						bind == "EACCES" && host == "no socket", "bind %s, host %s", bind, host)
				default:
					expect(t, kindContain, "connect to a host socket through the view ("+name+")", dial["dial"] == "ECONNREFUSED", "%v", dial)
					wantBind := "EACCES"
					if allow {
						wantBind = "ok"
					}
					expect(t, kindContain, "a host process connects to a socket made through the view ("+name+")",
						bind == wantBind && (host == "ECONNREFUSED" || host == "no socket" && !allow), "bind %s, host %s", bind, host)
				}

				// The server's own socket in its private /tmp works; so
				// does one in the root below /tmp, which is inside it.
				own := run("self", "/tmp/own.sock")
				expect(t, kindWorks, "a socket in the server's private /tmp ("+name+")", own["self"] == "ok", "%v", own)
				bind, host = serve(tmpRoot)
				wantHost := "hello-from-sandbox"
				if !kernel {
					wantHost = "ECONNREFUSED"
				}
				if bind != "ok" || host != wantHost {
					t.Errorf("a root below /tmp: the README says a socket file can be made there (and reached from the host on the kernel data path); bind %s, host %s, want ok and %s", bind, host, wantHost)
				}
			})
		}
	}
}
