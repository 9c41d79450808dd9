//go:build linux

package linux

// The kernel data path experiments (docs/kernel-data-path.md). The test
// binary re-executes itself in two roles, both driven by one command per
// line on stdin, one answer per line on stdout ("ok ..." or "err ..."):
//
//	test process                        server S (own mount namespace, like P1)
//	  start ── env ROLE=server ────────▶ mount a go-fuse file system whose top level
//	                                    is a table of entries; print "ready"
//	  "add|remove|inval|renew NAME" ────▶ change the table; remove = NotifyDelete,
//	                                    inval = NotifyEntry, renew = new node id
//	  "bind NAME HOST [ro] [rec]" ──────▶ open(HOST, O_PATH) + BindDescriptor over
//	                                    the entry, in S's own namespace
//	  "bindns ID TARGET HOST" ──────────▶ the same, attached at TARGET from a thread that
//	                                    setns'd into probe ID's mount namespace
//	  "spawn ID same|newns|userns" ─────▶ start probe ID (ROLE=probe) as S's child
//	  "p ID CMD..." ────────────────────▶ relay CMD to probe ID, relay its answer
//
// S serves the FUSE mount and also lays the binds (resolving the entry
// through its own mount, as the daemon will); everything that reads the
// view is a probe, another process.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

const (
	envRole = "ROOTFS_KPATH_ROLE"
	envCfg  = "ROOTFS_KPATH_CFG"
)

type kpathConfig struct {
	Mnt          string
	EntryTimeout time.Duration
	Entries      map[string]string // name -> "dir" | "file"
}

// TestMain runs a role when the test binary was re-executed as one. The
// same facts with the project's own view as the FUSE server are checked by
// vfs's TestViewSwapBinds: nothing here imports a top-level package.
func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "server":
		os.Exit(serverMain())
	case "probe":
		os.Exit(probeMain())
	case "p0":
		os.Exit(p0Main())
	case "mainthread":
		os.Exit(mainThreadMain()) // mountapi_linux_test.go
	}
	code := m.Run()
	testutil.RemoveControlTestBinary()
	os.Exit(code)
}

// ---- the synthetic file system ----

type synthEntry struct {
	ino uint64
	dir bool
}

// synthTop is the view's top level in miniature: a table of entries, each
// a directory holding "whoami" ("fuse") or a file reading "fuse".
type synthTop struct {
	fs.Inode
	mu      sync.Mutex
	next    uint64
	entries map[string]synthEntry
	lookups map[string]int
	fail    map[string]syscall.Errno // lookups of these names fail so
}

var _ = (fs.NodeLookuper)((*synthTop)(nil))
var _ = (fs.NodeReaddirer)((*synthTop)(nil))

func (t *synthTop) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t.mu.Lock()
	e, ok := t.entries[name]
	t.lookups[name]++
	fail := t.fail[name]
	t.mu.Unlock()
	if fail != 0 {
		return nil, fail
	}
	if !ok {
		return nil, syscall.ENOENT
	}
	if e.dir {
		out.Mode = syscall.S_IFDIR | 0o755
		return t.NewInode(ctx, &synthDir{}, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: e.ino}), 0
	}
	out.Mode = syscall.S_IFREG | 0o644
	out.Size = 5
	f := &fs.MemRegularFile{Data: []byte("fuse\n"), Attr: fuse.Attr{Mode: 0o644}}
	return t.NewInode(ctx, f, fs.StableAttr{Mode: syscall.S_IFREG, Ino: e.ino}), 0
}

func (t *synthTop) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var l []fuse.DirEntry
	for n, e := range t.entries {
		m := uint32(syscall.S_IFREG)
		if e.dir {
			m = syscall.S_IFDIR
		}
		l = append(l, fuse.DirEntry{Name: n, Mode: m, Ino: e.ino})
	}
	return fs.NewListDirStream(l), 0
}

type synthDir struct{ fs.Inode }

var _ = (fs.NodeOnAdder)((*synthDir)(nil))

func (d *synthDir) OnAdd(ctx context.Context) {
	f := &fs.MemRegularFile{Data: []byte("fuse\n"), Attr: fuse.Attr{Mode: 0o644}}
	d.AddChild("whoami", d.NewPersistentInode(ctx, f, fs.StableAttr{}), false)
}

