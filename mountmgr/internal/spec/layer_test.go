package spec

import (
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
	a := LayerDir(base, 1000, memory, "npm cache", "/home/u/.npm")
	if !strings.HasPrefix(a, base+"/npx-server-memory-") || !strings.HasPrefix(filepath.Base(a), "npm-cache-") {
		t.Errorf("layer %q: want %s/npx-server-memory-HASH/npm-cache-HASH", a, base)
	}
	if again := LayerDir(base, 1000, append([]string(nil), memory...), "npm cache", "/home/u/.npm"); again != a {
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
			b := LayerDir(base, tt.uid, tt.argv, "npm cache", tt.lower)
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
