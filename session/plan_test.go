package session

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/rootset"
)

func TestTableOptionsBeneath(t *testing.T) {
	for _, tt := range []struct {
		name   string
		layout rootset.Layout
		want   []string
	}{
		{"host layout shows roots below the sandbox's /tmp", rootset.LayoutHost, []string{"tmp"}},
		{"flat layout has no host paths", rootset.LayoutFlat, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := &Options{Roots: RootOptions{Layout: tt.layout, Allow: []string{"/a"}, ReadOnly: true}}
			got := o.tableOptions()
			if !slices.Equal(got.Beneath, tt.want) || got.Layout != tt.layout || !got.ReadOnly || !slices.Equal(got.Allow, []string{"/a"}) {
				t.Errorf("tableOptions() = %+v, want Beneath %q and the roots' rules", got, tt.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing", "server")
	for _, tt := range []struct {
		name    string
		o       Options
		wantErr error
	}{
		{"a command on PATH", Options{Command: []string{"sh"}}, nil},
		{"a bad --setenv", Options{Command: []string{"sh"}, Sandbox: SandboxOptions{SetEnv: []string{"=x"}}}, ErrUsage},
		{"a bad bind", Options{Command: []string{"sh"}, Sandbox: SandboxOptions{Binds: []string{"relative"}}}, ErrUsage},
		{"a command nowhere", Options{Command: []string{"rootfs-no-such-command"}}, mountmgr.ErrCommandNotFound},
		{"an absolute command without roots", Options{Command: []string{missing}}, mountmgr.ErrCommandNotFound},
		{"an absolute command that may be in the view", Options{Command: []string{missing}, Roots: RootOptions{Named: []string{dir}}}, nil},
		{"an argument naming /", Options{Command: []string{"sh", "/"}}, ErrUsage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := Check(&tt.o); !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Check() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestWritableReaders: each reader of the writable set sees the parts it
// is documented to see.
func TestWritableReaders(t *testing.T) {
	allow := t.TempDir()
	allowReal, _ := filepath.EvalSymlinks(allow)
	w := newWritable(&Options{Roots: RootOptions{Allow: []string{allow}}})
	w.roots = []string{"/r"}
	if got := w.forAutoBind(); !slices.Equal(got, []string{"/r", allowReal}) {
		t.Errorf("forAutoBind() = %q, want the roots at start and --allow", got)
	}
	w.readOnly = true
	if got := w.forAutoBind(); got != nil {
		t.Errorf("forAutoBind() under --read-only = %q, want nothing", got)
	}

	// A bind source reached through a link in an --allow directory is
	// refused even under --read-only: a client root there may have been
	// written in an earlier session.
	secret := t.TempDir()
	if err := os.Symlink(secret, filepath.Join(allow, "cache")); err != nil {
		t.Fatal(err)
	}
	bind := mountmgr.Bind{Source: filepath.Join(allowReal, "cache"), Dest: "/cache", ReadOnly: true}
	if err := w.checkBindSources([]mountmgr.Bind{bind}); !errors.Is(err, ErrUsage) {
		t.Errorf("checkBindSources() = %v, want a refusal (%v)", err, ErrUsage)
	}
	if err := (&Writable{}).checkBindSources([]mountmgr.Bind{bind}); err != nil {
		t.Errorf("control: with nothing writable, checkBindSources() = %v", err)
	}
}
