//go:build linux

package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// initLine is a client's first message.
const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// runClient runs cmd as an MCP client would: it sends initialize at once
// and keeps stdin open until the process exits. It returns the error
// message that answered initialize ("" when none did), stderr and the exit
// status.
func runClient(t *testing.T, cmd *exec.Cmd) (msg, stderr string, code int) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	io.WriteString(stdin, initLine+"\n")
	read := make(chan struct{})
	go func() { // to EOF, before Wait, which closes the pipe
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m struct {
				ID    int `json:"id"`
				Error *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.ID == 1 && m.Error != nil && m.Error.Code == -32603 {
				msg = m.Error.Message
			}
		}
	}()
	select {
	case <-read:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-read
		t.Errorf("still running after 60s")
	}
	cmd.Wait()
	code = cmd.ProcessState.ExitCode()
	return msg, errb.String(), code
}

// errorLine is the line of stderr that starts with prefix, without it.
func errorLine(stderr, prefix string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if s, ok := strings.CutPrefix(l, prefix); ok {
			return s
		}
	}
	return ""
}

// TestRunFailureReachesClient: when rootfs cannot start the server, in P0
// (flags, COMMAND) or in P1 (auto-bind, the sandbox's setup), or the server
// dies before answering, the client's initialize is answered with a
// JSON-RPC error that says why in one line (the stderr line rootfs prints,
// or the server's status and last line of stderr), and the exit status
// and stderr line are as before. Without it the client saw only its stdin
// close.
func TestRunFailureReachesClient(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	bin := worldBinary(t)
	root := t.TempDir()
	noInterp := filepath.Join(root, "bin", "srv")
	os.MkdirAll(filepath.Dir(noInterp), 0o755)
	os.WriteFile(noInterp, []byte("#!/opt/nowhere/bin/python3\n"), 0o755)
	notExec := filepath.Join(root, "plain")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string // in the message; "" when it is "cannot start the server: " + the stderr line
		full string // the whole message, when it is not
	}{
		{"command not found", []string{"--", "no-such-command-rootfs"}, 127, "no-such-command-rootfs", ""},
		{"not executable", []string{"--", notExec}, 126, "not executable", ""},
		{"unknown flag", []string{"--no-such-flag", "--", "/bin/true"}, 125, "--no-such-flag", ""},
		{"missing interpreter", []string{"--", noInterp}, 127, "#! interpreter /opt/nowhere/bin/python3 named by " + noInterp + " does not exist", ""},
		{"sandbox setup", []string{"--tmp-size", "bogus", "--", "/bin/true"}, 125, "size=bogus", ""},
		{"server dies", []string{"--root", root, "--", "/bin/sh", "-c", "echo starting >&2; echo 'fatal: cannot open db' >&2; exit 1"}, 1, "",
			"rootfs: the server exited with status 1 before answering: fatal: cannot open db"},
		{"server killed", []string{"--root", root, "--", "/bin/sh", "-c", "kill -9 $$"}, 137, "",
			"rootfs: the server was killed by signal 9 (killed) before answering"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"run"}, tt.args...)...)
			cmd.Dir = root
			msg, stderr, code := runClient(t, cmd)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			if tt.full != "" {
				if msg != tt.full {
					t.Errorf("initialize answered with %q, want %q; stderr:\n%s", msg, tt.full, stderr)
				}
				return
			}
			line := errorLine(stderr, "rootfs run: ")
			if line == "" || !strings.Contains(line, tt.want) {
				t.Errorf("no stderr line naming %q:\n%s", tt.want, stderr)
			}
			if want := "rootfs: cannot start the server: " + line; msg != want {
				t.Errorf("initialize answered with %q, want %q", msg, want)
			}
		})
	}
}

// TestRunPreflightReachesClient: rootfs run by a user who cannot open
// /dev/fuse (a 0600 file bound over it, in a mount namespace of the
// test's own) refuses in P0 with one line naming the fix, exit 125, and the
// client's initialize gets that line.
func TestRunPreflightReachesClient(t *testing.T) {
	testutil.RequireRoot(t)
	bin := worldBinary(t)
	cmd := asNobodyWithoutFUSE(t, bin, "run", "--", "/bin/true")
	msg, stderr, code := runClient(t, cmd)
	line := errorLine(stderr, "rootfs run: ")
	if code != 125 || line == "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("exit %d, stderr:\n%s\nwant 125 and one line", code, stderr)
	}
	if !strings.Contains(line, "/dev/fuse") {
		// Refused earlier, for want of user namespaces: still one line
		// with its fix, which the client must get all the same.
		t.Logf("refused before the /dev/fuse check: %s", line)
	} else if !strings.Contains(line, "chmod 0666 /dev/fuse") {
		t.Errorf("the line does not give the fix: %s", line)
	}
	if want := "rootfs: cannot start the server: " + line; msg != want {
		t.Errorf("initialize answered with %q, want %q", msg, want)
	}
}

