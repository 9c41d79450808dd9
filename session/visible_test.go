package session

import (
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rootfs-dev/rootfs/rootset"
)

// TestAuditLogInRootWarns: an audit log the server could rewrite (in one
// of its roots) is said once; one outside every root is not.
func TestAuditLogInRootWarns(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	other, _ := filepath.EvalSymlinks(t.TempDir())
	for _, c := range []struct {
		log  string
		want int
	}{{filepath.Join(dir, "audit.log"), 1}, {filepath.Join(other, "audit.log"), 0}} {
		core, logs := observer.New(zap.WarnLevel)
		v, err := newVisibility(&Options{AuditLog: c.log}, zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		tab := rootset.BuildTable([]rootset.Root{{URI: dir}}, rootset.TableOptions{})
		v.installed("client", tab, nil)
		v.installed("client", tab, nil)
		tab.Close()
		v.close()
		if n := logs.FilterMessageSnippet("lies in a root").Len(); n != c.want {
			t.Errorf("log %s: %d warnings, want %d", c.log, n, c.want)
		}
	}
}
