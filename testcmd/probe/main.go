//go:build linux

// Command probe is the in-sandbox escape probe (security-battery groups
// A-E). The mountmgr tests build it statically (CGO_ENABLED=0), run it
// inside the sandbox and, as the negative control, outside it.
//
//	probe run [flags]     run every case, each in its own subprocess; one JSON line per case
//	probe case NAME ...   run one case (used by run)
//	probe whoami          print {"euid":N,"capeff":"..."} (the setuid case execs a copy of the probe with it)
//	probe sleep MARKER    sleep forever (the victim process; MARKER is in its argv)
//	probe noop            exit 0
//	probe mountinfo       print /proc/self/mountinfo
//	probe unix OP PATH [SECONDS]
//	                      a pathname unix socket: dial it (read one line), serve on it (make
//	                      it, answer one host connection), or self (make it and connect to it)
//
// A case prints {"case":..., "escaped":bool, "detail":...}; escaped means
// the attack reached what it was after (the secret, a new namespace, a
// capability, the host's socket...). Outside the sandbox most cases must
// escape; inside, none may.
package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

type opts struct {
	secret   string // absolute host path of the secret file
	token    string // its content
	handle   string // "type:hex" file handle of the secret (from name_to_handle_at on the host)
	victims  string // comma-separated host pids (the victim sleeper, P1)
	marker   string // argv marker of the victim
	sock     string // host path unix socket
	abstract string // host abstract socket name (without the leading @)
	suid     string // path of a setuid-root copy of the probe
	fcap     string // path of a copy carrying file capabilities (cap_net_raw+ep)
	rootdir  string // a writable root of the view (e.g. /data)
}

type result struct {
	Case    string `json:"case"`
	Escaped bool   `json:"escaped"`
	Detail  string `json:"detail"`
}

var cases = []string{
	"caps", "chroot", "dotdot", "cwd", "fds", "setns", "mount", "fsopen", "open_tree", "mknod", "suid", "fcap", "nosuid",
	"pids", "procroot", "proccwd", "procfd", "ptrace", "process_vm_readv", "kill",
	"unshare", "clone_userns", "open_by_handle_at", "keyctl", "i386", "syscalls",
	"tiocsti", "env", "unix_path", "unix_abstract", "sys", "shadow", "proc_sys_write", "sysrq",
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe run|case|whoami|sleep|noop|mountinfo|unix")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "noop":
		return
	case "sleep":
		for {
			time.Sleep(time.Hour)
		}
	case "whoami":
		json.NewEncoder(os.Stdout).Encode(map[string]string{"euid": strconv.Itoa(os.Geteuid()), "capeff": statusField("CapEff")})
		return
	case "mountinfo":
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
		return
	case "unix":
		if len(os.Args) < 4 {
			os.Exit(2)
		}
		wait := 10 * time.Second
		if len(os.Args) > 4 {
			n, err := strconv.Atoi(os.Args[4])
			if err != nil {
				os.Exit(2)
			}
			wait = time.Duration(n) * time.Second
		}
		unixOp(os.Args[2], os.Args[3], wait)
		return
	case "run":
		o := parse(os.Args[2:])
		only := map[string]bool{}
		if s := os.Getenv("PROBE_ONLY"); s != "" {
			for _, c := range strings.Split(s, ",") {
				only[c] = true
			}
		}
		_ = o
		for _, c := range cases {
			if len(only) > 0 && !only[c] {
				continue
			}
			runCase(c, os.Args[2:])
		}
		return
	case "case":
		name := os.Args[2]
		o := parse(os.Args[3:])
		escaped, detail := one(name, o)
		json.NewEncoder(os.Stdout).Encode(result{Case: name, Escaped: escaped, Detail: detail})
		return
	}
	os.Exit(2)
}

func parse(args []string) *opts {
	o := &opts{}
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	fs.StringVar(&o.secret, "secret", "", "")
	fs.StringVar(&o.token, "token", "", "")
	fs.StringVar(&o.handle, "handle", "", "")
	fs.StringVar(&o.victims, "victims", "", "")
	fs.StringVar(&o.marker, "marker", "", "")
	fs.StringVar(&o.sock, "sock", "", "")
	fs.StringVar(&o.abstract, "abstract", "", "")
	fs.StringVar(&o.suid, "suid", "", "")
	fs.StringVar(&o.fcap, "fcap", "", "")
	fs.StringVar(&o.rootdir, "rootdir", "", "")
	fs.Parse(args)
	return o
}

