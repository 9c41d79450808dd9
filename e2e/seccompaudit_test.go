//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/instance"
)

// TestAuditSeccompRefusal: under rootfs run --audit-log, a server's call
// that the seccomp filter refuses (unshare) still fails with EPERM, and
// the log holds exactly one record of it: op seccomp, the call's name,
// the server's pid as it sees it itself, its command and the reason;
// rootfs why lists it. As root and as nobody (rootfs in a user namespace
// it owns), on both data paths. Negative controls: without rootfs the call
// is not EPERM; without --audit-log it fails the same and nothing counts
// or lists it (no listener).
func TestAuditSeccompRefusal(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	// Negative control: the same server without rootfs reaches the kernel,
	// which says something else (EINVAL: a Go server has threads, and
	// CLONE_NEWUSER wants one), so EPERM below is the filter's.
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, cs, stderr, err := connectAs(t, ctx, []string{naive}, nil)
		if err != nil {
			t.Fatalf("naive without rootfs: %v\n%s", err, stderr)
		}
		defer cs.Close()
		text, _, err := toolText(ctx, cs, "unshare", nil)
		expect(t, kindControl, "unshare without rootfs is not refused with EPERM", err == nil && !strings.HasPrefix(text, "EPERM"), "%q %v", text, err)
	}()
	for _, m := range nestedModes(t) {
		t.Run(m.name, func(t *testing.T) {
			base := openTempDir(t)
			proj := filepath.Join(base, "proj")
			logDir := filepath.Join(base, "log")
			runtimeDir := filepath.Join(base, "run")
			must(t, os.Mkdir(proj, 0o755))
			must(t, os.Mkdir(logDir, 0o755))
			must(t, os.Mkdir(runtimeDir, 0o700))
			for _, p := range []string{proj, logDir, runtimeDir} {
				must(t, os.Chown(p, int(m.uid), int(m.uid)))
			}
			t.Setenv("XDG_RUNTIME_DIR", runtimeDir)
			logFile := filepath.Join(logDir, "audit.log")
			rootfsCmd := func(args ...string) string {
				cmd := exec.Command(rootfs, args...)
				if m.cred != nil {
					cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.cred}
				}
				out, _ := cmd.CombinedOutput()
				return string(out)
			}

			for _, withLog := range []bool{true, false} {
				name := m.name + ", with --audit-log"
				flags := append([]string{}, m.flags...)
				if withLog {
					flags = append(flags, "--audit-log", logFile)
				} else {
					name = m.name + ", without --audit-log (control)"
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				_, cs, stderr, err := connectAs(t, ctx, wrap(rootfs, flags, naive), m.cred, fileRoot(proj))
				unprivilegedRefused(t, m, err, stderr)
				if err != nil {
					cancel()
					t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
				}
				text, _, err := toolText(ctx, cs, "unshare", nil)
				if err != nil {
					cancel()
					t.Fatalf("unshare tool: %v\nstderr:\n%s", err, stderr)
				}
				var pid int
				n, _ := fmt.Sscanf(text, "EPERM pid %d", &pid)
				expect(t, kindContain, "the refused call fails with EPERM ("+name+")", n == 1 && pid > 0, "%q", text)

				// status and why, while the session runs.
				var info instance.Info
				for i := 0; i < 50; i++ {
					var infos []instance.Info
					if json.Unmarshal([]byte(rootfsCmd("status", "--json")), &infos) == nil && len(infos) == 1 {
						info = infos[0]
						if !withLog || info.Stats.Refused[audit.OpSeccomp] > 0 {
							break
						}
					}
					time.Sleep(100 * time.Millisecond)
				}
				why := rootfsCmd("why")
				line := "seccomp unshare by naive: refused by the seccomp filter"
				if withLog {
					expect(t, kindWorks, "status counts the seccomp refusal ("+name+")", info.Stats.Refused[audit.OpSeccomp] == 1, "%+v", info.Stats)
					expect(t, kindWorks, "why lists the seccomp refusal ("+name+")", strings.Contains(why, line), "%s", why)
				} else {
					expect(t, kindWorks, "nothing reports a refusal without the log ("+name+")", info.ID != "" && info.Stats.Refused[audit.OpSeccomp] == 0 && !strings.Contains(why, "seccomp"), "%+v\n%s", info, why)
					expect(t, kindWorks, "no word about seccomp on stderr without the log ("+name+")", !strings.Contains(stderr.String(), "seccomp"), "%s", stderr)
				}
				cs.Close()
				cancel()
				if !withLog {
					continue
				}
				expect(t, kindWorks, "no fallback said when the kernel gives a listener ("+name+")", !strings.Contains(stderr.String(), "seccomp filter refuses are not recorded"), "%s", stderr)

				f, err := os.Open(logFile)
				must(t, err)
				var got []audit.Record
				var raw []string
				sc := bufio.NewScanner(f)
				for sc.Scan() {
					var r audit.Record
					must(t, json.Unmarshal(sc.Bytes(), &r))
					if r.Op == audit.OpSeccomp {
						r.Time, r.Instance = time.Time{}, ""
						got = append(got, r)
						raw = append(raw, sc.Text())
					}
				}
				f.Close()
				want := audit.Record{Op: audit.OpSeccomp, Syscall: "unshare", Result: audit.ResultRefused, PID: pid, Comm: "naive", Reason: audit.ReasonSeccomp}
				expect(t, kindWorks, "the log has exactly the refused call's record ("+name+")", len(got) == 1 && reflect.DeepEqual(got[0], want), "got %+v\nwant %+v", got, want)
				tail := fmt.Sprintf(`,"op":"seccomp","syscall":"unshare","result":"refused","pid":%d,"comm":"naive","reason":"refused by the seccomp filter"}`, pid)
				expect(t, kindWorks, "the record's line ("+name+")", len(raw) == 1 && strings.HasSuffix(raw[0], tail), "%q", raw)
			}
		})
	}
}

