package mountmgr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLayerBase(t *testing.T) {
	tests := []struct {
		name, home, state, want string
	}{
		{"XDG_STATE_HOME", "/home/u", "/var/state/u", "/var/state/u/rootfs/overlay"},
		{"relative XDG_STATE_HOME is ignored", "/home/u", "state", "/home/u/.local/state/rootfs/overlay"},
		{"default", "/home/u", "", "/home/u/.local/state/rootfs/overlay"},
		{"no home", "", "", ""},
		{"relative home", "u", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LayerBase(tt.home, tt.state); got != tt.want {
				t.Errorf("LayerBase(%q, %q) = %q, want %q", tt.home, tt.state, got, tt.want)
			}
		})
	}
}

// TestLayerDir: one server directory per host user and command line, one
// layer in it per cache; a label people can read.
func TestLayerDir(t *testing.T) {
	memory := []string{"npx", "-y", "@modelcontextprotocol/server-memory"}
	base := "/s/rootfs/overlay"
	a := layerDir(base, 1000, memory, "npm cache", "/home/u/.npm")
	if !strings.HasPrefix(a, base+"/npx-server-memory-") || !strings.HasPrefix(filepath.Base(a), "npm-cache-") {
		t.Errorf("layer %q: want %s/npx-server-memory-HASH/npm-cache-HASH", a, base)
	}
	if again := layerDir(base, 1000, append([]string(nil), memory...), "npm cache", "/home/u/.npm"); again != a {
		t.Errorf("the same server and cache got %q and %q", a, again)
	}
	tests := []struct {
		name       string
		uid        int
		argv       []string
		lower      string
		sameServer bool
	}{
		{"another server", 1000, []string{"npx", "-y", "@modelcontextprotocol/server-filesystem"}, "/home/u/.npm", false},
		{"another argument", 1000, append(append([]string(nil), memory...), "--flag"), "/home/u/.npm", false},
		{"arguments joined differently", 1000, []string{"npx", "-y @modelcontextprotocol/server-memory"}, "/home/u/.npm", false},
		{"another host user", 0, memory, "/home/u/.npm", false},
		{"another cache", 1000, memory, "/home/u/.cache/npm", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := layerDir(base, tt.uid, tt.argv, "npm cache", tt.lower)
			if b == a {
				t.Fatalf("shares the layer %q", a)
			}
			if same := LayerServerDir(b) == LayerServerDir(a); same != tt.sameServer {
				t.Errorf("server directories %q and %q: same %v, want %v", LayerServerDir(a), LayerServerDir(b), same, tt.sameServer)
			}
		})
	}
	for argv, want := range map[string]string{
		"uvx mcp-server-git":                "uvx-mcp-server-git",
		"npx -y @scope/pkg@1.2.3":           "npx-pkg-1.2.3",
		"/usr/bin/npx":                      "npx",
		"pipx run ../../etc":                "pipx-run",
		"npx -y " + strings.Repeat("x", 99): "npx-" + strings.Repeat("x", 44),
	} {
		if got := layerLabel(strings.Fields(argv)); got != want {
			t.Errorf("layerLabel(%q) = %q, want %q", argv, got, want)
		}
	}
}

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
			ab, err := ResolveAutoBind(&Spec{}, "/usr/bin/npx", AutoBindOptions{Name: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"},
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
			if want := layerDir(layers, hostUID(), []string{"npx", "-y", "@modelcontextprotocol/server-memory"}, "npm cache", filepath.Join(home, ".npm")); tt.layers != "" && layer != want {
				t.Errorf("layer %q, want %q", layer, want)
			} else if tt.layers == "" && layer != "" {
				t.Errorf("layer %q without Layers", layer)
			}
			if p := strings.Join(ab.Paths(), " "); !strings.Contains(p, filepath.Join(home, ".npm")+" (npm cache"+tt.want) {
				t.Errorf("auto-bind line %q lacks %q", p, tt.want)
			}
			if _, err := os.Stat(filepath.Join(base, "state")); err == nil {
				t.Errorf("ResolveAutoBind made the state directory")
			}
		})
	}
}