// runCase runs one case in a subprocess so that chroot, setns and
// personality changes of one case do not affect the next. Inherited fds
// are passed on (ExtraFiles are not needed: the child inherits non-CLOEXEC fds).
func runCase(name string, args []string) {
	cmd := exec.Command("/proc/self/exe", append([]string{"case", name}, args...)...)
	cmd.Stdin = os.Stdin
	cmd.Stderr = os.Stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	// pass fds >= 3 that we inherited (the fds case looks for them)
	for fd := 3; fd < 64; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if flags&unix.FD_CLOEXEC == 0 {
				for len(cmd.ExtraFiles) < fd-3 {
					cmd.ExtraFiles = append(cmd.ExtraFiles, nil)
				}
				cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(fd), "inherited"))
			}
		}
	}
	err := cmd.Run()
	line := strings.TrimSpace(out.String())
	if line == "" {
		json.NewEncoder(os.Stdout).Encode(result{Case: name, Escaped: false, Detail: fmt.Sprintf("case process failed: %v", err)})
		return
	}
	fmt.Println(line)
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

func errs(err error) string {
	if err == nil {
		return "ok"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

func readSecret(o *opts, path string) (bool, string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, path + ": " + errs(err)
	}
	if o.token != "" && strings.Contains(string(b), o.token) {
		return true, "read secret through " + path
	}
	return false, path + ": readable but no token"
}

func statusField(name string) string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func victims(o *opts) []int {
	var out []int
	for _, s := range strings.Split(o.victims, ",") {
		if n, err := strconv.Atoi(s); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func errno(_, _ uintptr, e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

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

// unixResult is one line of "probe unix": Err is "ok" or the errno name.
type unixResult struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	Err  string `json:"err"`
	Line string `json:"line,omitempty"`
}

// unixOp runs "probe unix OP PATH", printing one unixResult per step:
//
//	dial   connect to PATH and read one line
//	serve  bind PATH ("bind"); when that works, accept one connection
//	       within wait and answer it "hello-from-sandbox" ("accept")
//	self   bind PATH, then connect to it from this process ("self")
//
// serve and self remove the socket file they made.
func unixOp(op, path string, wait time.Duration) {
	out := json.NewEncoder(os.Stdout)
	switch op {
	case "dial":
		c, err := net.DialTimeout("unix", path, 3*time.Second)
		if err != nil {
			out.Encode(unixResult{Op: op, Path: path, Err: errs(err)})
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		out.Encode(unixResult{Op: op, Path: path, Err: errs(err), Line: strings.TrimSpace(line)})
	case "serve", "self":
		l, err := net.Listen("unix", path)
		if op == "serve" || err != nil {
			out.Encode(unixResult{Op: "bind", Path: path, Err: errs(err)})
		}
		if err != nil {
			return
		}
		defer l.Close() // removes the file
		if op == "self" {
			c, err := net.DialTimeout("unix", path, 3*time.Second)
			if err == nil {
				c.Close()
			}
			out.Encode(unixResult{Op: op, Path: path, Err: errs(err)})
			return
		}
		l.(*net.UnixListener).SetDeadline(time.Now().Add(wait))
		c, err := l.Accept()
		if err == nil {
			_, err = fmt.Fprintln(c, "hello-from-sandbox")
			c.Close()
		}
		out.Encode(unixResult{Op: "accept", Path: path, Err: errs(err)})
	default:
		os.Exit(2)
	}
}

// trySyscalls calls each syscall with arguments that make an allowed call
// fail harmlessly (bad pointer, bad fd, bad flags): EPERM or ENOSYS means
// it was refused before the kernel looked at it; anything else means it
// was reached. Escaped when any was reached.
func trySyscalls() (bool, string) {
	bad := uintptr(1) // an invalid user pointer
	calls := []struct {
		name string
		nr   uintptr
		a    [6]uintptr
	}{
		{"bpf", unix.SYS_BPF, [6]uintptr{0xffff, 0, 0}},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, [6]uintptr{bad, 0, ^uintptr(0), ^uintptr(0), 0}},
		{"userfaultfd", unix.SYS_USERFAULTFD, [6]uintptr{0xffffffff}},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, [6]uintptr{1, bad}},
		{"kexec_load", unix.SYS_KEXEC_LOAD, [6]uintptr{0, 0, 0, 0xffffffff}},
		{"finit_module", unix.SYS_FINIT_MODULE, [6]uintptr{^uintptr(0), bad, 0}},
		{"delete_module", unix.SYS_DELETE_MODULE, [6]uintptr{bad, 0}},
		{"reboot", unix.SYS_REBOOT, [6]uintptr{0, 0, 0, 0}},
		{"swapon", unix.SYS_SWAPON, [6]uintptr{bad, 0}},
		{"acct", unix.SYS_ACCT, [6]uintptr{bad}},
		{"syslog", unix.SYS_SYSLOG, [6]uintptr{9999, 0, 0}},
		{"quotactl", unix.SYS_QUOTACTL, [6]uintptr{0xffffffff, bad, 0, 0}},
		{"mount", unix.SYS_MOUNT, [6]uintptr{bad, bad, bad, 0, 0}},
		{"umount2", unix.SYS_UMOUNT2, [6]uintptr{bad, 0}},
		{"pivot_root", unix.SYS_PIVOT_ROOT, [6]uintptr{bad, bad}},
		{"chroot", unix.SYS_CHROOT, [6]uintptr{bad}},
		{"setns", unix.SYS_SETNS, [6]uintptr{^uintptr(0), 0}},
		{"unshare", unix.SYS_UNSHARE, [6]uintptr{0xffffffff}},
		{"clone3", unix.SYS_CLONE3, [6]uintptr{0, 0}},
		{"ptrace", unix.SYS_PTRACE, [6]uintptr{0xffff, 0}},
		{"kcmp", unix.SYS_KCMP, [6]uintptr{0, 0, 0xffff, 0, 0}},
		{"pidfd_getfd", unix.SYS_PIDFD_GETFD, [6]uintptr{^uintptr(0), 0, 0}},
		{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT, [6]uintptr{^uintptr(0), bad, bad, bad, 0}},
		{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, [6]uintptr{^uintptr(0), bad, 0}},
		{"keyctl", unix.SYS_KEYCTL, [6]uintptr{0xffff}},
		{"add_key", unix.SYS_ADD_KEY, [6]uintptr{bad, bad, 0, 0, 0}},
		{"request_key", unix.SYS_REQUEST_KEY, [6]uintptr{bad, bad, 0, 0}},
		{"fsopen", unix.SYS_FSOPEN, [6]uintptr{bad, 0}},
		{"fsmount", unix.SYS_FSMOUNT, [6]uintptr{^uintptr(0), 0, 0}},
		{"fsconfig", unix.SYS_FSCONFIG, [6]uintptr{^uintptr(0), 0, 0, 0, 0}},
		{"fspick", unix.SYS_FSPICK, [6]uintptr{^uintptr(0), bad, 0}},
		{"move_mount", unix.SYS_MOVE_MOUNT, [6]uintptr{^uintptr(0), bad, ^uintptr(0), bad, 0}},
		{"open_tree", unix.SYS_OPEN_TREE, [6]uintptr{^uintptr(0), bad, 0}},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR, [6]uintptr{^uintptr(0), bad, 0, 0, 0}},
		{"settimeofday", unix.SYS_SETTIMEOFDAY, [6]uintptr{bad, 0}},
		{"clock_settime", unix.SYS_CLOCK_SETTIME, [6]uintptr{9999, bad}},
		{"sethostname", unix.SYS_SETHOSTNAME, [6]uintptr{bad, 1}},
		{"iopl", unix.SYS_IOPL, [6]uintptr{4}},
		{"ioperm", unix.SYS_IOPERM, [6]uintptr{0x10000, 1, 1}},
		{"ioctl_tiocsti", unix.SYS_IOCTL, [6]uintptr{^uintptr(0), unix.TIOCSTI, 0}},
		{"ioctl_tioclinux", unix.SYS_IOCTL, [6]uintptr{^uintptr(0), unix.TIOCLINUX, 0}},
		{"socket_packet", unix.SYS_SOCKET, [6]uintptr{unix.AF_PACKET, 0xff, 0}},
		{"personality", unix.SYS_PERSONALITY, [6]uintptr{0x0040000}},
		{"mbind", unix.SYS_MBIND, [6]uintptr{0, 0, 0xffff, 0, 0, 0}},
		{"migrate_pages", unix.SYS_MIGRATE_PAGES, [6]uintptr{0, 0, bad, bad}},
	}
	var reached, refused []string
	for _, c := range calls {
		_, _, e := unix.Syscall6(c.nr, c.a[0], c.a[1], c.a[2], c.a[3], c.a[4], c.a[5])
		s := c.name + "=" + errs(errno(0, 0, e))
		if e == unix.EPERM || e == unix.ENOSYS || e == unix.EAFNOSUPPORT {
			refused = append(refused, s)
		} else {
			reached = append(reached, s)
		}
	}
	return len(reached) > 0, "reached: " + strings.Join(reached, " ") + " | refused: " + strings.Join(refused, " ")
}
