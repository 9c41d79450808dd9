package instance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/internal/testutil"
)

func TestExplain(t *testing.T) {
	info := Info{Layout: "host",
		Roots:   []Root{{Host: "/home/me/proj", Path: "/home/me/proj", Source: "client"}, {Host: "/home/me/docs", Path: "/home/me/docs", ReadOnly: true, Source: "--root"}},
		Runtime: []string{"/usr", "/etc/ssl/certs"},
		Private: []string{"/tmp", "/dev", "/proc"},
		Binds:   []Bind{{Host: "/opt/node/bin", Path: "/opt/node/bin", ReadOnly: true, Reason: "interpreter"}, {Host: "/home/me/.npm", Path: "/home/me/.npm", ReadOnly: true, Flag: "--ro-bind"}},
	}
	for _, tt := range []struct {
		path    string
		visible bool
		because string
		ro      bool
	}{
		{"/home/me/proj/src/a.go", true, "root /home/me/proj, from client", false},
		{"/home/me/docs", true, "root /home/me/docs, from --root", true},
		{"/usr/bin/node", true, "runtime /usr (read-only)", true},
		{"/tmp/x", false, "the sandbox has its own /tmp", false},
		{"/opt/node/bin/node", true, "auto-bind /opt/node/bin (interpreter)", true},
		{"/home/me/.npm/_npx", true, "--ro-bind /home/me/.npm", true},
		{"/home/me/.ssh/id_ed25519", false, "", false},
		{"/home/me/projects", false, "", false}, // a sibling with a common prefix
		{"/etc/shadow", false, "", false},
	} {
		v := Explain(info, tt.path)
		if v.Visible != tt.visible || !strings.HasPrefix(v.Because, tt.because) || v.ReadOnly != tt.ro {
			t.Errorf("%s: %+v, want visible %v because %q ro %v", tt.path, v, tt.visible, tt.because, tt.ro)
		}
		if !v.Visible && !strings.Contains(v.Allow, "--root "+tt.path) {
			t.Errorf("%s: allow %q", tt.path, v.Allow)
		}
	}
}

func TestServeAndList(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rootfs")
	got, err := Dir(func(k string) string { return map[string]string{"XDG_RUNTIME_DIR": filepath.Dir(dir)}[k] }, os.Getuid(), true)
	if err != nil || got != dir {
		t.Fatalf("Dir: %q %v", got, err)
	}
	l := audit.New(nil, audit.Options{})
	defer l.Close()
	l.Add(audit.Record{Op: audit.OpLookup, Path: "/etc/shadow", Result: audit.ResultRefused, Allow: "--root /etc/shadow"})
	s, err := Serve(dir, "abc", func() Info {
		return Info{ID: "abc", PID: os.Getpid(), Started: time.Now(), Command: []string{"srv"}, Stats: l.Stats(), Refusals: l.Refusals()}
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(s.Path()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %v %v, want 0600", fi, err)
	}
	// A stale socket of a killed session is removed by List.
	stale := filepath.Join(dir, "dead.sock")
	dead, err := Serve(dir, "dead", func() Info { return Info{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	dead.ln.SetUnlinkOnClose(false)
	dead.Close()
	infos, err := List(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].ID != "abc" || infos[0].Stats.Refused[audit.OpLookup] != 1 || len(infos[0].Refusals) != 1 {
		t.Errorf("List: %+v", infos)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("stale socket kept")
	}
	s.Close()
	if _, err := os.Stat(s.Path()); err == nil {
		t.Error("socket left after Close")
	}
}

// TestDirRefusesOthers: a runtime directory that others may enter, or
// that another user owns, is refused.
func TestDirRefusesOthers(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "rootfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string { return map[string]string{"XDG_RUNTIME_DIR": base}[k] }
	if _, err := Dir(env, os.Getuid(), true); err == nil || !strings.Contains(err.Error(), "not a private directory") {
		t.Errorf("mode 0755: %v", err)
	}
	os.Chmod(dir, 0o700)
	if _, err := Dir(env, os.Getuid(), true); err != nil {
		t.Errorf("control, 0700: %v", err)
	}
	if os.Getuid() == 0 {
		os.Chown(dir, 65534, 65534)
		if _, err := Dir(env, os.Getuid(), true); err == nil {
			t.Error("another user's directory accepted")
		}
	}
}

// TestServeRefusesAnotherUser: another user who reaches the socket (here
// the directory and socket are opened up on purpose) gets no answer; the
// same request from this user does.
func TestServeRefusesAnotherUser(t *testing.T) {
	testutil.RequireRoot(t)
	base, _ := filepath.EvalSymlinks(t.TempDir())
	os.Chmod(base, 0o755)
	os.Chmod(filepath.Dir(base), 0o755)
	s, err := Serve(base, "x", func() Info { return Info{ID: "x", Command: []string{"secret-server"}} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	os.Chmod(s.Path(), 0o666)
	ask := func(uid uint32) string {
		cmd := exec.Command("/usr/bin/python3", "-c", `import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
try: s.sendall(b'{"op":"status"}\n'); print(s.recv(65536).decode())
except OSError as e: print("closed:", e)`, s.Path())
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("as uid %d: %v: %s", uid, err, out)
		}
		return string(out)
	}
	if out := ask(65534); strings.Contains(out, "secret-server") {
		t.Errorf("another user got the state: %s", out)
	}
	if out := ask(0); !strings.Contains(out, "secret-server") {
		t.Errorf("control: root got %q", out)
	}
}
