//go:build linux

package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// runAs runs the rootfs binary with args as uid/gid (0 = as the test) and
// returns stdout, stderr and the exit status. Its stdin stays open (a client
// that says nothing) until rootfs exits, so the session ends with the server.
func runAs(t *testing.T, bin string, uid, gid uint32, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = "/"
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	cmd.Stdin = pr
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	}
	err = cmd.Start()
	pr.Close()
	if err == nil {
		err = cmd.Wait()
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// say is a shell command that prints a JSON-RPC log notification carrying
// data (shell-expanded): the way a wrapped server can show the test what it saw.
func say(data string) string {
	return `printf '{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"%s"}}\n' "` + data + `"`
}

// worldBinary copies the built rootfs where another user can execute it.
func worldBinary(t *testing.T) string {
	t.Helper()
	bin := rootfsBinary(t)
	if bin == "" {
		t.Skip("go toolchain not available to build cmd/rootfs")
	}
	dir, err := os.MkdirTemp("", "rootfs-run-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	nb := filepath.Join(dir, "rootfs")
	if err := os.WriteFile(nb, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return nb
}

func TestRunExitCodes(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	bin := worldBinary(t)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "f"), []byte("in the root\n"), 0o644)
	notExec := filepath.Join(root, "plain")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"server status passes through", []string{"run", "--root", root, "--", "/bin/sh", "-c", "exit 7"}, 7, "", ""},
		{"server killed by a signal", []string{"run", "--root", root, "--", "/bin/sh", "-c", "kill -9 $$"}, 137, "", ""},
		{"command not found", []string{"run", "--", "no-such-command-rootfs"}, 127, "", "command not found"},
		{"command not executable", []string{"run", "--", notExec}, 126, "", "not executable"},
		{"no command", []string{"run", "--root", root}, 125, "", "no COMMAND"},
		{"unknown flag", []string{"run", "--no-such-flag", "--", "/bin/true"}, 125, "", "unknown flag"},
		{"static root visible before start", []string{"run", "--root", root, "--", "/bin/sh", "-c", say("$(cat " + root + "/f)")}, 0, `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"in the root"}}` + "\n", ""},
		{"non-protocol server output never reaches stdout", []string{"run", "--root", root, "--", "/bin/sh", "-c", "echo banner; " + say("after")}, 0, `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"after"}}` + "\n", "not json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runAs(t, bin, 0, 0, tt.args...)
			if code != tt.wantCode || out != tt.wantOut || !strings.Contains(errs, tt.wantErr) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout %q stderr containing %q", code, out, errs, tt.wantCode, tt.wantOut, tt.wantErr)
			}
			if tt.wantCode >= 125 && tt.wantCode <= 127 && strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("error is not one line: %q", errs)
			}
		})
	}
}

// TestRunUnprivileged runs "rootfs run" as nobody: where the machine lets an
// unprivileged user have user namespaces and /dev/fuse, the sandbox works
// the same; otherwise rootfs refuses in one line that says how to fix it,
// and never runs the server unconfined.
func TestRunUnprivileged(t *testing.T) {
	testutil.RequireRoot(t)
	bin := worldBinary(t)
	root, err := os.MkdirTemp("", "rootfs-unpriv-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o777)
	os.WriteFile(filepath.Join(root, "f"), []byte("mine\n"), 0o644)
	os.Chown(filepath.Join(root, "f"), 65534, 65534)

	script := say("$(cat " + root + "/f) $(cat /etc/shadow 2>/dev/null || echo no-shadow)")
	out, errs, code := runAs(t, bin, 65534, 65534, "run", "--root", root, "--", "/bin/sh", "-c", script)
	fuseOpen := func() bool {
		cmd := exec.Command("/bin/sh", "-c", "exec 3<>/dev/fuse")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		return cmd.Run() == nil
	}()
	if !fuseOpen {
		// The refusal path: exit 125, one line, naming /dev/fuse and a fix.
		if code != 125 || out != "" || !strings.Contains(errs, "/dev/fuse") || !strings.Contains(errs, "0666") ||
			strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Fatalf("as nobody without /dev/fuse access: exit %d stdout %q stderr %q; want 125, no output, one line naming /dev/fuse and the fix", code, out, errs)
		}
		t.Logf("refused as expected: %s", strings.TrimSpace(errs))
		return
	}
	if code != 0 || !strings.Contains(out, `"data":"mine no-shadow"`) {
		t.Fatalf("unprivileged run: exit %d stdout %q stderr %q", code, out, errs)
	}
}

// TestRunUnprivilegedWithFUSE opens /dev/fuse to other users for the length
// of the test, to exercise the unprivileged sandbox end to end.
func TestRunUnprivilegedWithFUSE(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	st, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o006 != 0o006 {
		if err := os.Chmod("/dev/fuse", 0o666); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod("/dev/fuse", st.Mode().Perm()) })
	}
	TestRunUnprivileged(t)
}

// TestRunServerStderrIsAPipe: the server's stderr reaches rootfs's stderr,
// but as a pipe. Handed rootfs's own stderr (a client's log file), the
// server could reopen it through /proc/self/fd/2 and read or truncate it.
func TestRunServerStderrIsAPipe(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	bin := worldBinary(t)
	logFile := filepath.Join(t.TempDir(), "client.log")
	os.WriteFile(logFile, []byte("earlier secrets\n"), 0o600)
	script := "echo from-server >&2; " + say("$(readlink /proc/self/fd/2)")
	run := func(args ...string) string {
		f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stderr = f
		pr, pw, _ := os.Pipe()
		defer pw.Close()
		cmd.Stdin = pr
		out, err := cmd.Output()
		pr.Close()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return string(out)
	}
	// Negative control: run directly, the server's fd 2 is the log file.
	if out := run("/bin/sh", "-c", script); !strings.Contains(out, logFile) {
		t.Fatalf("control: %q", out)
	}
	out := run(bin, "run", "--", "/bin/sh", "-c", script)
	if !strings.Contains(out, "pipe:[") || strings.Contains(out, logFile) {
		t.Fatalf("in the sandbox the server saw %q", out)
	}
	b, _ := os.ReadFile(logFile)
	if !strings.Contains(string(b), "from-server") {
		t.Errorf("the server's stderr did not reach rootfs's: %q", b)
	}
}