// TestAuditSeccompFallback: rootfs run --audit-log under a filter that
// already has a listener (outerlistener, as in a container whose runtime
// supervises its calls), where the kernel refuses the sandbox's own
// (EBUSY): the sandbox loads the plain filter, the call still fails with
// EPERM, rootfs says once on stderr that these refusals are not recorded,
// and the log has no seccomp record. As root and as nobody. The control
// is TestAuditSeccompRefusal: without the outer listener they are.
func TestAuditSeccompFallback(t *testing.T) {
	naive := buildNaive(t)
	rootfs := buildRootfs(t)
	outer := filepath.Join(binDir, "outerlistener", "outerlistener")
	if out, err := goCmd("build", "-o", outer, "./e2e/outerlistener").CombinedOutput(); err != nil {
		t.Fatalf("go build ./e2e/outerlistener: %v\n%s", err, out)
	}
	for _, m := range nestedModes(t) {
		t.Run(m.name, func(t *testing.T) {
			base := openTempDir(t)
			proj := filepath.Join(base, "proj")
			logDir := filepath.Join(base, "log")
			must(t, os.Mkdir(proj, 0o755))
			must(t, os.Mkdir(logDir, 0o755))
			for _, p := range []string{proj, logDir} {
				must(t, os.Chown(p, int(m.uid), int(m.uid)))
			}
			logFile := filepath.Join(logDir, "audit.log")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			argv := append([]string{outer}, wrap(rootfs, append(append([]string{}, m.flags...), "--audit-log", logFile), naive)...)
			_, cs, stderr, err := connectAs(t, ctx, argv, m.cred, fileRoot(proj))
			unprivilegedRefused(t, m, err, stderr)
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			text, _, err := toolText(ctx, cs, "unshare", nil)
			if err != nil {
				t.Fatalf("unshare tool: %v\nstderr:\n%s", err, stderr)
			}
			expect(t, kindContain, "the refused call fails with EPERM under the plain filter ("+m.name+")", strings.HasPrefix(text, "EPERM pid "), "%q", text)
			cs.Close()
			said := strings.Count(stderr.String(), "system calls the seccomp filter refuses are not recorded")
			expect(t, kindWorks, "rootfs says once that seccomp refusals are not recorded ("+m.name+")", said == 1 && strings.Contains(stderr.String(), "device or resource busy"), "stderr:\n%s", stderr)
			b, _ := os.ReadFile(logFile)
			expect(t, kindWorks, "the log has no seccomp record ("+m.name+")", !strings.Contains(string(b), `"op":"seccomp"`), "%s", b)
		})
	}
}
