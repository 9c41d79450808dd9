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
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

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
