package session

// The visibility plane: the session's audit stream (every plane's
// records, and the file --audit-log names), root changes said once each
// at info level, and the session's state on a socket for `rootfs status`
// and `rootfs why` (package instance).

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/instance"
	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/netpolicy/netstack"
	"github.com/rootfs-dev/rootfs/rootset"
)

// visibility is one session's audit log, status socket and what they
// report.
type visibility struct {
	log     *zap.Logger
	id      string
	started time.Time
	alog    *audit.Log
	file    io.Closer // the audit log's file; nil without one
	logName string
	kwatch  *audit.KernelWatch
	status  *instance.Server
	// tcpOnly: the sandbox has no TUN, only the fast path and the
	// resolver on lo (set before serve).
	tcpOnly bool

	// mu guards the fields that follow.
	mu        sync.Mutex
	info      instance.Info // what does not change, and the client
	table     *rootset.Table
	roots     []string // the last root set said, "host" or "host -> path"
	source    string   // where it came from
	readOnly  bool
	logWarned bool
}

// newVisibility opens the audit log (o.AuditLog: a file, "-" for stderr,
// "" none) and starts the log, which counts and keeps the last refusals
// whether or not it writes.
func newVisibility(o *Options, log *zap.Logger) (*visibility, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	v := &visibility{log: log, id: hex.EncodeToString(b[:]), started: time.Now(), logName: o.AuditLog, readOnly: o.Roots.ReadOnly}
	var w io.WriteCloser
	if o.AuditLog != "" {
		var err error
		if w, err = audit.Open(o.AuditLog); err != nil {
			return nil, errors.Join(ErrUsage, err)
		}
		v.file = w
	}
	v.alog = audit.New(w, audit.Options{Instance: v.id, Logger: log})
	return v, nil
}

// close stops the status socket, the kernel watch and the log, in that
// order.
func (v *visibility) close() {
	if v.status != nil {
		v.status.Close()
	}
	if v.kwatch != nil {
		v.kwatch.Close()
	}
	v.alog.Close()
	if v.file != nil {
		v.file.Close()
	}
}

// started records what the session runs and serves its status.
func (v *visibility) serve(spec *mountmgr.Spec, o *Options, strict bool) {
	cwd, _ := os.Getwd()
	info := instance.Info{ID: v.id, PID: os.Getpid(), UID: mountmgr.HostUID(), Started: v.started, Command: slices.Clone(o.Command), Cwd: cwd,
		DataPath: "kernel", Layout: "host", Network: "the host's network", AuditLog: v.logName}
	if strict {
		info.DataPath = "strict (the daemon serves every operation)"
	}
	if o.Roots.Layout == rootset.LayoutFlat {
		info.Layout = "flat"
	}
	switch {
	case spec.NoNetwork:
		info.Network = "none (loopback only)"
	case spec.Net != nil:
		families := "IPv4 only"
		if spec.Net.Addr6.IsValid() {
			families = "IPv4 and IPv6"
		}
		if v.tcpOnly {
			families = "TCP and DNS only (no /dev/net/tun), " + families
		}
		info.Network = netDescription(o.Sandbox.Net) + "; " + families
	}
	info.Runtime = append(info.Runtime, spec.RuntimeDirs...)
	if spec.RuntimeDirs == nil {
		info.Runtime = append(info.Runtime, mountmgr.DefaultRuntimeDirs...)
	}
	for _, f := range spec.EtcFiles {
		info.Runtime = append(info.Runtime, "/etc/"+f)
	}
	if spec.EtcFiles == nil {
		for _, f := range mountmgr.DefaultEtcFiles {
			info.Runtime = append(info.Runtime, "/etc/"+f)
		}
	}
	info.Private = []string{"/tmp", "/dev", "/proc"}
	for _, b := range spec.Binds {
		ib := instance.Bind{Host: b.Source, Path: b.Dest, ReadOnly: b.ReadOnly && !b.Overlay, Reason: b.Reason}
		if b.Symlink != "" {
			ib.Reason += ", a symlink to " + b.Symlink
		}
		if b.Reason == "" {
			ib.Flag = "--bind"
			if b.ReadOnly {
				ib.Flag = "--ro-bind"
			}
		}
		info.Binds = append(info.Binds, ib)
	}
	v.mu.Lock()
	v.info = info
	v.mu.Unlock()

	dir, err := instance.Dir(os.Getenv, mountmgr.HostUID(), true)
	if err == nil {
		v.status, err = instance.Serve(dir, v.id, v.snapshot, v.log)
	}
	if err != nil {
		v.log.Debug("rootfs status will not list this session", zap.Error(err))
	}
}

// snapshot is the session's Info now.
func (v *visibility) snapshot() instance.Info {
	v.mu.Lock()
	info := v.info
	t := v.table
	v.mu.Unlock()
	if t != nil {
		for _, e := range t.Entries() {
			info.Roots = append(info.Roots, instance.Root{Host: e.HostPath, Path: e.InView(), ReadOnly: v.readOnly, Source: v.source})
		}
	}
	info.Stats = v.alog.Stats()
	info.Refusals = v.alog.Refusals()
	return info
}

// client notes the client's name from its initialize.
func (v *visibility) client(name, version string) {
	v.mu.Lock()
	v.info.Client = strings.TrimSpace(name + " " + version)
	v.mu.Unlock()
}

