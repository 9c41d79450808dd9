//go:build linux

package vfs

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestViewReadOnlyLocks: on a read-only view the locks a sandboxed process
// takes (flock, POSIX and OFD record locks) stay inside the view, so a host
// process is never blocked by them; they still exclude each other inside
// the view. The control is a writable view, where locks are forwarded to
// the host and the same host locks are refused.
func TestViewReadOnlyLocks(t *testing.T) {
	for _, ro := range []bool{true, false} {
		name := "read-only"
		if !ro {
			name = "writable-control"
		}
		t.Run(name, func(t *testing.T) {
			h := hostTree(t)
			r := mkdir(t, filepath.Join(h, "r"))
			host := write(t, filepath.Join(r, "f"), "data\n")
			s := serve(t, serveConfig{Roots: []string{r}, ReadOnly: ro})
			in := filepath.Join(s.Mnt, "r", "f")
			open := func(p string, flags int) *os.File {
				t.Helper()
				f, err := os.OpenFile(p, flags, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				return f
			}
			// blocked reports whether err is the "held by someone else" answer.
			blocked := func(err error) bool {
				return errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES)
			}
			check := func(what string, hostErr error) {
				t.Helper()
				switch {
				case ro && hostErr != nil:
					t.Errorf("%s: a host process was refused its lock by the view's lock on a read-only root: %v", what, hostErr)
				case !ro && !blocked(hostErr):
					t.Errorf("%s: control: the host lock was not blocked on a writable root (%v): the test shows nothing", what, hostErr)
				}
			}

			// flock(LOCK_EX) through the view, then the host's.
			a := open(in, os.O_RDONLY)
			if err := unix.Flock(int(a.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
				t.Fatalf("flock LOCK_EX through the view: %v", err)
			}
			b := open(in, os.O_RDONLY)
			if err := unix.Flock(int(b.Fd()), unix.LOCK_EX|unix.LOCK_NB); !blocked(err) {
				t.Errorf("a second flock(LOCK_EX) through the view: %v, want EWOULDBLOCK (locks must still exclude each other inside)", err)
			}
			hf := open(host, os.O_RDWR)
			err := unix.Flock(int(hf.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			check("flock(LOCK_EX)", err)
			unix.Flock(int(hf.Fd()), unix.LOCK_UN)
			unix.Flock(int(a.Fd()), unix.LOCK_UN)

			// A shared flock blocks a host writer's exclusive one just the same.
			if err := unix.Flock(int(a.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
				t.Fatalf("flock LOCK_SH through the view: %v", err)
			}
			err = unix.Flock(int(hf.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			check("flock(LOCK_SH) against a host LOCK_EX", err)
			unix.Flock(int(hf.Fd()), unix.LOCK_UN)
			unix.Flock(int(a.Fd()), unix.LOCK_UN)

			// A POSIX read lock (the only record lock a read-only descriptor
			// can take) against a host write lock.
			rd := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: 0, Len: 0}
			if err := unix.FcntlFlock(a.Fd(), unix.F_SETLK, &rd); err != nil {
				t.Fatalf("F_SETLK F_RDLCK through the view: %v", err)
			}
			wr := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
			err = unix.FcntlFlock(hf.Fd(), unix.F_SETLK, &wr)
			check("fcntl F_RDLCK", err)
			un := unix.Flock_t{Type: unix.F_UNLCK}
			unix.FcntlFlock(hf.Fd(), unix.F_SETLK, &un)
			unix.FcntlFlock(a.Fd(), unix.F_SETLK, &un)

			// The same with an open-file-description lock.
			if err := unix.FcntlFlock(b.Fd(), unix.F_OFD_SETLK, &rd); err != nil {
				t.Fatalf("F_OFD_SETLK F_RDLCK through the view: %v", err)
			}
			err = unix.FcntlFlock(hf.Fd(), unix.F_OFD_SETLK, &wr)
			check("fcntl F_OFD_SETLK F_RDLCK", err)
			unix.FcntlFlock(hf.Fd(), unix.F_OFD_SETLK, &un)
			unix.FcntlFlock(b.Fd(), unix.F_OFD_SETLK, &un)

			if ro {
				// What the read-only view gives up: a host process's lock is
				// not seen inside (documented in the package comment).
				if err := unix.Flock(int(hf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
					t.Fatal(err)
				}
				if err := unix.Flock(int(a.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
					t.Errorf("flock through a read-only view while a host process holds LOCK_EX: %v (expected: not seen inside)", err)
				}
			}
		})
	}
}

// TestViewReadOnlySQLite: a SQLite reader on a read-only view reads, and
// while it holds a read transaction open a host process still commits
// (rollback journal: the reader's SHARED lock stays inside the view). The
// control is a writable view, where the same reader makes the host's
// commit fail with "database is locked".
func TestViewReadOnlySQLite(t *testing.T) {
	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("sqlite3 not installed (Debian package sqlite3)")
	}
	for _, ro := range []bool{true, false} {
		name := "read-only"
		if !ro {
			name = "writable-control"
		}
		t.Run(name, func(t *testing.T) {
			h := hostTree(t)
			r := mkdir(t, filepath.Join(h, "r"))
			os.Chmod(r, 0o777)
			db := filepath.Join(r, "db.sqlite")
			if out, err := exec.Command(sqlite, db, "CREATE TABLE t(x); INSERT INTO t VALUES(1);").CombinedOutput(); err != nil {
				t.Fatalf("create db: %v %s", err, out)
			}
			s := serve(t, serveConfig{Roots: []string{r}, ReadOnly: ro})
			in := filepath.Join(s.Mnt, "r", "db.sqlite")
			out, err := exec.Command(sqlite, "-readonly", in, "SELECT count(*) FROM t;").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "1" {
				t.Fatalf("read through the view: %v %q", err, out)
			}
			// A reader that holds a read transaction open.
			rd := exec.Command(sqlite, "-readonly", in)
			stdin, _ := rd.StdinPipe()
			stdout, _ := rd.StdoutPipe()
			rd.Stderr = os.Stderr
			if err := rd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stdin.Close(); rd.Wait() }()
			if _, err := stdin.Write([]byte("BEGIN; SELECT count(*) FROM t;\n")); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stdout)
			if !sc.Scan() || sc.Text() != "1" {
				t.Fatalf("reader inside: %q", sc.Text())
			}
			hostOut, hostErr := exec.Command(sqlite, db, "INSERT INTO t VALUES(2);").CombinedOutput()
			switch {
			case ro && hostErr != nil:
				t.Errorf("host commit while a reader inside a read-only view holds a transaction: %v %s", hostErr, hostOut)
			case !ro && (hostErr == nil || !strings.Contains(string(hostOut), "locked")):
				t.Errorf("control: host commit on a writable view was not blocked by the reader inside (%v %s): the test shows nothing", hostErr, hostOut)
			}
			stdin.Write([]byte("COMMIT;\n"))
		})
	}
}
