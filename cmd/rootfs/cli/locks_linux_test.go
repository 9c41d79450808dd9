//go:build linux

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestSQLiteTwoConnections: two SQLite connections in one process commit on
// a database in a root, through `rootfs mount` and inside `rootfs run`
// (testutil.SQLiteTwoConnectionsScript), on the daemon path (--strict) and
// on the kernel data path. The control is a control build with the
// per-descriptor locking the view had before, where the second
// connection's write fails with "database is locked".
func TestSQLiteTwoConnections(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("sqlite3 not installed (Debian package sqlite3)")
	}
	bins := map[bool]string{false: knobBinary(t), true: knobBinary(t, control.NoLockOwners)}
	for _, how := range []string{"mount", "run", "run-kernel-path"} {
		for _, control := range []bool{false, true} {
			if control && how == "run-kernel-path" {
				continue // the kernel's own locks: no view code to control
			}
			name := how
			if control {
				name += "/per-fd-control"
			}
			t.Run(name, func(t *testing.T) {
				dir, err := os.MkdirTemp("", "rootfs-sqlite2-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				os.Chmod(dir, 0o755)
				r := filepath.Join(dir, "r")
				os.Mkdir(r, 0o777)
				os.Chmod(r, 0o777)
				db := filepath.Join(r, "db")
				if out, err := exec.Command(sqlite, db, "CREATE TABLE t(x); INSERT INTO t VALUES(1);").CombinedOutput(); err != nil {
					t.Fatalf("create db: %v %s", err, out)
				}
				os.Chmod(db, 0o666)
				var out string
				switch how {
				case "mount":
					mnt := filepath.Join(dir, "mnt")
					os.Mkdir(mnt, 0o755)
					p := startMount(t, bins[control], "--root", r, mnt)
					if !p.waitFor("rootfs: mounted") {
						t.Fatalf("not mounted:\n%s", p.output())
					}
					out, err = testutil.SQLiteTwoConnections(sqlite, filepath.Join(mnt, "r", "db"))
				case "run", "run-kernel-path":
					script := strings.Replace(testutil.SQLiteTwoConnectionsScript, "%s", r+"/db", 1)
					if err := os.WriteFile(filepath.Join(r, "script.sql"), []byte(script), 0o644); err != nil {
						t.Fatal(err)
					}
					_, stderr, code := runAs(t, bins[control], 0, 0, "run", "--root", r, "--strict="+fmt.Sprint(how == "run"), "--", "/bin/sh", "-c",
						strings.ReplaceAll("sqlite3 R/db < R/script.sql > R/out 2>&1; echo $? > R/status", "R", r))
					if code != 0 {
						t.Fatalf("rootfs run: exit %d\n%s", code, stderr)
					}
					b, _ := os.ReadFile(filepath.Join(r, "out"))
					status, _ := os.ReadFile(filepath.Join(r, "status"))
					out = string(b)
					err = nil
					if s := strings.TrimSpace(string(status)); s != "0" || strings.Join(strings.Fields(out), " ") != "1 1 3" {
						err = fmt.Errorf("sqlite3 exit status %q", s)
					}
				}
				t.Logf("%v %q", err, out)
				switch {
				case !control && err != nil:
					t.Errorf("two connections in one process: %v\n%s", err, out)
				case control && (err == nil || !strings.Contains(out, "locked")):
					t.Errorf("control: two connections committed with per-descriptor locks (%v %q): the test shows nothing", err, out)
				}
				if !control {
					got, _ := exec.Command(sqlite, db, "SELECT count(*) FROM t;").CombinedOutput()
					if strings.TrimSpace(string(got)) != "3" {
						t.Errorf("rows on the host after the commits: %q, want 3", got)
					}
				}
			})
		}
	}
}
