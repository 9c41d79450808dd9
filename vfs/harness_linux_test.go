//go:build linux

package vfs

// The FUSE tests never access a mount from the process that serves it: the
// test binary re-executes itself as a server (TestMain sees
// ROOTFS_VFS_SERVE) and the test process is the client. The server reads
// commands on stdin, one per line, and answers on stdout:
//
//	test process                         server (this binary, re-executed)
//	  start ── env ROOTFS_VFS_SERVE=cfg ──▶ mount, print "ready"
//	  "swap {roots json}" ───────────────▶ BuildTable + View.swap, print "ok" (after swap returned)
//	  close stdin / SIGTERM ─────────────▶ unmount, exit 0

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
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
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/testutil"
	"github.com/rootfs-dev/rootfs/rootset"
)

// serveConfig is what a server serves. Each field documented as a negative
// control turns one control.Knob on (see controls).
type serveConfig struct {
	Mnt         string
	Roots       []string
	ReadOnly    bool
	Passthrough bool
	Writeback   bool
	// NoFile lowers the server's RLIMIT_NOFILE; NoFDRelief turns off the
	// descriptor relief (negative control of TestViewFDRelief).
	NoFile       uint64
	NoFDRelief   bool
	Placeholders []rootset.Placeholder
	// TopPlainOffsets: top-level listings continue by position in the
	// current table (negative control of TestViewTopListingOneTable).
	TopPlainOffsets bool
	CacheTimeout    time.Duration
	// NoInvalidate turns off Swap's kernel notifications (negative control).
	NoInvalidate bool
	// NoHostWatch turns the host watcher off (Options.NoHostWatch);
	// NoHostEvents keeps it (and so the long cache) but drops its events:
	// the negative control of the host-change tests.
	NoHostWatch  bool
	NoHostEvents bool
	NoOpenDrop   bool // negative control of TestViewRevokeRenewedOpenFile
	NoKillPriv   bool // negative control of the set-ID tests
	PerFDLocks   bool // negative control of the lock-owner tests
	// PassthroughEvents: the watcher acts on the view's own passthrough
	// writes (negative control of TestViewPassthroughOwnWrites).
	PassthroughEvents bool
	// KeepOpendir: OPENDIR is served as before FUSE_NO_OPENDIR_SUPPORT
	// (negative control of TestViewWarmWalkNoDirRequests).
	KeepOpendir bool
	// FlushLockedOnly: a handle flushes only if its file was locked before
	// it was opened (negative control of TestViewLockCloseEarlierDescriptor).
	FlushLockedOnly bool
	NoPrefill       bool // negative control of TestViewPrefill
	// Loopback, when set, serves these host paths with go-fuse's stock,
	// path-based fs.LoopbackNode instead of the view: the negative control
	// of the containment tests.
	Loopback []string
	// Layout and Beneath are Options.Layout and Options.Beneath; Written
	// gives the view a session WriteSet (Options.Written).
	Layout  rootset.Layout
	Beneath []string
	Written bool
	// BoundEntries is Options.BoundEntries (the entries will be covered by
	// binds).
	BoundEntries bool
	// AuditLog names a file the view's audit log (Options.Audit) is
	// written to, closed when the server stops.
	AuditLog string
}

// tableInfo is what the "table" command reports of the table served.
type tableInfo struct {
	Entries []entryInfo
	Skipped []string // each reason's text, prefixed by "planted: " for ErrWritableSymlink
}

type entryInfo struct {
	Name, ViewPath, ViewURI, HostPath, Displaced string
	Covered                                      bool
}

func TestMain(m *testing.M) {
	if cfg := os.Getenv("ROOTFS_VFS_SERVE"); cfg != "" {
		os.Exit(serveMain(cfg))
	}
	if a := os.Getenv("ROOTFS_VFS_ATTACK"); a != "" {
		os.Exit(attackMain(a))
	}
	if os.Getenv("ROOTFS_VFS_LOCKER") != "" {
		os.Exit(lockerMain())
	}
	code := m.Run()
	testutil.RemoveControlTestBinary()
	os.Exit(code)
}

func rootsOf(paths []string) []rootset.Root {
	var rs []rootset.Root
	for _, p := range paths {
		rs = append(rs, rootset.Root{URI: p})
	}
	return rs
}

