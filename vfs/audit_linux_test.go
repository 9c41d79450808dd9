//go:build linux

package vfs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/rootset"
)

func readAudit(t *testing.T, p string) []audit.Record {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := audit.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%v in:\n%s", err, b)
	}
	return out
}

// TestViewAudit: what a client does through the view reaches the audit
// log as exactly one record per change (with the path as the client sees
// it and as the host has it, its pid and command), reads counted per
// file, and a name outside the roots refused with the flag that would
// show it; in both layouts. Negative control: without Options.Audit
// nothing is written.
func TestViewAudit(t *testing.T) {
	for _, layout := range []rootset.Layout{rootset.LayoutFlat, rootset.LayoutHost} {
		name := map[rootset.Layout]string{rootset.LayoutFlat: "flat", rootset.LayoutHost: "host"}[layout]
		t.Run(name, func(t *testing.T) {
			base, _ := filepath.EvalSymlinks(t.TempDir())
			proj := filepath.Join(base, "proj")
			if err := os.MkdirAll(proj, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(proj, "old.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			logFile := filepath.Join(base, "audit.log")
			s := serve(t, serveConfig{Roots: []string{proj}, Layout: layout, AuditLog: logFile})
			in := filepath.Join(s.Mnt, "proj") // the root as the client sees it
			view := "/proj"
			if layout == rootset.LayoutHost {
				in, view = s.Mnt+proj, proj
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(os.WriteFile(filepath.Join(in, "new.txt"), []byte("hello"), 0o644)) // create
			must(os.Mkdir(filepath.Join(in, "dir"), 0o755))                          // create
			must(os.Rename(filepath.Join(in, "new.txt"), filepath.Join(in, "dir", "moved.txt")))
			must(os.Chmod(filepath.Join(in, "old.txt"), 0o600)) // attr
			for range 3 {
				_, err := os.ReadFile(filepath.Join(in, "old.txt")) // 3 reads
				must(err)
			}
			f, err := os.OpenFile(filepath.Join(in, "old.txt"), os.O_WRONLY, 0) // write
			must(err)
			f.Close()
			must(os.Remove(filepath.Join(in, "dir", "moved.txt"))) // delete
			if _, err := os.Stat(filepath.Join(s.Mnt, "etc-shadow-not-a-root")); err == nil {
				t.Fatal("a name outside the roots exists")
			}
			s.stop()

			type key struct{ op, path, result string }
			got := map[key]audit.Record{}
			for _, r := range readAudit(t, logFile) {
				k := key{r.Op, r.Path, r.Result}
				if _, dup := got[k]; dup && r.Op != audit.OpLookup {
					t.Errorf("two records %+v", k)
				}
				got[k] = r
			}
			want := []struct {
				op, path, host string
			}{
				{audit.OpCreate, view + "/new.txt", proj + "/new.txt"},
				{audit.OpCreate, view + "/dir", proj + "/dir"},
				{audit.OpRename, view + "/new.txt", proj + "/new.txt"},
				{audit.OpAttr, view + "/old.txt", proj + "/old.txt"},
				{audit.OpWrite, view + "/old.txt", proj + "/old.txt"},
				{audit.OpDelete, view + "/dir/moved.txt", proj + "/dir/moved.txt"},
				{audit.OpRead, view + "/old.txt", proj + "/old.txt"},
			}
			for _, w := range want {
				r, ok := got[key{w.op, w.path, audit.ResultOK}]
				if !ok {
					t.Errorf("no %s record of %s; log:\n%v", w.op, w.path, got)
					continue
				}
				if r.Host != w.host || r.PID == 0 || r.Instance != "test" {
					t.Errorf("%s %s: %+v, want host %s, a pid", w.op, w.path, r, w.host)
				}
			}
			if r := got[key{audit.OpRename, view + "/new.txt", audit.ResultOK}]; r.Dest != view+"/dir/moved.txt" {
				t.Errorf("rename dest %q", r.Dest)
			}
			if r := got[key{audit.OpRead, view + "/old.txt", audit.ResultOK}]; r.Count != 3 {
				t.Errorf("reads of old.txt counted %d, want 3", r.Count)
			}
			r, ok := got[key{audit.OpLookup, "/etc-shadow-not-a-root", audit.ResultRefused}]
			if !ok || !strings.Contains(r.Allow, "--root") {
				t.Errorf("refused lookup: %+v (found %v)", r, ok)
			}
		})
	}
	t.Run("control", func(t *testing.T) {
		base, _ := filepath.EvalSymlinks(t.TempDir())
		logFile := filepath.Join(base, "audit.log")
		s := serve(t, serveConfig{Roots: []string{base}})
		os.WriteFile(filepath.Join(s.Mnt, filepath.Base(base), "x"), nil, 0o644)
		s.stop()
		if _, err := os.Stat(logFile); err == nil {
			t.Error("a log without Options.Audit")
		}
	})
}

// TestViewAuditReadOnly: a change refused on a read-only view is a
// refusal, with the reason.
func TestViewAuditReadOnly(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	proj := filepath.Join(base, "proj")
	os.MkdirAll(proj, 0o755)
	logFile := filepath.Join(base, "audit.log")
	s := serve(t, serveConfig{Roots: []string{proj}, ReadOnly: true, AuditLog: logFile})
	if err := os.WriteFile(filepath.Join(s.Mnt, "proj", "x"), nil, 0o644); err == nil {
		t.Fatal("wrote through a read-only view")
	}
	s.stop()
	for _, r := range readAudit(t, logFile) {
		if r.Op == audit.OpCreate && r.Path == "/proj/x" {
			if r.Result != audit.ResultRefused || r.Reason == "" {
				t.Errorf("%+v, want a refusal with its reason", r)
			}
			return
		}
	}
	t.Error("no record of the refused create")
}

// TestViewAuditRevoked: a read through a descriptor opened before its
// root left is refused (EIO) and recorded once for the root, however
// often the server retries.
func TestViewAuditRevoked(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	proj := filepath.Join(base, "proj")
	os.MkdirAll(proj, 0o755)
	os.WriteFile(filepath.Join(proj, "a.txt"), []byte("a"), 0o644)
	logFile := filepath.Join(base, "audit.log")
	s := serve(t, serveConfig{Roots: []string{proj}, AuditLog: logFile})
	f, err := os.Open(filepath.Join(s.Mnt, "proj", "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s.swap() // the client removes the root
	buf := make([]byte, 8)
	for range 3 {
		if _, err := f.ReadAt(buf, 0); err == nil {
			t.Fatal("read through a revoked root")
		}
	}
	f.Close()
	s.stop()
	n := 0
	for _, r := range readAudit(t, logFile) {
		if r.Op == audit.OpRevoked {
			n++
			if r.Result != audit.ResultRefused || !strings.HasPrefix(r.Host, proj) {
				t.Errorf("%+v", r)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d revoked records, want 1", n)
	}
}