// ---- roles ----

func serverMain() int {
	var cfg kpathConfig
	if err := json.Unmarshal([]byte(os.Getenv(envCfg)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "server: bad config:", err)
		return 2
	}
	// S is P1: its mounts must not propagate back to the host.
	if err := Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	top := &synthTop{next: 100, entries: map[string]synthEntry{}, lookups: map[string]int{}, fail: map[string]syscall.Errno{}}
	for n, k := range cfg.Entries {
		top.entries[n] = synthEntry{ino: top.next, dir: k == "dir"}
		top.next++
	}
	et := cfg.EntryTimeout
	zero := time.Duration(0)
	opts := &fs.Options{EntryTimeout: &et, AttrTimeout: &et, NegativeTimeout: &zero}
	opts.MountOptions.AllowOther, opts.MountOptions.DirectMount, opts.MountOptions.DirectMountStrict = true, true, true
	srv, err := fs.Mount(cfg.Mnt, top, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "server: mount:", err)
		return 1
	}
	defer srv.Unmount()
	rootFD, err := unix.Open(cfg.Mnt, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "server: open mount:", err)
		return 1
	}
	s := &server{cfg: cfg, top: top, rootFD: rootFD, probes: map[string]*probeConn{}}
	defer s.closeProbes()
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Println(s.do(strings.Fields(sc.Text())))
	}
	return 0
}

type probeConn struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

type server struct {
	cfg    kpathConfig
	top    *synthTop
	rootFD int
	probes map[string]*probeConn
}

func (s *server) closeProbes() {
	for _, p := range s.probes {
		p.in.Close()
		p.cmd.Wait()
	}
}

func errReply(err error) string {
	var en syscall.Errno
	if asErrno(err, &en) {
		return "err " + unix.ErrnoName(en)
	}
	return "err " + strings.ReplaceAll(err.Error(), "\n", " ")
}