func serveMain(cfgJSON string) int {
	var cfg serveConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "serve: bad config:", err)
		return 2
	}
	for _, k := range cfg.controls() {
		if !control.On(k) {
			fmt.Fprintf(os.Stderr, "serve: control %s is not on in this build\n", k)
			return 2
		}
	}
	if cfg.NoFile != 0 {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: cfg.NoFile, Max: cfg.NoFile}); err != nil {
			fmt.Fprintln(os.Stderr, "serve: setrlimit:", err)
			return 1
		}
	}
	var root fs.InodeEmbedder
	var opts *fs.Options
	var v *View
	if cfg.Loopback != nil {
		root = &loopbackTop{paths: cfg.Loopback}
		sec := time.Second
		opts = &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec, NegativeTimeout: &sec}
	} else {
		log, _ := zap.NewDevelopment()
		var written *rootset.WriteSet
		if cfg.Written {
			written = rootset.NewWriteSet(0)
			defer written.Close()
		}
		var alog *audit.Log
		if cfg.AuditLog != "" {
			w, err := audit.Open(cfg.AuditLog)
			if err != nil {
				fmt.Fprintln(os.Stderr, "serve:", err)
				return 1
			}
			defer w.Close()
			alog = audit.New(w, audit.Options{Instance: "test", Logger: log})
			defer alog.Close()
		}
		v = NewView(Options{Passthrough: cfg.Passthrough, Writeback: cfg.Writeback, Placeholders: cfg.Placeholders, CacheTimeout: cfg.CacheTimeout, NoHostWatch: cfg.NoHostWatch, Logger: log,
			TableOptions: rootset.TableOptions{ReadOnly: cfg.ReadOnly, Layout: cfg.Layout, Beneath: cfg.Beneath, Written: written}, BoundEntries: cfg.BoundEntries, Audit: alog})
		root = v.root
		opts = v.fuseOptions()
	}
	opts.AllowOther = true
	opts.Debug = os.Getenv("ROOTFS_VFS_DEBUG") != ""
	opts.DirectMount = true
	var srv *fuse.Server
	var err error
	if v != nil {
		srv, err = v.serve(cfg.Mnt, opts)
	} else {
		srv, err = fs.Mount(cfg.Mnt, root, opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve: mount:", err)
		return 1
	}
	if v != nil {
		if _, err := v.Install(rootsOf(cfg.Roots)); err != nil {
			fmt.Fprintln(os.Stderr, "serve: swap:", err)
		}
	}
	fmt.Println("ready")
	fmt.Println(srv.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH != 0 && cfg.Passthrough)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			cmd, arg, _ := strings.Cut(sc.Text(), " ")
			switch cmd {
			case "swap":
				var paths []string
				if err := json.Unmarshal([]byte(arg), &paths); err != nil {
					fmt.Println("err", err)
					continue
				}
				if _, err := v.Install(rootsOf(paths)); err != nil {
					fmt.Println("err", err)
					continue
				}
				fmt.Println("ok")
			case "table":
				var info tableInfo
				for _, e := range v.Table().Entries() {
					ei := entryInfo{Name: e.Name, ViewPath: e.ViewPath, ViewURI: e.ViewURI(), HostPath: e.HostPath, Covered: e.Covered}
					if e.Displaced != nil {
						ei.Displaced = e.Displaced.Error()
					}
					info.Entries = append(info.Entries, ei)
				}
				for _, sk := range v.Table().Skipped() {
					r := sk.Reason.Error()
					if errors.Is(sk.Reason, rootset.ErrWritableSymlink) {
						r = "planted: " + r
					}
					info.Skipped = append(info.Skipped, r)
				}
				data, _ := json.Marshal(info)
				fmt.Println(string(data))
			case "notified":
				// The host watcher's notifications so far.
				fmt.Println(testStats.notified.Load())
			case "dirrequests":
				fmt.Println(testStats.dirRequests.Load())
			case "flushes":
				fmt.Println(testStats.flushes.Load())
			case "reads":
				fmt.Println(testStats.reads.Load())
			case "fds":
				// Descriptors left after the garbage collector ran the
				// cleanups of unreachable nodes.
				for range 3 {
					runtime.GC()
					time.Sleep(50 * time.Millisecond)
				}
				// Pipes are go-fuse's splice pool, not nodes.
				es, _ := os.ReadDir("/proc/self/fd")
				n := 0
				for _, e := range es {
					if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); !strings.HasPrefix(l, "pipe:") {
						n++
					}
				}
				fmt.Println(n)
			default:
				fmt.Println("err unknown command")
			}
		}
		close(done)
	}()
	select {
	case <-sig:
	case <-done:
	}
	if err := srv.Unmount(); err != nil {
		unix.Unmount(cfg.Mnt, unix.MNT_DETACH)
	}
	return 0
}

// loopbackTop is the path-based comparison: one stock fs.LoopbackNode per
// path, as go-fuse documents for non-root loopbacks (identity salted so
// nested roots do not share Inodes).
type loopbackTop struct {
	fs.Inode
	paths []string
}

func (l *loopbackTop) OnAdd(ctx context.Context) {
	for i, p := range l.paths {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			continue
		}
		rd := &fs.LoopbackRoot{Path: p, Dev: uint64(st.Dev) ^ uint64(i+1)}
		ln := &fs.LoopbackNode{RootData: rd}
		rd.RootNode = ln
		ch := l.NewPersistentInode(ctx, ln, fs.StableAttr{Mode: fuse.S_IFDIR, Ino: st.Ino ^ uint64(i+1)<<40})
		l.AddChild(filepath.Base(p), ch, true)
	}
}

