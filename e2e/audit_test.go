package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/instance"
)

// TestAuditLogStatusWhy: a server under rootfs run --audit-log writes,
// reads and reaches outside its root; the log holds the root set, the
// change, the reads and the refusal with the flag that would allow it,
// on the data path and layout the suite runs. While it runs, rootfs status
// lists it with its roots and counts, and rootfs why explains a path in
// the root and one outside; another user is told nothing.
func TestAuditLogStatusWhy(t *testing.T) {
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	f := newFixture(t, "proj")
	proj := f.roots["proj"]
	logFile := filepath.Join(t.TempDir(), "audit.log")
	runtimeDir := t.TempDir()
	outside := "/opt-rootfs-e2e-" + randHex(4) + "/id_rsa" // not in any root, nor the sandbox's own /tmp
	inView := func(p string) string {                      // where the server sees a host path of proj
		if flatLayout() {
			return "/proj" + strings.TrimPrefix(p, proj)
		}
		return p
	}

	done := make(chan *transcript, 1)
	go func() {
		done <- runTS(t, wrap(rootfs, []string{"--audit-log", logFile}, naive), scenario{
			Env:   map[string]string{"XDG_RUNTIME_DIR": runtimeDir},
			Roots: []mcpRoot{f.root("proj")},
			Steps: []step{
				call("write", "write_file", map[string]any{"path": inView(proj) + "/new.txt", "content": "hello"}),
				call("read1", "read_file", map[string]any{"path": inView(filepath.Join(proj, "proj.txt"))}),
				call("read2", "read_file", map[string]any{"path": inView(filepath.Join(proj, "proj.txt"))}),
				call("outside", "read_file", map[string]any{"path": outside}),
				{"op": "sleep", "ms": 4000},
			},
		})
	}()

	status := func(cred *syscall.Credential, args ...string) (string, error) {
		cmd := exec.Command(rootfs, args...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtimeDir)
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var infos []instance.Info
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		out, err := status(nil, "status", "--json")
		if err == nil && json.Unmarshal([]byte(out), &infos) == nil && len(infos) == 1 && len(infos[0].Roots) == 1 && infos[0].Roots[0].Host == proj && infos[0].Stats.Refused[audit.OpLookup] > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(infos) != 1 {
		t.Fatalf("rootfs status did not list the session: %+v", infos)
	}
	in := infos[0]
	if len(in.Roots) != 1 || in.Roots[0].Host != proj || in.Client != "rootfs-e2e-ts 0.0.1" || !strings.HasSuffix(in.Command[0], "naive") {
		t.Errorf("status: %+v", in)
	}
	expect(t, kindWorks, "status counts the refusal", in.Stats.Refused[audit.OpLookup] > 0, "%+v", in.Stats)
	out, _ := status(nil, "why", "--json", filepath.Join(proj, "proj.txt"), "/etc/shadow")
	expect(t, kindWorks, "why says the root shows a file in it", strings.Contains(out, `"visible": true`) && strings.Contains(out, "root "+proj), "%s", out)
	expect(t, kindWorks, "why says what would show /etc/shadow", strings.Contains(out, `"allow": "--root /etc/shadow`), "%s", out)
	out, _ = status(nil, "why")
	expect(t, kindWorks, "why lists the refusal with the flag that allows it", strings.Contains(out, filepath.Dir(outside)) && strings.Contains(out, "to allow: --root"), "%s", out)
	other, _ := status(&syscall.Credential{Uid: 65534, Gid: 65534}, "status", "--json")
	expect(t, kindContain, "another user's rootfs status shows nothing of the session", !strings.Contains(other, proj) && !strings.Contains(other, "naive"), "%s", other)

	tr := <-done
	if s := tr.step(t, "write"); !s.succeeded() {
		t.Fatalf("write: %s\nstderr:\n%s", s, tr.stderr)
	}
	expect(t, kindWorks, "the root set is said once at info level", strings.Contains(tr.stderr, "roots: "+proj), "stderr:\n%s", tr.stderr)

	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := audit.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%v in:\n%s", err, b)
	}
	has := func(pred func(r audit.Record) bool) bool {
		for _, r := range recs {
			if pred(r) {
				return true
			}
		}
		return false
	}
	newPath := inView(proj) + "/new.txt"
	expect(t, kindWorks, "the log has the root set from the client", has(func(r audit.Record) bool {
		return r.Op == audit.OpRoots && r.Source == "client" && len(r.New) == 1 && strings.HasPrefix(r.New[0], proj)
	}), "%s", b)
	wantChanges := os.Getuid() == 0 || os.Getenv("ROOTFS_TEST_MODE") == "strict"
	if wantChanges {
		expect(t, kindWorks, "the log has the new file", has(func(r audit.Record) bool {
			return (r.Op == audit.OpCreate || r.Op == audit.OpWrite) && r.Path == newPath && r.Host == filepath.Join(proj, "new.txt") && r.PID > 0
		}), "%s", b)
		expect(t, kindWorks, "the log counts the reads of proj.txt", has(func(r audit.Record) bool {
			return r.Op == audit.OpRead && r.Path == inView(filepath.Join(proj, "proj.txt")) && r.Count >= 1
		}), "%s", b)
	}
	top := "/" + strings.Split(outside, "/")[1]
	expect(t, kindWorks, "the log has the refused name with the flag that would show it", has(func(r audit.Record) bool {
		return r.Op == audit.OpLookup && r.Result == audit.ResultRefused && r.Path == top && strings.Contains(r.Allow, "--root")
	}), "%s", b)
	expect(t, kindContain, "nothing of the secret's content reaches the log", !strings.Contains(string(b), f.token), "%s", b)
}

