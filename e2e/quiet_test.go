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
// warnings, so a normal session logs at most one line there at the
// default level, and then only the auto-bind line. Three sessions: client
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
		name  string
		flags []string
		sc    scenario
	}{
		{"client roots that change", nil, changing},
		{"a static --root", []string{"--root", f.roots["proj-alpha"]}, scenario{Roots: []mcpRoot{}, Steps: []step{
			until("alpha", "read_file", map[string]any{"path": f.v("proj-alpha", "proj-alpha.txt")}, []string{"content of proj-alpha"}, nil),
		}}},
		{"a client without roots", nil, scenario{Cwd: f.roots["proj-beta"], Capabilities: map[string]any{}, Steps: []step{
			until("beta", "read_file", map[string]any{"path": inView(f.roots["proj-beta"]) + "/proj-beta.txt"}, []string{"content of proj-beta"}, nil),
		}}},
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
			quiet := len(lines) == 0 || (len(lines) == 1 && strings.Contains(lines[0], " INFO auto-bind: "))
			expect(t, kindWorks, s.name+": at most the auto-bind line on stderr", quiet, "%d lines:\n%s", len(lines), strings.Join(lines, "\n"))
		})
	}
	t.Run("control", func(t *testing.T) {
		tr := runTS(t, wrap(rootfs, []string{"--log-level", "debug"}, naive), changing)
		lines := logLine.FindAllString(tr.stderr, -1)
		expect(t, kindControl, "at --log-level debug the same session logs its routine lines", len(lines) > 1 && strings.Contains(tr.stderr, "roots installed"), "%d lines:\n%s", len(lines), tr.stderr)
	})
}