func asErrno(err error, en *syscall.Errno) bool {
	for err != nil {
		if e, ok := err.(syscall.Errno); ok {
			*en = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func errnoReply(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	return "err " + unix.ErrnoName(e)
}

func (s *server) do(a []string) string {
	if len(a) == 0 {
		return "err empty"
	}
	t := s.top
	switch a[0] {
	case "add":
		t.mu.Lock()
		t.entries[a[1]] = synthEntry{ino: t.next, dir: a[2] == "dir"}
		t.next++
		t.mu.Unlock()
		return errnoReply(ignoreENOENT(t.NotifyEntry(a[1])))
	case "remove":
		t.mu.Lock()
		delete(t.entries, a[1])
		t.mu.Unlock()
		ch := t.GetChild(a[1])
		if ch == nil {
			return "err not known to the kernel"
		}
		e := t.NotifyDelete(a[1], ch)
		t.RmChild(a[1])
		return errnoReply(e)
	case "inval":
		return errnoReply(t.NotifyEntry(a[1]))
	case "renew":
		t.mu.Lock()
		e := t.entries[a[1]]
		e.ino = t.next
		t.next++
		t.entries[a[1]] = e
		t.mu.Unlock()
		t.RmChild(a[1])
		return "ok"
	case "invalinode": // FUSE_NOTIFY_INVAL_INODE of the entry: attributes and pages only
		ch := t.GetChild(a[1])
		if ch == nil {
			return "err not known to the kernel"
		}
		return errnoReply(ch.NotifyContent(0, 0))
	case "fail": // fail NAME ERRNO|-: lookups of NAME answer ERRNO ("-": stop)
		t.mu.Lock()
		defer t.mu.Unlock()
		if a[2] == "-" {
			delete(t.fail, a[1])
			return "ok"
		}
		e := map[string]syscall.Errno{"EIO": syscall.EIO, "ENOENT": syscall.ENOENT, "EACCES": syscall.EACCES}[a[2]]
		if e == 0 {
			return "err unknown errno " + a[2]
		}
		t.fail[a[1]] = e
		return "ok"
	case "lookups":
		t.mu.Lock()
		defer t.mu.Unlock()
		return "ok " + strconv.Itoa(t.lookups[a[1]])
	case "share":
		if err := Mount("", s.cfg.Mnt, "", unix.MS_SHARED, ""); err != nil {
			return errReply(err)
		}
		return "ok"
	case "tmpfs": // tmpfs PATH: a host mount below a root, in S's namespace
		if err := Mount("tmpfs", a[1], "tmpfs", 0, "size=1m"); err != nil {
			return errReply(err)
		}
		return "ok"
	case "bind", "bindns":
		var ns string
		if a[0] == "bindns" {
			ns, a = a[1], a[1:]
		}
		// bind NAME HOST: NAME below S's mount; bindns ID TARGET HOST:
		// TARGET is a path in the probe's namespace.
		name, host := a[1], a[2]
		o := BindOptions{Attr: MountAttr{Set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}}
		for _, f := range a[3:] {
			switch f {
			case "ro":
				o.Attr.Set |= unix.MOUNT_ATTR_RDONLY
			case "rec":
				o.Recursive = true
			}
		}
		src, err := unix.Open(host, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return errReply(err)
		}
		defer unix.Close(src)
		if ns == "" {
			if err := BindDescriptor(src, s.rootFD, name, o); err != nil {
				return errReply(err)
			}
			return "ok"
		}
		// The tree is cloned here (its source mount is in S's namespace)
		// and attached from a thread in the probe's namespace.
		p := s.probes[ns]
		if p == nil {
			return "err no probe " + ns
		}
		nsFD, err := unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", p.cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return errReply(err)
		}
		defer unix.Close(nsFD)
		tree, err := CloneMount(src, o.Recursive)
		if err != nil {
			return errReply(err)
		}
		defer unix.Close(tree)
		if err := MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, o.Attr); err != nil {
			return errReply(err)
		}
		err = InMountNamespace(nsFD, func() error {
			return AttachMount(tree, unix.AT_FDCWD, name)
		})
		if err != nil {
			return errReply(err)
		}
		return "ok"
	case "spawn":
		return s.spawn(a[1], a[2])
	case "p":
		p := s.probes[a[1]]
		if p == nil {
			return "err no probe " + a[1]
		}
		fmt.Fprintln(p.in, strings.Join(a[2:], " "))
		if !p.out.Scan() {
			return "err probe " + a[1] + " died"
		}
		return p.out.Text()
	}
	return "err unknown command " + a[0]
}

func ignoreENOENT(e syscall.Errno) syscall.Errno {
	if e == syscall.ENOENT {
		return 0
	}
	return e
}

func (s *server) spawn(id, mode string) string {
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"=probe")
	cmd.Stderr = os.Stderr
	// No Pdeathsig: it follows the forking thread, and InMountNamespace
	// ends the thread it ran on, which may be one that forked a probe.
	// A probe exits when its stdin closes.
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	switch mode {
	case "same":
	case "newns":
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNS
	case "userns":
		// Root of a new user namespace (full capabilities there), whose
		// mount namespace is less privileged than S's: the kernel locks
		// the mounts it copies.
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	default:
		return "err bad mode " + mode
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return errReply(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return errReply(err)
	}
	if err := cmd.Start(); err != nil {
		return errReply(err)
	}
	p := &probeConn{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if !p.out.Scan() || p.out.Text() != "ready" {
		return "err probe did not start"
	}
	s.probes[id] = p
	return "ok " + strconv.Itoa(cmd.Process.Pid)
}

// p0Main is the unprivileged user: it starts S in a user namespace it owns
// (ns root = this uid), with S's stdio its own, as mountmgr's RunDaemon
// starts P1.
func p0Main() int {
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"=server")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "p0:", err)
		return 1
	}
	return 0
}

// procFD is the probe's descriptor of /proc, opened before any pivot.
var procFD int

func probeMain() int {
	var err error
	if procFD, err = unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 1
	}
	fds := map[string]int{}
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Println(probeDo(fds, strings.Fields(sc.Text())))
	}
	return 0
}