// TestAuditAsRootAndUnprivileged: the audit log, status and why as root
// and as an unprivileged user (rootfs in a user namespace it owns), on both
// data paths. Without root, the kernel data path cannot watch what the
// kernel serves (fanotify filesystem marks need CAP_SYS_ADMIN in the
// initial user namespace): rootfs says so once, and the log still holds
// the root changes and the refusals. Each user's status is refused to the
// other.
func TestAuditAsRootAndUnprivileged(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	for _, m := range nestedModes(t) {
		t.Run(m.name, func(t *testing.T) {
			base := openTempDir(t)
			proj := filepath.Join(base, "proj")
			mustWrite(t, filepath.Join(proj, "proj.txt"), "content of proj\n")
			logDir := filepath.Join(base, "log")
			runtimeDir := filepath.Join(base, "run")
			must(t, os.Mkdir(logDir, 0o755))
			must(t, os.Mkdir(runtimeDir, 0o700))
			for _, p := range []string{proj, filepath.Join(proj, "proj.txt"), logDir, runtimeDir} {
				must(t, os.Chown(p, int(m.uid), int(m.uid)))
			}
			t.Setenv("XDG_RUNTIME_DIR", runtimeDir)
			logFile := filepath.Join(logDir, "audit.log")
			outside := "/opt-rootfs-e2e-" + randHex(4)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, append(m.flags, "--audit-log", logFile), naive), m.cred, fileRoot(proj))
			unprivilegedRefused(t, m, err, stderr)
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			if _, err := pollTool(ctx, cs, "get_roots", nil, func(s string) bool { return strings.Contains(s, "file://"+inView(proj)) }); err != nil {
				t.Fatalf("roots: %v\nstderr:\n%s", err, stderr)
			}
			for _, c := range []struct {
				tool string
				args map[string]any
			}{
				{"write_file", map[string]any{"path": inView(proj) + "/new.txt", "content": "x"}},
				{"read_file", map[string]any{"path": inView(proj) + "/proj.txt"}},
				{"read_file", map[string]any{"path": outside + "/secret"}},
			} {
				toolText(ctx, cs, c.tool, c.args)
			}
			status := func(cred *syscall.Credential) string {
				cmd := exec.Command(rootfs, "status", "--json")
				if cred != nil {
					cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
				}
				out, _ := cmd.CombinedOutput()
				return string(out)
			}
			var mine string
			for i := 0; i < 100; i++ {
				if mine = status(m.cred); strings.Contains(mine, proj) && strings.Contains(mine, outside) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			expect(t, kindWorks, "status lists the session to its user ("+m.name+")", strings.Contains(mine, proj) && strings.Contains(mine, "naive"), "%s", mine)
			other := &syscall.Credential{Uid: 65534, Gid: 65534}
			if m.cred != nil {
				other = &syscall.Credential{Uid: 65533, Gid: 65533}
			}
			theirs := status(other)
			expect(t, kindContain, "status shows another user nothing of the session ("+m.name+")", !strings.Contains(theirs, proj) && !strings.Contains(theirs, "naive"), "%s", theirs)
			cs.Close()

			b, _ := os.ReadFile(logFile)
			log := string(b)
			expect(t, kindWorks, "the log has the client's roots ("+m.name+")", strings.Contains(log, `"op":"roots"`) && strings.Contains(log, `"source":"client"`), "%s", log)
			expect(t, kindWorks, "the log has the refused name with its flag ("+m.name+")", strings.Contains(log, `"op":"lookup","path":"`+outside+`"`) && strings.Contains(log, `"allow":"--root `), "%s", log)
			changes := strings.Contains(log, `"path":"`+inView(proj)+"/new.txt"+`","host":"`+filepath.Join(proj, "new.txt")+`"`)
			if m.cred != nil && !slices.Contains(m.flags, "--strict") {
				expect(t, kindWorks, "without root the kernel path says once that what the kernel serves is not recorded", strings.Count(stderr.String(), "is not recorded") == 1, "stderr:\n%s", stderr)
				return
			}
			expect(t, kindWorks, "the log has the new file ("+m.name+")", changes, "%s", log)
		})
	}
}