// installed records an install: the roots refused, and the root set when
// it changed (one info line, one record).
func (v *visibility) installed(source string, t *rootset.Table, err error) {
	if t == nil || err != nil {
		return
	}
	v.warnLogInRoot(t)
	for _, s := range t.Skipped() {
		r := audit.Record{Op: audit.OpRootRef, Path: s.Root.URI, Result: audit.ResultRefused, Reason: s.Reason.Error(), Source: source}
		if errors.Is(s.Reason, rootset.ErrNotAllowed) {
			r.Allow = "--allow " + filepath.Dir(strings.TrimPrefix(s.Root.URI, "file://"))
		}
		v.alog.Add(r)
	}
	var now []string
	var roots []audit.RootPath
	for _, e := range t.Entries() {
		s := e.HostPath
		if e.InView() != e.HostPath {
			s += " -> " + e.InView()
		}
		now = append(now, s)
		roots = append(roots, audit.RootPath{Host: e.HostPath, View: e.InView()})
	}
	v.mu.Lock()
	v.table = t
	old := v.roots
	changed := !slices.Equal(old, now)
	v.roots = now
	v.source = source
	kw := v.kwatch
	v.mu.Unlock()
	if kw != nil {
		kw.SetRoots(roots)
	}
	if !changed {
		return
	}
	v.alog.Add(audit.Record{Op: audit.OpRoots, Old: old, New: now, Source: source})
	if source == "cwd" {
		// The working directory stands in until the client's roots come:
		// said at debug level, so that a session whose client sends roots
		// says only its real boundary.
		v.log.Debug("roots: "+strings.Join(now, ", "), zap.String("from", source))
		return
	}
	if len(now) == 0 {
		v.log.Info("roots: none now", zap.String("from", source))
		return
	}
	v.log.Info("roots: "+strings.Join(now, ", "), zap.String("from", source))
}

// netRefused records a connection, datagram or DNS name the network
// policy refused.
func (v *visibility) netRefused(r netstack.Refusal) {
	op := audit.OpConnect
	if r.Proto == "dns" {
		op = audit.OpDNS
	}
	v.alog.Add(audit.Record{Op: op, Dest: r.Proto + " " + r.Dst, Result: audit.ResultRefused, Reason: r.Decision.Reason, Allow: r.Decision.Hint})
}

// kernelGroup makes the kernel data path's audit watch, whose fanotify
// group the sandbox's init will read (audit.Forward): nil unless an audit
// log file is written, since every open the sandbox makes below a root
// becomes an event, and the host's creates, deletes, renames and
// attribute changes on the roots' file systems too. Marks need root;
// without it SetRoots says once that what the kernel serves is not
// recorded.
func (v *visibility) kernelGroup() *os.File {
	if v.file == nil {
		return nil
	}
	kw, err := audit.NewKernelWatch(v.alog, v.log)
	if err != nil {
		v.log.Warn("audit log: what the kernel serves below the roots is not recorded (only refusals and root changes are)", zap.Error(err))
		return nil
	}
	v.mu.Lock()
	v.kwatch = kw
	t := v.table
	v.mu.Unlock()
	if t != nil {
		var roots []audit.RootPath
		for _, e := range t.Entries() {
			roots = append(roots, audit.RootPath{Host: e.HostPath, View: e.InView()})
		}
		kw.SetRoots(roots)
	}
	return kw.Group()
}

// reportSyscalls asks the sandbox to report the calls its seccomp filter
// refuses with EPERM (seccomp user notification), each one a record:
// only when an audit log file is written, since each such call then
// costs a round trip to rootfs (BENCHMARKS.md).
func (v *visibility) reportSyscalls(o *mountmgr.ServerOptions) {
	if v.file == nil {
		return
	}
	o.SyscallRefused = v.alog.SyscallRefused
	o.SyscallsLost = func(n int64) { v.alog.Lost(n, "seccomp refusals came faster than they could be recorded") }
}

// syscallsUnreported says once, when the kernel refused the filter a
// listener, that the audit log will not hold the filter's refusals.
func (v *visibility) syscallsUnreported(why string) {
	if why == "" {
		return
	}
	v.log.Warn("audit log: system calls the seccomp filter refuses are not recorded (the kernel gave the filter no listener; it refuses them all the same)", zap.String("reason", why))
}

// watchKernel takes the events the sandbox's init (pid) passes on, and
// moves the watch of closes to the sandbox's own mounts of the roots.
func (v *visibility) watchKernel(pid int, events io.ReadCloser) {
	v.mu.Lock()
	kw := v.kwatch
	v.mu.Unlock()
	if kw == nil || events == nil {
		return
	}
	kw.Consume(events)
	kw.MarkSandbox(pid)
}

// warnLogInRoot says once when the audit log file lies in a root, where
// the server can rewrite it.
func (v *visibility) warnLogInRoot(t *rootset.Table) {
	if v.file == nil || v.logName == "-" || v.logWarned {
		return
	}
	p, err := filepath.Abs(v.logName)
	if err != nil {
		return
	}
	if real, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		p = filepath.Join(real, filepath.Base(p))
	}
	for _, e := range t.Entries() {
		if p == e.HostPath || strings.HasPrefix(p, e.HostPath+"/") {
			v.logWarned = true
			v.log.Warn("audit log: it lies in a root, where the server can rewrite it; give --audit-log a file outside the roots",
				zap.String("log", p), zap.String("root", e.HostPath))
			return
		}
	}
}
