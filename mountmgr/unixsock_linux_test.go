package mountmgr

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestUnixSocketsInRoot: a host process listens on a socket in the root
// (/data), and the server tries to connect to it and to offer a socket of
// its own there for a host process to connect to. On the kernel data path
// both work without Landlock's refusal (the runs with AllowUnixSockets are
// the negative control); by default the sandbox refuses the socket file,
// and the connect where the kernel has Landlock ABI 9. Through the FUSE
// view (--strict) neither ever works: the view's inode is not the host's
// socket. Sockets in the private /tmp, /dev/shm and a --bind keep working.
func TestUnixSocketsInRoot(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	requireKernelPath(t)
	abi := linux.LandlockABI()
	if abi < 2 {
		testutil.Skip(t, fmt.Sprintf("landlock abi %d: refusing socket files needs abi 2 (Linux 5.19)", abi))
	}
	f := newFixture(t)
	hostSock := filepath.Join(f.data, "host.sock")
	l, err := net.Listen("unix", hostSock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	os.Chmod(hostSock, 0o777)
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
	cache := filepath.Join(f.base, "cache")
	if err := os.Mkdir(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	p := f.probe
	script := strings.Join([]string{
		p + " unix dial /data/host.sock",
		p + " unix serve /data/srv.sock 3",
		p + " unix self /data/self.sock",
		p + " unix self /tmp/s.sock",
		p + " unix self /dev/shm/s.sock",
		p + " unix self /cache/s.sock",
	}, "; ")
	env, _ := BuildEnv(func(string) string { return "" }, nil, nil)
	for _, tc := range []struct {
		name          string
		kernel, allow bool
	}{
		{"kernel", true, false},
		{"kernel/allowed", true, true},
		{"strict", false, false},
		{"strict/allowed", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := Spec{
				Argv: []string{"/bin/sh", "-c", script}, Env: env, TmpSize: "16m", AllowUnixSockets: tc.allow,
				Binds: []Bind{{Source: f.bin, Dest: f.bin, ReadOnly: true}, {Source: cache, Dest: "/cache"}},
			}
			done := make(chan struct{})
			hostDial := make(chan string, 1)
			go func() { hostDial <- testutil.DialWhenThere(filepath.Join(f.data, "srv.sock"), done) }()
			out, code := runSandbox(t, sandboxRun{cfg: p1Config{Data: f.data, Spec: spec, FUSE: true, Kernel: tc.kernel}})
			close(done)
			host := <-hostDial
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			got := map[string]unixOutcome{}
			sc := bufio.NewScanner(strings.NewReader(out))
			for sc.Scan() {
				var r unixOutcome
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("probe output %q: %v", sc.Text(), err)
				}
				got[r.Op+" "+r.Path] = r
			}
			t.Logf("in the sandbox:\n%s\nthe host's connect to /data/srv.sock: %s", out, host)
			want := func(key, err string) {
				t.Helper()
				if r, ok := got[key]; !ok || r.Err != err {
					t.Errorf("%s: got %+v, want %s", key, r, err)
				}
			}
			// The server's own sockets, outside the roots: always.
			for _, d := range []string{"/tmp", "/dev/shm", "/cache"} {
				want("self "+d+"/s.sock", "ok")
			}
			switch {
			case tc.allow && tc.kernel:
				// The negative control: both directions reach the host.
				want("dial /data/host.sock", "ok")
				if got["dial /data/host.sock"].Line != "hello-from-host" {
					t.Errorf("the server did not hear the host: %+v", got["dial /data/host.sock"])
				}
				want("bind /data/srv.sock", "ok")
				want("accept /data/srv.sock", "ok")
				if host != "hello-from-sandbox" {
					t.Errorf("the host did not reach the server's socket in the root: %s", host)
				}
				want("self /data/self.sock", "ok")
			case tc.kernel:
				if abi >= 9 {
					want("dial /data/host.sock", "EACCES")
				} else {
					// Nothing refuses it before ABI 9: the README says so.
					want("dial /data/host.sock", "ok")
				}
				want("bind /data/srv.sock", "EACCES")
				want("bind /data/self.sock", "EACCES")
				if host != "no socket" {
					t.Errorf("the host's connect: got %s, want no socket file at all", host)
				}
			default:
				// Through the view a socket is the view's inode, not the
				// host's: nothing connects across, allowed or not.
				want("dial /data/host.sock", "ECONNREFUSED")
				if tc.allow {
					want("bind /data/srv.sock", "ok")
					want("self /data/self.sock", "ok")
					if host != "ECONNREFUSED" {
						t.Errorf("the host's connect to the server's socket through the view: got %s, want ECONNREFUSED", host)
					}
				} else {
					want("bind /data/srv.sock", "EACCES")
					want("bind /data/self.sock", "EACCES")
				}
			}
		})
	}
}

type unixOutcome struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	Err  string `json:"err"`
	Line string `json:"line"`
}
