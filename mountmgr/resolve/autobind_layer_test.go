package resolve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/mountmgr/internal/spec"
)

// TestAutoBindLayer: with Layers, a launcher cache's overlay names its
// layer, and the auto-bind line says where the writes go; without, that
// they vanish.
func TestAutoBindLayer(t *testing.T) {
	if _, err := os.Stat("/usr/bin/npx"); err != nil {
		t.Skip("no /usr/bin/npx")
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	writeFile(t, filepath.Join(home, ".npm", "_npx", "x", "package.json"), "{}", 0o644)
	layers := filepath.Join(base, "state", "rootfs", "overlay")
	for _, tt := range []struct {
		name, layers, want string
	}{
		{"kept", layers, ", writes kept in " + layers + "/npx-server-memory-"},
		{"discarded", "", ", writes vanish with the sandbox"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ab, err := AutoBind(&Spec{}, "/usr/bin/npx", Options{Name: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"},
				Home: home, Lookup: func(string) (string, bool) { return "", false }, Layers: tt.layers})
			if err != nil {
				t.Fatal(err)
			}
			var layer string
			for _, b := range ab.Binds {
				if b.Overlay {
					layer = b.Layer
				}
			}
			if want := spec.LayerDir(layers, spec.HostUID(), []string{"npx", "-y", "@modelcontextprotocol/server-memory"}, "npm cache", filepath.Join(home, ".npm")); tt.layers != "" && layer != want {
				t.Errorf("layer %q, want %q", layer, want)
			} else if tt.layers == "" && layer != "" {
				t.Errorf("layer %q without Layers", layer)
			}
			if p := strings.Join(ab.Paths(), " "); !strings.Contains(p, filepath.Join(home, ".npm")+" (npm cache"+tt.want) {
				t.Errorf("auto-bind line %q lacks %q", p, tt.want)
			}
			if _, err := os.Stat(filepath.Join(base, "state")); err == nil {
				t.Errorf("AutoBind made the state directory")
			}
		})
	}
}