func probeDo(fds map[string]int, a []string) string {
	if len(a) < 2 {
		return "err short command"
	}
	switch a[0] {
	case "read":
		b, err := os.ReadFile(a[1])
		if err != nil {
			return errReply(err)
		}
		return "ok " + oneLine(b)
	case "ls":
		ents, err := os.ReadDir(a[1])
		if err != nil {
			return errReply(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return "ok " + strings.Join(names, ",")
	case "open": // open K PATH: keep a descriptor
		fd, err := unix.Open(a[2], unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return errReply(err)
		}
		fds[a[1]] = fd
		return "ok"
	case "readat": // readat K [NAME]: read the kept file, or NAME below the kept directory
		fd := fds[a[1]]
		if len(a) > 2 {
			var err error
			fd, err = unix.Openat(fd, a[2], unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return errReply(err)
			}
			defer unix.Close(fd)
		}
		b := make([]byte, 64)
		n, err := unix.Pread(fd, b, 0)
		if err != nil {
			return errReply(err)
		}
		return "ok " + oneLine(b[:n])
	case "chdir":
		if err := os.Chdir(a[1]); err != nil {
			return errReply(err)
		}
		return "ok"
	case "write":
		if err := os.WriteFile(a[1], []byte("x"), 0o644); err != nil {
			return errReply(err)
		}
		return "ok"
	case "mountinfo": // mountinfo PATH: options of the top mount at PATH, or "none"
		// Through a descriptor of /proc taken at start: a pivoted probe
		// has no /proc, and mountinfo shows paths from the current root.
		fd, err := unix.Openat(procFD, "self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return errReply(err)
		}
		f := os.NewFile(uintptr(fd), "mountinfo")
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return errReply(err)
		}
		opts := "none"
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 6 || UnescapeMountinfo(f[4]) != a[1] {
				continue
			}
			// per-mount options, optional fields (propagation), fstype
			opts = f[5]
			for i := 6; i < len(f); i++ {
				if f[i] == "-" {
					if i+1 < len(f) {
						opts += " fstype=" + f[i+1]
					}
					break
				}
				opts += " " + f[i]
			}
		}
		return "ok " + opts
	case "slave", "private", "rslave", "rprivate":
		fl := map[string]uintptr{"slave": unix.MS_SLAVE, "private": unix.MS_PRIVATE,
			"rslave": unix.MS_REC | unix.MS_SLAVE, "rprivate": unix.MS_REC | unix.MS_PRIVATE}[a[0]]
		if err := Mount("", a[1], "", fl, ""); err != nil {
			return errReply(err)
		}
		return "ok"
	case "pivot": // pivot PATH: make PATH the root, as mountmgr's P2 does with the view
		if err := Mount(a[1], a[1], "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return errReply(err)
		}
		if err := os.Chdir(a[1]); err != nil {
			return errReply(err)
		}
		if err := PivotRoot(".", "."); err != nil {
			return errReply(err)
		}
		if err := Unmount(".", unix.MNT_DETACH); err != nil {
			return errReply(err)
		}
		if err := os.Chdir("/"); err != nil {
			return errReply(err)
		}
		return "ok"
	case "try": // try nocap|caps umount|remount-rw|setattr-rw|remount-suid PATH
		return onThread(a[1] == "nocap", func() error {
			switch a[2] {
			case "umount":
				return Unmount(a[3], 0)
			case "umount-detach":
				return Unmount(a[3], unix.MNT_DETACH)
			case "remount-rw":
				return Mount("", a[3], "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV, "")
			case "remount-suid":
				return Mount("", a[3], "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NODEV, "")
			case "setattr-rw":
				return MountSetattr(unix.AT_FDCWD, a[3], 0, MountAttr{Clear: unix.MOUNT_ATTR_RDONLY})
			case "setattr-suid":
				return MountSetattr(unix.AT_FDCWD, a[3], 0, MountAttr{Clear: unix.MOUNT_ATTR_NOSUID})
			}
			return fmt.Errorf("unknown try %q", a[2])
		})
	}
	return "err unknown command " + a[0]
}

// onThread runs fn on a locked thread that first drops every capability
// when nocap (the sandboxed server's state), and lets the thread die.
func onThread(nocap bool, fn func() error) string {
	r := make(chan string, 1)
	go func() {
		runtime.LockOSThread()
		if nocap {
			last, err := LastCap()
			if err == nil {
				err = DropAllCapabilities(last)
			}
			if err != nil {
				r <- "err dropping capabilities: " + err.Error()
				return
			}
		}
		if err := fn(); err != nil {
			r <- errReply(err)
			return
		}
		r <- "ok"
	}()
	return <-r
}

// ---- the test side ----

type kpathServer struct {
	t   *testing.T
	mnt string
	in  io.WriteCloser
	out *bufio.Scanner
	cmd *exec.Cmd
}

// startServer starts S with entries (name -> "dir"|"file") at a fresh
// mount point. With asUser (a uid), S runs in a user namespace owned by
// that uid, started by p0 running as the uid.
func startServer(t *testing.T, entryTimeout time.Duration, entries map[string]string, asUser *syscall.Credential, exe string) *kpathServer {
	t.Helper()
	return startServerConfig(t, kpathConfig{EntryTimeout: entryTimeout, Entries: entries}, asUser, exe)
}

func startServerConfig(t *testing.T, c kpathConfig, asUser *syscall.Credential, exe string) *kpathServer {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	requireMountAPI(t)
	base := worldTempDir(t)
	mnt := filepath.Join(base, "mnt")
	os.Mkdir(mnt, 0o755)
	c.Mnt = mnt
	cfg, _ := json.Marshal(c)
	if exe == "" {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"=server", envCfg+"="+string(cfg))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	if asUser != nil {
		os.Chown(mnt, int(asUser.Uid), int(asUser.Gid))
		cmd.Env = append(cmd.Env[:len(cmd.Env)-2], envRole+"=p0", envCfg+"="+string(cfg))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asUser}
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &kpathServer{t: t, mnt: mnt, in: in, out: bufio.NewScanner(out), cmd: cmd}
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	if !s.out.Scan() || s.out.Text() != "ready" {
		t.Fatalf("server did not start: %q", s.out.Text())
	}
	return s
}

// do sends one command and returns the answer.
func (s *kpathServer) do(format string, args ...any) string {
	s.t.Helper()
	cmd := fmt.Sprintf(format, args...)
	fmt.Fprintln(s.in, cmd)
	if !s.out.Scan() {
		s.t.Fatalf("%s: server died", cmd)
	}
	r := s.out.Text()
	s.t.Logf("%s -> %s", cmd, r)
	return r
}

// want sends a command and fails unless the answer is exactly want.
func (s *kpathServer) want(want, format string, args ...any) {
	s.t.Helper()
	if got := s.do(format, args...); got != want {
		s.t.Errorf("%s: got %q, want %q", fmt.Sprintf(format, args...), got, want)
	}
}

// wantPrefix is want for answers that carry more (mount options).
func (s *kpathServer) wantHas(sub, format string, args ...any) string {
	s.t.Helper()
	got := s.do(format, args...)
	if !strings.Contains(got, sub) {
		s.t.Errorf("%s: got %q, want it to contain %q", fmt.Sprintf(format, args...), got, sub)
	}
	return got
}

// hostTree makes a host directory holding whoami="host" and a host file
// reading "hostfile", both readable by everyone.
func hostTree(t *testing.T) (dir, file string) {
	t.Helper()
	base := worldTempDir(t)
	dir = filepath.Join(base, "ws")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	os.WriteFile(filepath.Join(dir, "whoami"), []byte("host\n"), 0o644)
	file = filepath.Join(base, "one")
	os.WriteFile(file, []byte("hostfile\n"), 0o644)
	return dir, file
}

// worldTempDir is t.TempDir() with it and its parent (the test's
// directory, created 0700) open to the unprivileged user of
// TestKernelPathUnprivileged.
func worldTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	os.Chmod(filepath.Dir(d), 0o755)
	os.Chmod(d, 0o755)
	return d
}

// requireMountAPI skips on kernels without mount_setattr (before 5.12),
// where the kernel data path is not offered (linux.ErrNoMountAPI). This is
// a kernel feature, not a missing prerequisite of the machine: it skips
// even under ROOTFS_REQUIRE_FUSE=1.
func requireMountAPI(t *testing.T) {
	t.Helper()
	err := unix.MountSetattr(-1, "", unix.AT_EMPTY_PATH, &unix.MountAttr{})
	if errors.Is(err, unix.ENOSYS) {
		t.Skip("needs mount_setattr (Linux 5.12); the kernel data path is not offered on this kernel")
	}
}

// oneLine keeps a probe's answer on one line: file content with its
// newlines shown as "|".
func oneLine(b []byte) string {
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "|")
}
