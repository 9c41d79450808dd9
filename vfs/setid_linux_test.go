//go:build linux

package vfs

// Set-ID bits and file capabilities on data changes, by the daemon
// (killPriv) and by passthrough writes (lowerForBacking). The attacking
// operation runs in a child (this binary, re-executed with
// ROOTFS_VFS_ATTACK) whose operating thread has no capabilities at all, as
// the wrapped server has none; the test then looks at the host file. Each
// case runs once against the view and once with the protection off
// (serveConfig.NoKillPriv), where the set-user-ID bit must survive: the
// attack works without it.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// attack is one operation of the child.
type attack struct {
	Op   string
	Path string
	Src  string // copy: the file copied from
	// Wait: open Path (read-write) first, print "opened" and wait for a
	// line on stdin before the operation.
	Wait bool
}

// capValue is a vfs_cap_data (revision 2) granting cap_net_raw+ep, as
// setcap writes it.
func capValue() []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|1) // VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE
	binary.LittleEndian.PutUint32(b[4:], 1<<unix.CAP_NET_RAW)
	return b
}

// attackMain runs in the child: it drops every capability of its thread
// (capabilities are per thread; the kernel checks the calling thread's),
// checks that none is left, and does the operation. It prints "ok" or
// "err ERRNO".
func attackMain(cfg string) int {
	var a attack
	if err := json.Unmarshal([]byte(cfg), &a); err != nil {
		fmt.Println("err bad config", err)
		return 2
	}
	runtime.LockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		fmt.Println("err capset", err)
		return 2
	}
	status, _ := os.ReadFile("/proc/thread-self/status")
	if !strings.Contains(string(status), "\nCapEff:\t0000000000000000\n") {
		fmt.Println("err capabilities left")
		return 2
	}
	if err := a.run(); err != nil {
		var e syscall.Errno
		if errors.As(err, &e) {
			fmt.Println("err", unix.ErrnoName(e))
		} else {
			fmt.Println("err", err)
		}
		return 0
	}
	fmt.Println("ok")
	return 0
}

func (a attack) run() error {
	switch a.Op {
	case "truncate":
		return unix.Truncate(a.Path, 4)
	case "otrunc", "creat":
		flags := unix.O_WRONLY | unix.O_TRUNC
		if a.Op == "creat" {
			flags |= unix.O_CREAT
		}
		fd, err := unix.Open(a.Path, flags, 0o644)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "rmcap":
		return unix.Removexattr(a.Path, capXattr)
	case "setcap":
		return unix.Setxattr(a.Path, capXattr, capValue(), 0)
	}
	fd, err := unix.Open(a.Path, unix.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if a.Wait {
		fmt.Println("opened")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
	}
	block := func(c byte) []byte { return bytes.Repeat([]byte{c}, 4096) }
	switch a.Op {
	case "write":
		_, err = unix.Pwrite(fd, block('X'), 0)
	case "writev":
		_, err = unix.Pwritev(fd, [][]byte{block('V'), block('W')}, 0)
	case "ftruncate":
		err = unix.Ftruncate(fd, 4)
	case "fallocate":
		err = unix.Fallocate(fd, 0, 0, 1<<20) // extends the file
	case "fallocate-keep-size":
		err = unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 8192, 1<<20)
	case "punch-hole":
		err = unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096)
	case "zero-range":
		err = unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE, 0, 4096)
	case "zero-range-keep-size":
		err = unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096)
	case "copy_file_range":
		var src int
		src, err = unix.Open(a.Src, unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(src)
		var in, out int64
		_, err = unix.CopyFileRange(src, &in, fd, &out, 4096, 0)
	case "splice":
		var p [2]int
		if err := unix.Pipe(p[:]); err != nil {
			return err
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		if _, err := unix.Write(p[1], block('S')); err != nil {
			return err
		}
		var off int64
		_, err = unix.Splice(p[0], nil, fd, &off, 4096, 0)
	case "mmap":
		var m []byte
		m, err = unix.Mmap(fd, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return err
		}
		m[0] = 'M'
		err = unix.Msync(m, unix.MS_SYNC)
		unix.Munmap(m)
	default:
		return fmt.Errorf("unknown op %q", a.Op)
	}
	if err == nil {
		err = unix.Fsync(fd) // under the writeback cache: to the host now
	}
	return err
}

