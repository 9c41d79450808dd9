package e2e

import (
	"regexp"
	"strings"
	"testing"
)

// logLine matches a line rootfs logs on stderr (zap's console encoder:
// time, level, message).
var logLine = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\S+ (DEBUG|INFO|WARN|ERROR) .*$`)

// TestQuietByDefault: clients show what a server writes on stderr as
// warnings, so a normal session logs little there at the default level:
// the auto-bind line, and one line each time its roots change (a person
// watching sees the boundary move; the working directory standing in
// until the client's roots come is not one). Three sessions: client
// roots that change while the server runs, a static --root, and a client
// that declares no roots (the working directory is the root, as under
// Codex). The control is the first session at --log-level debug, whose
// routine lines show that the test reads rootfs's stderr at all.
func TestQuietByDefault(t *testing.T) {
	rootfs := buildRootfs(t)
	naive := buildNaive(t)
	f := newFixture(t, "proj-alpha", "proj-beta")
	changing := scenario{Roots: f.rootsFor("proj-alpha"), Steps: []step{
		until("alpha", "read_file", map[string]any{"path": f.v("proj-alpha", "proj-alpha.txt")}, []string{"content of proj-alpha"}, nil),
		setRoots("swap", f.rootsFor("proj-beta"), 1),
		until("beta", "read_file", map[string]any{"path": f.v("proj-beta", "proj-beta.txt")}, []string{"content of proj-beta"}, nil),
		{"op": "close"},
	}}
	sessions := []struct {
		name     string
		flags    []string
		sc       scenario
		rootSets int // the root sets it goes through
	}{
		{"client roots that change", nil, changing, 2},
		{"a static --root", []string{"--root", f.roots["proj-alpha"]}, scenario{Roots: []mcpRoot{}, Steps: []step{
			until("alpha", "read_file", map[string]any{"path": f.v("proj-alpha", "proj-alpha.txt")}, []string{"content of proj-alpha"}, nil),
		}}, 1},
		{"a client without roots", nil, scenario{Cwd: f.roots["proj-beta"], Capabilities: map[string]any{}, Steps: []step{
			until("beta", "read_file", map[string]any{"path": inView(f.roots["proj-beta"]) + "/proj-beta.txt"}, []string{"content of proj-beta"}, nil),
		}}, 1},
	}
	for _, s := range sessions {
		t.Run(s.name, func(t *testing.T) {
			tr := runTS(t, wrap(rootfs, s.flags, naive), s.sc)
			for _, st := range tr.Steps {
				if st.Label != "" && st.Op == "until" && !st.Satisfied {
					t.Fatalf("the session did not work: %s\nstderr:\n%s", st, tr.stderr)
				}
			}
			lines := logLine.FindAllString(tr.stderr, -1)
			autoBind, roots := 0, map[string]bool{}
			quiet := true
			for _, l := range lines {
				switch {
				case strings.Contains(l, " INFO auto-bind: "):
					autoBind++
				case strings.Contains(l, " INFO roots: "):
					set := l[strings.Index(l, " INFO roots: "):]
					quiet = quiet && !roots[set] && !strings.Contains(l, `"from": "cwd"`)
					roots[set] = true
				default:
					quiet = false
				}
			}
			quiet = quiet && autoBind <= 1 && len(roots) <= s.rootSets
			expect(t, kindWorks, s.name+": the auto-bind line and one line per root change on stderr, nothing else", quiet, "%d lines:\n%s", len(lines), strings.Join(lines, "\n"))
		})
	}
	t.Run("control", func(t *testing.T) {
		tr := runTS(t, wrap(rootfs, []string{"--log-level", "debug"}, naive), changing)
		lines := logLine.FindAllString(tr.stderr, -1)
		expect(t, kindControl, "at --log-level debug the same session logs its routine lines", len(lines) > 1 && strings.Contains(tr.stderr, "roots installed"), "%d lines:\n%s", len(lines), tr.stderr)
	})
}
