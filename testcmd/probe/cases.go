//go:build linux

package main

// The escape cases, one per name of cases.

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// one runs the case name (see cases) in this process and reports whether
// it escaped, with what it saw.
func one(name string, o *opts) (bool, string) {
	switch name {
	case "caps": // A1/A9
		var bad []string
		for _, f := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if v := statusField(f); v != "0000000000000000" {
				bad = append(bad, f+"="+v)
			}
		}
		if v := statusField("NoNewPrivs"); v != "1" {
			bad = append(bad, "NoNewPrivs="+v)
		}
		if v := statusField("Seccomp"); v != "2" {
			bad = append(bad, "Seccomp="+v)
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0); err == nil {
			bad = append(bad, "cleared no_new_privs")
		}
		return len(bad) > 0, strings.Join(bad, " ")
	case "chroot": // A2
		jail, err := os.MkdirTemp("", "jail")
		if err != nil {
			return false, "mkdtemp: " + errs(err)
		}
		keep, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return false, errs(err)
		}
		if err := unix.Chroot(jail); err != nil {
			return false, "chroot: " + errs(err)
		}
		unix.Fchdir(keep)
		for i := 0; i < 64; i++ {
			unix.Chdir("..")
		}
		if err := unix.Chroot("."); err != nil {
			return false, "second chroot: " + errs(err)
		}
		return readSecret(o, o.secret)
	case "dotdot": // A3: walk up from cwd, then read the host path
		for i := 0; i < 64; i++ {
			unix.Chdir("..")
		}
		return readSecret(o, "."+o.secret)
	case "cwd": // A3
		cwd, _ := os.Readlink("/proc/self/cwd")
		ok, d := readSecret(o, o.secret)
		return ok, "cwd=" + cwd + " " + d
	case "fds": // A4
		ents, _ := os.ReadDir("/proc/self/fd")
		var seen []string
		esc := false
		for _, e := range ents {
			fd, _ := strconv.Atoi(e.Name())
			if fd <= 2 {
				continue
			}
			l, err := os.Readlink("/proc/self/fd/" + e.Name())
			if err != nil {
				continue // the ReadDir's own fd, already closed
			}
			seen = append(seen, e.Name()+"->"+l)
			if f, err := unix.Openat(fd, filepath.Base(o.secret), unix.O_RDONLY, 0); err == nil {
				b := make([]byte, 256)
				n, _ := unix.Read(f, b)
				if o.token != "" && strings.Contains(string(b[:n]), o.token) {
					esc = true
				}
			}
		}
		return esc, strings.Join(seen, " ")
	case "setns": // A5
		runtime.LockOSThread()
		fd, err := unix.Open("/proc/1/ns/net", unix.O_RDONLY, 0)
		d := "open /proc/1/ns/net: " + errs(err)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			d += ", setns: " + errs(err)
			if err == nil {
				return true, d
			}
		}
		if self, err2 := unix.Open("/proc/self/ns/uts", unix.O_RDONLY, 0); err2 == nil {
			err2 = unix.Setns(self, unix.CLONE_NEWUTS)
			d += ", setns(self uts): " + errs(err2)
			return err2 == nil, d
		}
		return false, d
	case "mount": // A8
		dir, _ := os.MkdirTemp("", "m")
		err := unix.Mount("x", dir, "tmpfs", 0, "")
		if err == nil {
			unix.Unmount(dir, unix.MNT_DETACH)
			return true, "mounted tmpfs on " + dir
		}
		d := "mount tmpfs: " + errs(err)
		if err := unix.Mount("", "/usr", "", unix.MS_REMOUNT|unix.MS_BIND, ""); err == nil {
			return true, d + ", remounted /usr rw"
		} else {
			d += ", remount /usr rw: " + errs(err)
		}
		if err := unix.Unmount("/proc", unix.MNT_DETACH); err == nil {
			return true, d + ", unmounted /proc"
		} else {
			d += ", umount /proc: " + errs(err)
		}
		return false, d
	case "fsopen": // C2
		fd, err := unix.Fsopen("tmpfs", 0)
		if err == nil {
			unix.Close(fd)
		}
		return err == nil, "fsopen tmpfs: " + errs(err)
	case "open_tree": // C2
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE)
		if err == nil {
			unix.Close(fd)
		}
		return err == nil, "open_tree clone /: " + errs(err)
	case "mknod": // A11
		var d []string
		esc := false
		for _, dir := range []string{os.TempDir(), o.rootdir} {
			if dir == "" {
				continue
			}
			p := filepath.Join(dir, "probe-mem")
			err := unix.Mknod(p, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 1)))
			if err == nil {
				esc = true
				os.Remove(p)
			}
			d = append(d, p+": "+errs(err))
		}
		return esc, strings.Join(d, ", ")
	case "suid": // A10
		if o.suid == "" {
			return false, "no -suid given"
		}
		out, err := exec.Command(o.suid, "whoami").Output()
		if err != nil {
			return false, "exec: " + errs(err)
		}
		var w map[string]string
		json.Unmarshal(out, &w)
		me := strconv.Itoa(os.Geteuid())
		mycap := statusField("CapEff")
		esc := w["euid"] != me || w["capeff"] != mycap
		return esc, fmt.Sprintf("parent euid=%s capeff=%s, setuid child euid=%s capeff=%s", me, mycap, w["euid"], w["capeff"])
	case "fcap": // A9: a binary with file capabilities gains nothing
		if o.fcap == "" {
			return false, "no -fcap given"
		}
		out, err := exec.Command(o.fcap, "whoami").Output()
		if err != nil {
			return false, "exec: " + errs(err)
		}
		var w map[string]string
		json.Unmarshal(out, &w)
		mycap := statusField("CapEff")
		return w["capeff"] != mycap, fmt.Sprintf("parent capeff=%s, file-caps child capeff=%s", mycap, w["capeff"])
	case "nosuid":
		var st unix.Statfs_t
		if err := unix.Statfs(filepath.Dir(o.suid), &st); err != nil {
			return false, errs(err)
		}
		return st.Flags&unix.ST_NOSUID == 0, fmt.Sprintf("%s flags=%#x", filepath.Dir(o.suid), st.Flags)
	case "pids": // B1
		ents, _ := os.ReadDir("/proc")
		n := 0
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			n++
			b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			// -marker is given reversed, so the probe's own argv does not match.
			if o.marker != "" && bytes.Contains(b, []byte(reverse(o.marker))) {
				return true, "victim visible as pid " + e.Name()
			}
		}
		return false, fmt.Sprintf("%d pids visible, no victim", n)
	case "procroot": // B2: /proc/<pid>/root of pid 1 and of host processes
		var d []string
		for _, p := range append([]int{1}, victims(o)...) {
			ok, s := readSecret(o, fmt.Sprintf("/proc/%d/root%s", p, o.secret))
			if ok {
				return true, s
			}
			d = append(d, s)
		}
		return false, strings.Join(d, "; ")
	case "proccwd": // A3/B3: /proc/<pid>/cwd of pid 1 and of host processes
		var d []string
		for _, p := range append([]int{1}, victims(o)...) {
			ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/cwd", p))
			if err == nil {
				return true, fmt.Sprintf("listed /proc/%d/cwd (%d entries)", p, len(ents))
			}
			d = append(d, fmt.Sprintf("%d: %s", p, errs(err)))
		}
		return false, strings.Join(d, ", ")
	case "procfd": // B3/B4: open the fds and environ of pid 1 and host processes
		var d []string
		for _, p := range append([]int{1}, victims(o)...) {
			ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
			d = append(d, fmt.Sprintf("%d: fd %s", p, errs(err)))
			for _, e := range ents {
				if f, err := os.Open(fmt.Sprintf("/proc/%d/fd/%s", p, e.Name())); err == nil {
					f.Close()
					return true, fmt.Sprintf("opened /proc/%d/fd/%s", p, e.Name())
				}
			}
			if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p)); err == nil && len(env) > 0 {
				return true, fmt.Sprintf("read /proc/%d/environ", p)
			} else {
				d = append(d, "environ "+errs(err))
			}
		}
		return false, strings.Join(d, ", ")
	case "ptrace": // B5
		runtime.LockOSThread()
		var d []string
		for _, p := range append(victims(o), 1) {
			err := unix.PtraceAttach(p)
			if err == nil {
				var ws unix.WaitStatus
				unix.Wait4(p, &ws, unix.WALL, nil)
				unix.PtraceDetach(p)
				return true, fmt.Sprintf("attached to %d", p)
			}
			d = append(d, fmt.Sprintf("%d: %s", p, errs(err)))
		}
		return false, strings.Join(d, ", ")
	case "process_vm_readv": // B5
		var d []string
		buf := make([]byte, 8)
		for _, p := range append(victims(o), 1) {
			local := []unix.Iovec{{Base: &buf[0], Len: 8}}
			remote := []unix.RemoteIovec{{Base: 0x400000, Len: 8}}
			_, err := unix.ProcessVMReadv(p, local, remote, 0)
			if err == nil || errors.Is(err, unix.EFAULT) {
				return true, fmt.Sprintf("%d: reached (%s)", p, errs(err))
			}
			d = append(d, fmt.Sprintf("%d: %s", p, errs(err)))
		}
		return false, strings.Join(d, ", ")
	case "kill": // B9
		var d []string
		for _, p := range victims(o) {
			err := unix.Kill(p, 0)
			if err == nil {
				return true, fmt.Sprintf("can signal %d", p)
			}
			d = append(d, fmt.Sprintf("%d: %s", p, errs(err)))
		}
		return false, strings.Join(d, ", ")
	case "unshare": // C1
		runtime.LockOSThread()
		err := unix.Unshare(unix.CLONE_NEWNS)
		return err == nil, "unshare(CLONE_NEWNS): " + errs(err)
	case "clone_userns": // C1
		cmd := exec.Command("/proc/self/exe", "noop")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS}
		err := cmd.Run()
		return err == nil, "clone(CLONE_NEWUSER|CLONE_NEWNS): " + errs(err)
	case "open_by_handle_at": // C3
		var d []string
		_, _, err := unix.NameToHandleAt(unix.AT_FDCWD, "/usr", 0)
		d = append(d, "name_to_handle_at /usr: "+errs(err))
		typ, hexb, ok := strings.Cut(o.handle, ":")
		if ok {
			t, _ := strconv.Atoi(typ)
			b, _ := hex.DecodeString(hexb)
			h := unix.NewFileHandle(int32(t), b)
			for _, m := range []string{"/usr", "/"} {
				mfd, err := unix.Open(m, unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					continue
				}
				fd, err := unix.OpenByHandleAt(mfd, h, unix.O_RDONLY)
				d = append(d, "open_by_handle_at via "+m+": "+errs(err))
				if err == nil {
					b := make([]byte, 256)
					n, _ := unix.Read(fd, b)
					if o.token != "" && strings.Contains(string(b[:n]), o.token) {
						return true, strings.Join(d, ", ") + ": read secret"
					}
				}
			}
		}
		return false, strings.Join(d, ", ")
	case "keyctl": // C4
		id, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
		return err == nil, fmt.Sprintf("keyctl get session keyring: %d %s", id, errs(err))
	case "i386": // C0: the i386 ABI through int $0x80 must not bypass the filter
		if !haveInt80 {
			return false, "not amd64"
		}
		// i386 getpid (20): the filter kills the process (SIGSYS) before
		// this returns; without it the pid comes back.
		r := int80(20, 0)
		if int64(r) < 0 && int64(r) > -4096 {
			return false, "i386 getpid: " + unix.ErrnoName(syscall.Errno(-int64(r)))
		}
		return true, fmt.Sprintf("i386 getpid returned %d", r)
	case "syscalls": // C5-C10 try-syscall table
		return trySyscalls()
	case "tiocsti": // E1
		var d []string
		c := byte(' ')
		fds := []int{0, 1, 2}
		if fd, err := unix.Open("/dev/tty", unix.O_RDWR, 0); err == nil {
			fds = append(fds, fd)
		} else {
			d = append(d, "/dev/tty: "+errs(err))
		}
		for _, fd := range fds {
			err := errno(unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&c))))
			if err == nil {
				return true, fmt.Sprintf("injected into fd %d", fd)
			}
			err2 := errno(unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI|1<<32, uintptr(unsafe.Pointer(&c))))
			if err2 == nil {
				return true, fmt.Sprintf("injected into fd %d (high bits)", fd)
			}
			d = append(d, fmt.Sprintf("fd %d: %s/%s", fd, errs(err), errs(err2)))
		}
		return false, strings.Join(d, ", ")
	case "env": // E4
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "ROOTFS_CANARY_ENV=") {
				return true, "canary in environ"
			}
		}
		b, err := os.ReadFile("/proc/1/environ")
		if err == nil && bytes.Contains(b, []byte("ROOTFS_CANARY_ENV")) {
			return true, "canary in /proc/1/environ"
		}
		return false, fmt.Sprintf("%d vars; /proc/1/environ: %s", len(os.Environ()), errs(err))
	case "unix_path": // E5
		c, err := net.Dial("unix", o.sock)
		if err == nil {
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			return strings.Contains(line, o.token), "connected: " + strings.TrimSpace(line)
		}
		return false, errs(err)
	case "unix_abstract": // E6
		c, err := net.Dial("unix", "@"+o.abstract)
		if err == nil {
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			return strings.Contains(line, o.token), "connected: " + strings.TrimSpace(line)
		}
		return false, errs(err)
	case "sys": // B11
		_, err := os.Stat("/sys/kernel")
		return err == nil, "/sys/kernel: " + errs(err)
	case "shadow":
		_, err := os.ReadFile("/etc/shadow")
		return err == nil, "/etc/shadow: " + errs(err)
	case "proc_sys_write": // B7/B10: write back the value read, harmless
		p := "/proc/sys/kernel/printk_ratelimit"
		v, err := os.ReadFile(p)
		if err != nil {
			return false, p + ": " + errs(err)
		}
		err = os.WriteFile(p, v, 0)
		return err == nil, "write " + p + ": " + errs(err)
	case "sysrq": // B7: open for writing only, never write
		f, err := os.OpenFile("/proc/sysrq-trigger", os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		return err == nil, "open /proc/sysrq-trigger for writing: " + errs(err)
	}
	return false, "unknown case"
}
