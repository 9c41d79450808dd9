package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// A server that cannot start, or that dies before answering, used to leave
// the client with "Connection closed" and the reason in a log the user had
// to find. Under rootfs the client's initialize is answered with a JSON-RPC
// error that says why in one line; these tests check what a raw client and
// the TypeScript SDK's client show. Each negative control runs the same
// server without rootfs, whose client is not told the reason.

// rawInitError starts argv in dir with env, sends initialize at once and
// keeps stdin open until the process exits. It returns the message of the
// error that answered initialize ("" when none did), the exit status and
// stderr.
func rawInitError(t *testing.T, argv, env []string, dir string) (string, int, string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	stderr := newTail(64 << 10)
	cmd.Stderr = stderr
	must(t, cmd.Start())
	defer stdin.Close()
	_, _ = io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"raw","version":"0"}}}`+"\n")
	var msg string
	read := make(chan struct{})
	go func() { // to EOF, before Wait, which closes the pipe
		defer close(read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m struct {
				ID    any `json:"id"`
				Error *struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.ID == float64(1) && m.Error != nil {
				msg = m.Error.Message
			}
		}
	}()
	select {
	case <-read:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-read
	}
	status := exitStatus(cmd.Wait())
	return msg, status, stderr.String()
}

// stderrLine is the line of stderr that starts with prefix, without it.
func stderrLine(stderr, prefix string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if s, ok := strings.CutPrefix(l, prefix); ok {
			return s
		}
	}
	return ""
}

// TestFaultServerNotStarted: a server rootfs cannot start (an interpreter
// missing on the host, or missing in the sandbox under --no-auto-bind), one
// that dies at start with a message on stderr, and a sandbox that cannot be
// built for want of /dev/fuse. The client's initialize gets an error that
// carries the reason (and the fix, where there is one), from a raw client
// and through the TypeScript SDK, with rootfs's exit status unchanged.
func TestFaultServerNotStarted(t *testing.T) {
	rootfs := buildRootfs(t)
	home, _ := launchHome(t)
	env := launchEnv(home)
	bin := filepath.Join(home, "bin")
	// An interpreter that exists nowhere.
	writeExec(t, filepath.Join(bin, "no-interp"), "#!/opt/nowhere/bin/python3\nprint('hi')\n")
	// An interpreter on the host outside everything the sandbox shows.
	interp := filepath.Join(filepath.Dir(home), "opt", "py", "bin", "python3")
	sh, err := os.ReadFile("/bin/sh")
	must(t, err)
	writeExec(t, interp, string(sh))
	writeExec(t, filepath.Join(bin, "venv-srv"), "#!"+interp+"\nexit 0\n")
	// A server that gives up at start, as one whose database is missing.
	writeExec(t, filepath.Join(bin, "dies"), "#!/bin/sh\necho 'opening /data/app.db' >&2\necho 'fatal: cannot open db' >&2\nexit 1\n")

	for _, tt := range []struct {
		name   string
		argv   []string // the server
		flags  []string
		status int
		want   []string // in the message the client gets
	}{
		{"missing interpreter", []string{filepath.Join(bin, "no-interp")}, nil, 127,
			[]string{"rootfs: cannot start the server: ", "#! interpreter /opt/nowhere/bin/python3 named by " + filepath.Join(bin, "no-interp") + " does not exist"}},
		{"interpreter not in the sandbox", []string{filepath.Join(bin, "venv-srv")}, []string{"--no-auto-bind"}, 127,
			[]string{"rootfs: cannot start the server: ", "#! interpreter " + interp, "--ro-bind " + filepath.Dir(filepath.Dir(interp))}},
		{"server dies before answering", []string{filepath.Join(bin, "dies")}, nil, 1,
			[]string{"rootfs: the server exited with status 1 before answering: fatal: cannot open db"}},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			argv := wrap(rootfs, tt.flags, tt.argv...)
			msg, status, stderr := rawInitError(t, argv, env, home)
			ok := status == tt.status
			for _, w := range tt.want {
				ok = ok && strings.Contains(msg, w)
			}
			expect(t, kindWorks, tt.name+": a raw client's initialize is answered with the reason", ok,
				"status %d (want %d), message %q, want %q\nstderr:\n%s", status, tt.status, msg, tt.want, stderr)
			if line := stderrLine(stderr, "rootfs run: "); line != "" {
				expect(t, kindWorks, tt.name+": the message is rootfs's stderr line", msg == "rootfs: cannot start the server: "+line, "message %q, stderr line %q", msg, line)
			}

			tr := runTSMayFail(t, argv, scenario{Env: map[string]string{"HOME": home}, Cwd: home, Roots: []mcpRoot{}})
			ok = tr.Fatal != ""
			for _, w := range tt.want {
				ok = ok && strings.Contains(tr.Fatal, w)
			}
			expect(t, kindWorks, tt.name+": the TypeScript SDK client reports the reason", ok, "fatal %q, want %q\nstderr:\n%s", tr.Fatal, tt.want, tr.stderr)
			t.Logf("the SDK client under rootfs: %s", tr.Fatal)

			// Negative control: the same server run directly. The client
			// learns that the connection ended, not why.
			direct := runTSMayFail(t, tt.argv, scenario{Env: map[string]string{"HOME": home}, Cwd: home, Roots: []mcpRoot{}})
			last := tt.want[len(tt.want)-1]
			expect(t, kindControl, tt.name+": run directly, the client is not told why", direct.Fatal != "" && !strings.Contains(direct.Fatal, last),
				"fatal %q", direct.Fatal)
			t.Logf("the SDK client without rootfs: %s", direct.Fatal)
		})
	}

	t.Run("no_access_to_/dev/fuse", func(t *testing.T) {
		testutil.RequireRoot(t)
		for _, tool := range []string{"unshare", "setpriv"} {
			if _, err := exec.LookPath(tool); err != nil {
				testutil.Skip(t, "needs "+tool+" (util-linux)")
			}
		}
		// nobody on a host whose /dev/fuse is 0600 root: a file bound over
		// it in a mount namespace of the test's own (the host's device is
		// untouched).
		fake := filepath.Join(t.TempDir(), "fuse")
		must(t, os.WriteFile(fake, nil, 0o600))
		argv := append([]string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
			`mount --bind "$0" /dev/fuse && exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"`, fake},
			wrap(rootfs, nil, "/bin/true")...)
		msg, status, stderr := rawInitError(t, argv, env, "/")
		line := stderrLine(stderr, "rootfs run: ")
		expect(t, kindWorks, "no /dev/fuse: rootfs refuses in one line naming the fix (125)",
			status == 125 && strings.Contains(line, "cannot open /dev/fuse: permission denied") && strings.Contains(line, "chmod 0666 /dev/fuse"),
			"status %d, stderr:\n%s", status, stderr)
		expect(t, kindWorks, "no /dev/fuse: a raw client's initialize gets that line", line != "" && msg == "rootfs: cannot start the server: "+line,
			"message %q, stderr line %q", msg, line)
		tr := runTSMayFail(t, argv, scenario{Cwd: "/", Roots: []mcpRoot{}})
		expect(t, kindWorks, "no /dev/fuse: the TypeScript SDK client reports it", strings.Contains(tr.Fatal, "chmod 0666 /dev/fuse"),
			"fatal %q\nstderr:\n%s", tr.Fatal, tr.stderr)
	})
}