// attacker is a running attack child.
type attacker struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startAttack(t *testing.T, a attack) *attacker {
	t.Helper()
	data, _ := json.Marshal(a)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ROOTFS_VFS_ATTACK="+string(data))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return &attacker{t: t, cmd: cmd, in: in, out: bufio.NewScanner(out)}
}

// line returns the child's next line of output.
func (a *attacker) line() string {
	a.t.Helper()
	if !a.out.Scan() {
		a.t.Fatal("attack child gone")
	}
	return a.out.Text()
}

// runAttack runs a in a child without capabilities and returns its answer
// ("ok" or "err ERRNO").
func runAttack(t *testing.T, a attack) string {
	t.Helper()
	return startAttack(t, a).line()
}

// hostState is what the tests look at on the host.
type hostState struct {
	mode   uint32
	cap    bool
	data   []byte
	size   int64
	blocks int64
}

func hostStat(t *testing.T, p string) hostState {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = unix.Getxattr(p, capXattr, nil)
	return hostState{mode: st.Mode & 07777, cap: err == nil, data: data, size: st.Size, blocks: st.Blocks}
}

func (h hostState) changed(o hostState) bool {
	return !bytes.Equal(h.data, o.data) || h.size != o.size || h.blocks != o.blocks
}

// makePrivileged makes a root-owned 06755 file on the host, with a file
// capability when withCap.
func makePrivileged(t *testing.T, p string, withCap bool) {
	t.Helper()
	if err := os.WriteFile(p, bytes.Repeat([]byte{'A'}, 8192), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(p, 06755); err != nil {
		t.Fatal(err)
	}
	if withCap {
		if err := unix.Setxattr(p, capXattr, capValue(), 0); err != nil {
			t.Fatalf("set security.capability on the host: %v", err)
		}
	}
}

var setIDOps = []string{
	"write", "writev", "splice", "mmap", "ftruncate", "truncate", "otrunc", "creat",
	"fallocate", "fallocate-keep-size", "punch-hole", "zero-range", "zero-range-keep-size",
	"copy_file_range",
}

var setIDModes = []struct {
	name                   string
	writeback, passthrough bool
}{{"default", false, false}, {"writeback", true, false}, {"passthrough", false, true}}

// TestViewSetIDCleared: every operation that changes a file's data or
// size, by a caller without CAP_FSETID, leaves the host file without
// S_ISUID, S_ISGID (group-executable) and security.capability, in every
// I/O mode. Under passthrough these files are served by the daemon (they
// are privileged when opened); TestViewSetIDPassthroughCreds covers files
// that become so while a passthrough handle is open. Control: the view as
// it was (NoKillPriv) keeps the set-user-ID bit through each operation.
// The control's files carry no capability: the view as it was refused
// removing it, so writes to them failed (TestViewWriteDropsCapability).
func TestViewSetIDCleared(t *testing.T) {
	for _, m := range setIDModes {
		t.Run(m.name, func(t *testing.T) {
			for _, control := range []bool{false, true} {
				r := t.TempDir()
				for _, op := range setIDOps {
					makePrivileged(t, filepath.Join(r, op), !control)
				}
				if err := os.WriteFile(filepath.Join(r, "src"), bytes.Repeat([]byte{'B'}, 8192), 0o644); err != nil {
					t.Fatal(err)
				}
				s := serve(t, serveConfig{Roots: []string{r}, Writeback: m.writeback, Passthrough: m.passthrough, NoKillPriv: control})
				if m.passthrough && !s.Passthrough {
					testSkipPassthrough(t)
				}
				mnt := filepath.Join(s.Mnt, filepath.Base(r))
				for _, op := range setIDOps {
					host := filepath.Join(r, op)
					if native(t, op, r) {
						continue
					}
					before := hostStat(t, host)
					res := runAttack(t, attack{Op: op, Path: filepath.Join(mnt, op), Src: filepath.Join(mnt, "src")})
					after := hostStat(t, host)
					name := fmt.Sprintf("%s (control=%v)", op, control)
					if res != "ok" {
						t.Errorf("%s: %s", name, res)
						continue
					}
					if !after.changed(before) {
						t.Errorf("%s: the host file did not change", name)
					}
					switch {
					case control && after.mode&unix.S_ISUID == 0:
						t.Errorf("%s: host mode %04o: the set-user-ID bit was cleared without the protection; the control shows nothing", name, after.mode)
					case !control && after.mode&(unix.S_ISUID|unix.S_ISGID) != 0:
						t.Errorf("%s: host mode %04o after the change: set-ID bits kept", name, after.mode)
					case !control && after.cap:
						t.Errorf("%s: security.capability kept on the host", name)
					}
				}
				s.stop()
			}
		})
	}
}

// native skips op when the host file system itself does not support it
// (tmpfs has no FALLOC_FL_ZERO_RANGE), and reports whether to skip.
func native(t *testing.T, op, dir string) bool {
	t.Helper()
	var mode uint32
	switch op {
	case "zero-range":
		mode = unix.FALLOC_FL_ZERO_RANGE
	case "zero-range-keep-size":
		mode = unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE
	case "punch-hole":
		mode = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
	default:
		return false
	}
	f, err := os.CreateTemp(dir, ".probe")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	f.Write(make([]byte, 8192))
	if err := unix.Fallocate(int(f.Fd()), mode, 0, 4096); errors.Is(err, unix.EOPNOTSUPP) {
		t.Logf("%s: not supported by the host file system here; not tested", op)
		return true
	}
	return false
}

func testSkipPassthrough(t *testing.T) {
	t.Helper()
	t.Skip("the kernel did not grant FUSE passthrough (needs Linux 6.9+ and CAP_SYS_ADMIN in the initial user namespace)")
}

// TestViewSetIDPassthroughCreds: under --passthrough, a file opened while
// plain and made set-ID (and given a capability) on the host while the
// passthrough handle is open loses the bits on the next write: the kernel
// writes with the credentials the backing file was registered with, which
// lack CAP_FSETID. The daemon serves no WRITE (the log shows), so
// passthrough was in effect. Control: registered with the daemon's own
// credentials (NoKillPriv), the set-user-ID bit survives the write.
func TestViewSetIDPassthroughCreds(t *testing.T) {
	ops := []string{"write", "writev", "splice"}
	for _, control := range []bool{false, true} {
		t.Run(fmt.Sprintf("control=%v", control), func(t *testing.T) {
			r := t.TempDir()
			for _, op := range ops {
				if err := os.WriteFile(filepath.Join(r, op), bytes.Repeat([]byte{'A'}, 8192), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("ROOTFS_VFS_DEBUG", "1") // the server logs each request
			s := serve(t, serveConfig{Roots: []string{r}, Passthrough: true, NoKillPriv: control})
			if !s.Passthrough {
				testSkipPassthrough(t)
			}
			mnt := filepath.Join(s.Mnt, filepath.Base(r))
			for _, op := range ops {
				host := filepath.Join(r, op)
				a := startAttack(t, attack{Op: op, Path: filepath.Join(mnt, op), Wait: true})
				if l := a.line(); l != "opened" {
					t.Fatalf("%s: %s", op, l)
				}
				if err := unix.Chmod(host, 06755); err != nil {
					t.Fatal(err)
				}
				if !control { // the view as it was refused to remove it: EPERM
					if err := unix.Setxattr(host, capXattr, capValue(), 0); err != nil {
						t.Fatal(err)
					}
				}
				before := hostStat(t, host)
				fmt.Fprintln(a.in, "go")
				if res := a.line(); res != "ok" {
					t.Fatalf("%s: %s", op, res)
				}
				after := hostStat(t, host)
				if !after.changed(before) {
					t.Errorf("%s: the host file did not change", op)
				}
				switch {
				case control && after.mode&unix.S_ISUID == 0:
					t.Errorf("%s: host mode %04o: the set-user-ID bit was cleared with the daemon's credentials; the control shows nothing", op, after.mode)
				case !control && after.mode&(unix.S_ISUID|unix.S_ISGID) != 0:
					t.Errorf("%s: host mode %04o after a passthrough write: set-ID bits kept", op, after.mode)
				case !control && after.cap:
					t.Errorf("%s: security.capability kept on the host", op)
				}
			}
			if !control {
				checkThreadCaps(t, s.cmd.Process.Pid)
			}
			s.stop()
			if !strings.Contains(s.errLn.String(), ": OPEN n") {
				t.Fatalf("the server's log shows no requests; cannot tell whether passthrough was in effect")
			}
			if strings.Contains(s.errLn.String(), ": WRITE n") {
				t.Errorf("the daemon served WRITE requests: passthrough was not in effect")
			}
		})
	}
}

// TestViewWriteDropsCapability: writing to a file that carries
// security.capability (and no set-ID bit) succeeds and drops it, as on a
// native file system, in every I/O mode; removing or setting the attribute
// directly stays refused to a caller without capabilities (the kernel
// checks CAP_SETFCAP before asking the daemon; the daemon refuses every
// set outside "user."). Control: the view as it was refused the removal
// the kernel asks for, and the write failed with EPERM.
func TestViewWriteDropsCapability(t *testing.T) {
	for _, m := range setIDModes {
		t.Run(m.name, func(t *testing.T) {
			for _, control := range []bool{false, true} {
				r := t.TempDir()
				for _, n := range []string{"w", "rm", "set"} {
					if err := os.WriteFile(filepath.Join(r, n), bytes.Repeat([]byte{'A'}, 8192), 0o755); err != nil {
						t.Fatal(err)
					}
					if n != "set" {
						if err := unix.Setxattr(filepath.Join(r, n), capXattr, capValue(), 0); err != nil {
							t.Fatalf("set security.capability on the host: %v", err)
						}
					}
				}
				s := serve(t, serveConfig{Roots: []string{r}, Writeback: m.writeback, Passthrough: m.passthrough, NoKillPriv: control})
				if m.passthrough && !s.Passthrough {
					testSkipPassthrough(t)
				}
				mnt := filepath.Join(s.Mnt, filepath.Base(r))
				res := runAttack(t, attack{Op: "write", Path: filepath.Join(mnt, "w")})
				after := hostStat(t, filepath.Join(r, "w"))
				switch {
				case control && res == "ok":
					t.Errorf("control: the write succeeded; the control shows nothing")
				case !control && res != "ok":
					t.Errorf("write to a file with a capability: %s", res)
				case !control && after.cap:
					t.Errorf("security.capability kept after a write")
				}
				if control {
					s.stop()
					continue
				}
				if res := runAttack(t, attack{Op: "rmcap", Path: filepath.Join(mnt, "rm")}); res != "err EPERM" {
					t.Errorf("removexattr security.capability without CAP_SETFCAP: %s, want err EPERM", res)
				}
				if !hostStat(t, filepath.Join(r, "rm")).cap {
					t.Errorf("security.capability removed by a caller without CAP_SETFCAP")
				}
				if res := runAttack(t, attack{Op: "setcap", Path: filepath.Join(mnt, "set")}); res != "err EPERM" {
					t.Errorf("setxattr security.capability: %s, want err EPERM", res)
				}
				if hostStat(t, filepath.Join(r, "set")).cap {
					t.Errorf("security.capability set through the view")
				}
				s.stop()
			}
		})
	}
}

// checkThreadCaps fails unless every thread of the server has the
// effective capabilities of its main thread again: the lowered credentials
// of a backing-file registration must not outlive it (View.arm).
func checkThreadCaps(t *testing.T, pid int) {
	t.Helper()
	capEff := func(p string) string {
		data, err := os.ReadFile(p)
		if err != nil {
			return "" // the thread exited
		}
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "CapEff:\t"); ok {
				return v
			}
		}
		return ""
	}
	want := capEff(fmt.Sprintf("/proc/%d/status", pid))
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if got := capEff(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name())); got != "" && got != want {
			t.Errorf("server thread %s has CapEff %s, want %s (the process's): lowered credentials left on a daemon thread", task.Name(), got, want)
		}
	}
}
