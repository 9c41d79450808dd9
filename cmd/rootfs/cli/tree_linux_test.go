//go:build linux

package cli

import (
	"strings"
	"testing"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// TestRunPassesServerArgsUntouched: arguments after "--", or after
// COMMAND, reach the server as given even when they look like rootfs's
// flags (--root, --help, --version, another "--"). The control puts the
// same words before COMMAND, where rootfs reads them as its own.
func TestRunPassesServerArgsUntouched(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	bin := worldBinary(t)
	// The server prints its arguments, joined by '|', as a log message.
	server := []string{"/bin/sh", "-c", `IFS='|'; ` + say("$*"), "sh"}
	serverArgs := []string{"--root", "/etc", "--help", "--version", "--", "-h", "--log-level=debug"}
	want := `"data":"` + strings.Join(serverArgs, "|") + `"`
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"after --", append(append([]string{"run", "--"}, server...), serverArgs...)},
		{"after COMMAND without --", append(append([]string{"run", "--read-only"}, server...), serverArgs...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runAs(t, bin, 0, 0, tt.args...)
			if code != 0 || !strings.Contains(out, want) {
				t.Fatalf("exit %d stdout %q stderr %q; want the server to see %s", code, out, errs, want)
			}
		})
	}
	// Control: before COMMAND the same words are rootfs's own, so --help
	// prints run's help and no server starts.
	out, errs, code := runAs(t, bin, 0, 0, "run", "--help", "--", "/bin/true")
	if code != 0 || out != "" || !strings.Contains(errs, "rootfs run [flags] -- COMMAND") {
		t.Fatalf("control: exit %d stdout %q stderr %q", code, out, errs)
	}
}
