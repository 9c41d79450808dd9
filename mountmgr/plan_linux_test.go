//go:build linux

package mountmgr

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPlan builds the mount plan of representative specs, without
// mounting anything, and checks every step's kind and destination in
// order: the root's rbind first, the clones of the view's tmp/X before
// the private /tmp and mounted after it, and in host layout the binds
// below /tmp last.
func TestPlan(t *testing.T) {
	if fi, err := os.Lstat("/usr"); err != nil || !fi.IsDir() {
		t.Skip("needs /usr, a directory")
	}
	dir := t.TempDir() // the binds' sources (plan does not look at them)
	// The sandbox's own mounts, between the runtime and the binds.
	own := []string{
		"tmpfs /etc",
		"tmpfs /dev",
		"devbind /dev/null", "devbind /dev/zero", "devbind /dev/full", "devbind /dev/random", "devbind /dev/urandom",
		"symlink /dev/fd", "symlink /dev/stdin", "symlink /dev/stdout", "symlink /dev/stderr",
		"dir /dev/shm",
		"remount-ro /dev",
		"tmpfs /dev/shm",
		"proc /proc",
		"mask-file /proc/kcore", "mask-file /proc/keys", "mask-file /proc/latency_stats", "mask-file /proc/timer_list",
		"mask-file /proc/timer_stats", "mask-file /proc/sched_debug", "mask-file /proc/kallsyms", "mask-file /proc/kmsg",
		"mask-file /proc/kpagecount", "mask-file /proc/kpageflags", "mask-file /proc/kpagecgroup", "mask-file /proc/config.gz",
		"mask-dir /proc/acpi", "mask-dir /proc/asound", "mask-dir /proc/scsi", "mask-dir /proc/driver", "mask-dir /proc/tty",
		"ro-self /proc/bus", "ro-self /proc/fs", "ro-self /proc/irq", "ro-self /proc/sys", "ro-self /proc/sysrq-trigger",
		"tmpfs /tmp",
	}
	binds := []Bind{
		{Source: filepath.Join(dir, "cache"), Dest: "/opt/cache", ReadOnly: true, Overlay: true},
		{Source: filepath.Join(dir, "link"), Dest: "/opt/link", ReadOnly: true, Symlink: "cache"},
		{Source: filepath.Join(dir, "data"), Dest: "/tmp/proj/data", ReadOnly: true},
		{Source: filepath.Join(dir, "w"), Dest: "/srv/w"},
	}
	base := Spec{
		NewRoot: "/newroot", Argv: []string{"/srv/w/server"}, CommandInView: true,
		RuntimeDirs: []string{"/usr", "/rootfs-test-no-such-dir"},
		EtcFiles:    []string{"rootfs-test-no-such-file"},
	}
	flat, host := base, base
	flat.Binds = slices.DeleteFunc(slices.Clone(binds), func(b Bind) bool { return b.Dest == "/tmp/proj/data" })
	host.Binds, host.HostLayout, host.TmpRoots = binds, true, []string{"proj"}
	for _, tt := range []struct {
		name string
		spec Spec
		want [][]string
	}{
		{"flat", flat, [][]string{
			{"root-rbind /", "bind /usr"},
			own,
			// Scaffolds hold the mount points of binds below a top-level
			// name nothing else mounts, made read-only at the end.
			{"tmpfs /opt", "overlay /opt/cache", "symlink /opt/link", "tmpfs /srv", "bind /srv/w",
				"remount-ro /etc", "remount-ro /opt", "remount-ro /srv"},
		}},
		{"host layout", host, [][]string{
			{"root-rbind /", "tmp-clone /tmp/proj", "bind /usr"},
			own,
			// The view holds the mount points and shows the symlink; the
			// bind below /tmp waits for the view's tmp/proj.
			{"overlay /opt/cache", "bind /srv/w", "remount-ro /etc",
				"tmp-attach /tmp/proj", "bind /tmp/proj/data"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := plan(&tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, op := range ops {
				got = append(got, op.kind.String()+" "+op.dest)
			}
			if want := slices.Concat(tt.want...); !slices.Equal(got, want) {
				t.Errorf("plan:\n got %q\nwant %q", got, want)
			}
			if ops[0].source != tt.spec.NewRoot {
				t.Errorf("the root's rbind binds %q, want the new root %q", ops[0].source, tt.spec.NewRoot)
			}
		})
	}

	// With its own network the sandbox's resolv.conf is rootfs's, written
	// into /etc, and the host's is not bound.
	netted := flat
	netted.EtcFiles = []string{"resolv.conf"}
	netted.Net = &NetSpec{Device: "rfs0", Addr: netip.MustParsePrefix("10.0.2.100/24"), Gateway: netip.MustParseAddr("10.0.2.2"), MTU: 1500}
	ops, err := plan(&netted)
	if err != nil {
		t.Fatal(err)
	}
	var etc []string
	for _, op := range ops {
		if strings.HasPrefix(op.dest, "/etc/") {
			etc = append(etc, op.kind.String()+" "+op.dest)
			if op.kind == opFile && !strings.Contains(op.data, "nameserver 10.0.2.2") {
				t.Errorf("resolv.conf %q, want the gateway", op.data)
			}
		}
	}
	if !slices.Equal(etc, []string{"file /etc/resolv.conf"}) {
		t.Errorf("/etc with a network: %q, want only rootfs's resolv.conf", etc)
	}

	bad := host
	bad.TmpRoots = []string{"../etc"}
	if _, err := plan(&bad); !errors.Is(err, ErrBadSpec) {
		t.Errorf("a tmp root that is not one name: %v, want ErrBadSpec", err)
	}
}

// TestOpKindNames: every kind has its own name, the one errors print.
func TestOpKindNames(t *testing.T) {
	seen := map[string]opKind{}
	for k := opRootBind; k <= opFile; k++ {
		n := k.String()
		if prev, ok := seen[n]; ok || n == "" {
			t.Errorf("kind %d is named %q, as kind %d", k, n, prev)
		}
		seen[n] = k
	}
	if got := opKind(0).String(); got != "opKind(0)" {
		t.Errorf("the zero kind is named %q", got)
	}
}