// asNobodyWithoutFUSE is a command that runs bin args as nobody in a new
// mount namespace where /dev/fuse is a root-owned 0600 file: what a user
// outside the fuse group sees on a host whose /dev/fuse is 0600. The host's
// /dev/fuse is not touched.
func asNobodyWithoutFUSE(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.Skip(t, "needs "+tool+" (util-linux)")
		}
	}
	fake := filepath.Join(t.TempDir(), "fuse")
	if err := os.WriteFile(fake, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `mount --bind "$0" /dev/fuse && exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "/bin/sh", "-c", script, fake, bin}, args...)...)
	cmd.Dir = "/"
	return cmd
}

// TestMountEnds: "rootfs mount" exits 0 after a clean unmount, whether by
// SIGTERM (TestMountCommand) or from outside with fusermount3 -u, as its
// man page says (it exited 1, "was unmounted from outside"); a mount that
// stops being served but stays mounted (its connection aborted) is an
// error, in one line, and is detached.
func TestMountEnds(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	bin := rootfsBinary(t)
	top := t.TempDir()
	os.Mkdir(filepath.Join(top, "a"), 0o755)
	mnt := filepath.Join(top, "mnt")
	os.Mkdir(mnt, 0o755)

	t.Run("fusermount3 -u", func(t *testing.T) {
		p := startMount(t, bin, "--root", filepath.Join(top, "a"), mnt)
		if !p.waitFor("rootfs: mounted") {
			t.Fatalf("not mounted:\n%s", p.output())
		}
		if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
			t.Fatalf("fusermount3 -u: %v: %s", err, out)
		}
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("still running after the unmount:\n%s", p.output())
		}
		if code := p.cmd.ProcessState.ExitCode(); code != 0 || strings.Contains(p.output(), "rootfs mount:") {
			t.Errorf("exit %d after fusermount3 -u, want 0 and no error:\n%s", code, p.output())
		}
	})

	t.Run("connection aborted", func(t *testing.T) {
		if _, err := exec.LookPath("unshare"); err != nil {
			testutil.Skip(t, "needs unshare (util-linux) to mount fusectl privately")
		}
		p := startMount(t, bin, "--root", filepath.Join(top, "a"), mnt)
		if !p.waitFor("rootfs: mounted") {
			t.Fatalf("not mounted:\n%s", p.output())
		}
		var st syscall.Stat_t
		if err := syscall.Stat(mnt, &st); err != nil {
			t.Fatal(err)
		}
		// The connection's directory in fusectl is named by the mount's
		// device number; fusectl is mounted in a namespace of its own.
		abort := exec.Command("unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
			`mount -t fusectl fusectl /sys/fs/fuse/connections && echo 1 > /sys/fs/fuse/connections/$0/abort`, fmt.Sprint(st.Dev))
		if out, err := abort.CombinedOutput(); err != nil {
			testutil.Skip(t, fmt.Sprintf("cannot abort a FUSE connection here: %v: %s", err, out))
		}
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("still running after the abort:\n%s", p.output())
		}
		code := p.cmd.ProcessState.ExitCode()
		line := errorLine(p.output(), "rootfs mount: ")
		if code != 1 || !strings.Contains(line, "aborted") {
			t.Errorf("exit %d, want 1 and a line saying the connection was aborted:\n%s", code, p.output())
		}
		if mountedAt(mnt) {
			unix.Unmount(mnt, unix.MNT_DETACH)
			t.Errorf("the dead mount was left behind")
		}
	})
}

// TestMountFUSEErrors: "rootfs mount" that cannot mount FUSE says why and
// what to do in one line and exits 1. A user who cannot open /dev/fuse is
// refused before fusermount3 runs (it printed its own message, then "mount
// X: fusermount exited with code 256" and a blank line); a fusermount3 that
// fails for another reason is named with its exit status and rootfs doctor.
func TestMountFUSEErrors(t *testing.T) {
	testutil.RequireRoot(t)
	bin := worldBinary(t)
	top, err := os.MkdirTemp("", "rootfs-mount-fuse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	os.Chmod(top, 0o755)
	root, mnt := filepath.Join(top, "a"), filepath.Join(top, "mnt")
	os.Mkdir(root, 0o755)
	os.Mkdir(mnt, 0o777)

	check := func(t *testing.T, cmd *exec.Cmd, want ...string) {
		t.Helper()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			unix.Unmount(mnt, unix.MNT_DETACH)
			t.Fatalf("mounted, or hung:\n%s", out.String())
		}
		code := cmd.ProcessState.ExitCode()
		line := errorLine(out.String(), "rootfs mount: ")
		ok := code == 1 && line != ""
		for _, w := range want {
			ok = ok && strings.Contains(line, w)
		}
		if !ok {
			t.Errorf("exit %d, output:\n%s\nwant 1 and a line with %q", code, out.String(), want)
		}
		if n := strings.Count(strings.TrimSpace(out.String()), "\n"); strings.Contains(strings.Join(want, ""), "/dev/fuse") && n != 0 {
			t.Errorf("%d lines, want one:\n%s", n+1, out.String())
		}
	}

	t.Run("no access to /dev/fuse", func(t *testing.T) {
		check(t, asNobodyWithoutFUSE(t, bin, "mount", "--root", root, mnt), "cannot open /dev/fuse: permission denied", "chmod 0666 /dev/fuse")
	})

	t.Run("fusermount3 fails", func(t *testing.T) {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			testutil.Skip(t, "needs fusermount3")
		}
		// As root with a /dev/fuse that is no FUSE device: the direct mount
		// fails, and so does fusermount3, with exit status 1.
		fake := filepath.Join(t.TempDir(), "fuse")
		os.WriteFile(fake, nil, 0o600)
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
			`mount --bind "$0" /dev/fuse && exec "$@"`, fake, bin, "mount", "--root", root, mnt)
		check(t, cmd, "fusermount3 failed with exit status 1", "rootfs doctor")
	})
}