// controls are the knobs cfg turns on: a server with any is a control
// build of the test binary (testutil.ControlTestBinary).
func (cfg serveConfig) controls() []control.Knob {
	var ks []control.Knob
	for _, c := range []struct {
		on bool
		k  control.Knob
	}{
		{cfg.NoInvalidate, control.NoSwapInvalidate},
		{cfg.NoFDRelief, control.NoFDRelief},
		{cfg.NoHostEvents, control.NoHostEvents},
		{cfg.NoOpenDrop, control.NoOpenDrop},
		{cfg.NoKillPriv, control.NoKillPriv},
		{cfg.PerFDLocks, control.NoLockOwners},
		{cfg.PassthroughEvents, control.NoPassthroughWindows},
		{cfg.KeepOpendir, control.NoOpendirElision},
		{cfg.TopPlainOffsets, control.NoTopListingGen},
		{cfg.FlushLockedOnly, control.NoCloseUnlock},
		{cfg.NoPrefill, control.NoPrefill},
	} {
		if c.on {
			ks = append(ks, c.k)
		}
	}
	return ks
}

// server is a running serve subprocess.
type server struct {
	t   testing.TB
	Mnt string
	// Passthrough: the kernel granted FUSE passthrough and the view uses it.
	Passthrough bool
	cmd         *exec.Cmd
	in          *os.File
	out         *bufio.Scanner
	errLn       *lockedWriter
}

// serve mounts a view (or the loopback control) in a subprocess and returns
// once it is ready. The mount is removed in t.Cleanup.
func serve(t testing.TB, cfg serveConfig) *server {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireFUSE(t)
	if cfg.Mnt == "" {
		cfg.Mnt = filepath.Join(t.TempDir(), "mnt")
		if err := os.Mkdir(cfg.Mnt, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ROOTFS_VFS_SERVE="+string(data))
	if ks := cfg.controls(); ks != nil {
		cmd.Path = testutil.ControlTestBinary(t)
		cmd.Env = append(cmd.Env, control.EnvVar+"="+control.Names(ks...))
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedWriter{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, Mnt: cfg.Mnt, cmd: cmd, out: bufio.NewScanner(stdout), errLn: stderr}
	s.in = stdin.(*os.File)
	t.Cleanup(s.stop)
	if !s.out.Scan() || s.out.Text() != "ready" {
		s.stop()
		t.Fatalf("server did not start: %q\n%s", s.out.Text(), stderr.String())
	}
	s.out.Scan()
	s.Passthrough = s.out.Text() == "true"
	return s
}

// lockedWriter collects the server's log; ROOTFS_VFS_VERBOSE=1 also copies
// it to the test's stderr.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	if os.Getenv("ROOTFS_VFS_VERBOSE") != "" {
		os.Stderr.Write(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fds returns how many descriptors (other than pipes) the server holds
// after garbage collection.
func (s *server) fds() int {
	s.t.Helper()
	fmt.Fprintln(s.in, "fds")
	if !s.out.Scan() {
		s.t.Fatal("server gone")
	}
	n, err := strconv.Atoi(s.out.Text())
	if err != nil {
		s.t.Fatalf("fds: %q", s.out.Text())
	}
	return n
}

// table returns what the server's current table holds and left out.
func (s *server) table() tableInfo {
	s.t.Helper()
	fmt.Fprintln(s.in, "table")
	if !s.out.Scan() {
		s.t.Fatal("server gone")
	}
	var info tableInfo
	if err := json.Unmarshal(s.out.Bytes(), &info); err != nil {
		s.t.Fatalf("table: %q: %v", s.out.Text(), err)
	}
	return info
}

// swap asks the server to swap to these roots and returns after the
// server's Swap has returned.
func (s *server) swap(paths ...string) {
	s.t.Helper()
	data, _ := json.Marshal(paths)
	if _, err := fmt.Fprintf(s.in, "swap %s\n", data); err != nil {
		s.t.Fatal(err)
	}
	if !s.out.Scan() {
		s.t.Fatal("server gone")
	}
	if s.out.Text() != "ok" {
		s.t.Fatalf("swap: %s", s.out.Text())
	}
}

func (s *server) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	// A hang guard, not a timing assertion: on a loaded 2-core machine the
	// server's unmount (go-fuse retries a busy one) has taken over 10s.
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		s.cmd.Process.Kill()
		<-done
	}
	if mounted(s.Mnt) {
		unix.Unmount(s.Mnt, unix.MNT_DETACH)
		s.t.Errorf("server left %s mounted", s.Mnt)
	}
}

// mounted reports whether p is a mount point (per /proc/self/mountinfo).
func mounted(p string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && f[4] == p {
			return true
		}
	}
	return false
}

// count asks the server for one of its counters ("notified": host watcher
// notifications, "dirrequests", "reads", "flushes").
func (s *server) count(what string) int64 {
	s.t.Helper()
	fmt.Fprintln(s.in, what)
	if !s.out.Scan() {
		s.t.Fatal("server gone")
	}
	n, err := strconv.ParseInt(s.out.Text(), 10, 64)
	if err != nil {
		s.t.Fatalf("%s: %q", what, s.out.Text())
	}
	return n
}

func (s *server) notified() int64    { return s.count("notified") }
func (s *server) dirRequests() int64 { return s.count("dirrequests") }
func (s *server) reads() int64       { return s.count("reads") }
func (s *server) flushes() int64     { return s.count("flushes") }
