package cli

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/mountmgr"
	"github.com/rootfs-dev/rootfs/session"
)

// countLimit bounds the files dry-run counts under one path, so that a
// root or runtime directory of millions of files still answers at once.
const countLimit = 200000

// dryRun prints, on stdout, the sandbox "rootfs run" would build for rf
// (roots, runtime directories, auto-binds with their reasons, --bind and
// --ro-bind, what auto-bind left out, environment, working directory,
// network, data path), each path with its size in files, and starts
// nothing. It runs in P0: no namespace, no mount.
func (rf *runFlags) dryRun(stdout io.Writer, opts *session.Options) error {
	p, err := session.Resolve(opts, zap.NewNop()) // what session.Start would start with
	if err != nil {
		return runError(err)
	}
	static, pinned, fallback, noRoots := p.Static, p.Pinned, p.Fallback, p.NoRoots
	initial := p.Initial()
	spec, inView := p.Spec, p.InView
	w := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	row := func(cols ...string) { fmt.Fprintln(w, "  "+strings.Join(cols, "\t")) }
	section := func(s string) {
		w.Flush()
		fmt.Fprintln(stdout, s)
	}
	fmt.Fprintf(stdout, "rootfs run --dry-run: the sandbox for %s (nothing is started)\n", strings.Join(rf.argv, " "))

	access := "read-write"
	if rf.roots.ReadOnly {
		access = "read-only"
	}
	section("roots (" + access + "; the client's roots replace or join them while the server runs):")
	dir := "/" // where the server starts
	why := map[string]string{}
	if len(static) == 0 {
		for _, r := range fallback {
			why[r.URI] = "the working directory, until the client's roots arrive"
		}
	}
	for _, r := range pinned {
		why[r.URI] = "named by COMMAND's arguments: kept whatever the client sends"
	}
	if len(initial) == 0 {
		msg := "the client's roots at run time"
		if noRoots != nil {
			msg += "; if it declares none, rootfs stops: " + noRoots.Error()
		}
		row("(none yet)", "", msg)
	} else {
		t := p.PreviewTable()
		dir = p.Dir(t)
		for _, e := range t.Entries() {
			if e.Covered {
				continue
			}
			at := e.InView()
			if at != e.HostPath {
				at += " (host " + e.HostPath + ")"
			}
			row(at, files(e.HostPath), why[e.Root.URI])
		}
		for _, s := range t.Skipped() {
			row(s.Root.URI, "", "left out: "+s.Reason.Error())
		}
		t.Close()
	}

	section("runtime (read-only):")
	for _, d := range mountmgr.DefaultRuntimeDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(d)
			row(d+" -> "+t, "", "")
		default:
			row(d, files(d), "")
		}
	}
	var etc []string
	for _, e := range mountmgr.DefaultEtcFiles {
		if _, err := os.Stat(filepath.Join("/etc", e)); err == nil {
			etc = append(etc, e)
		}
	}
	row("/etc", fmt.Sprintf("%d entries", len(etc)), strings.Join(etc, " "))
	row("/dev", "", "null zero full random urandom, a private shm")
	row("/proc", "", "the server's own PID namespace")
	row("/tmp", "", "private tmpfs, "+spec.TmpSize+", read-write")

	var auto, flags []mountmgr.Bind
	for _, b := range spec.Binds {
		if b.Reason != "" {
			auto = append(auto, b)
		} else {
			flags = append(flags, b)
		}
	}
	if inView == nil && !covers(spec.Binds, spec.Argv[0]) && !underRuntimeDir(spec.Argv[0]) {
		auto = append(auto, mountmgr.Bind{Source: spec.Argv[0], Dest: spec.Argv[0], ReadOnly: true, Reason: "command"})
	}
	switch {
	case rf.run.NoAutoBind:
		section("auto-bind: off (--no-auto-bind); only the command's file:")
	default:
		section("auto-bind (read-only, what the command needs):")
	}
	for _, b := range auto {
		what := b.Reason
		switch {
		case b.Overlay && b.Layer != "":
			kept := filepath.Join(b.Layer, "upper")
			if n := files(kept); n != "missing" {
				kept += " (" + n + " now)"
			}
			n := files(b.Source)
			if n == "missing" {
				n = "made empty at start" // PrepareLayers: so that the downloads are kept
			}
			row(b.Dest, n, what+", never written; the server's writes kept in "+kept+" for its next start (rm -r "+mountmgr.LayerServerDir(b.Layer)+" resets them)")
		case b.Overlay:
			row(b.Dest, files(b.Source), what+", never written; the server's writes go to its /tmp and vanish")
		case b.Symlink != "":
			row(b.Dest+" -> "+b.Symlink, "", what+", a symlink")
		default:
			row(b.Dest, files(b.Source), what)
		}
	}
	if inView != nil {
		row(inView.Path, "", "command, in a root")
	}
	if ab := p.AutoBind; ab != nil && len(ab.Refused) > 0 {
		section("left out by auto-bind (give --ro-bind to show one):")
		for _, r := range ab.Refused {
			row(r)
		}
	}
	if len(flags) > 0 {
		section("binds (--bind, --ro-bind):")
		for _, b := range flags {
			mode := "read-write"
			if b.ReadOnly {
				mode = "read-only"
			}
			dest := b.Dest
			if b.Source != b.Dest {
				dest += " (host " + b.Source + ")"
			}
			row(dest, files(b.Source), mode)
		}
	}

	section("environment (nothing else of rootfs's own):")
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		if rf.setByFlag(k) {
			v = "(from --setenv)" // a flag's value may be a secret
		}
		row(k + "=" + v)
	}
	section("")
	fmt.Fprintf(stdout, "working directory: %s\n", dir)
	net := "its own, through rootfs: the public internet, not the host's private side (--allow-net, --deny-net, --net-only)"
	switch {
	case rf.run.NoNetwork:
		net = "none (--no-network: loopback only)"
	case rf.net.HostNetwork:
		net = "the host's network (--host-network)"
	}
	fmt.Fprintf(stdout, "network: %s\n", net)
	data := "the kernel serves the files below each root (bind mounts)"
	if rf.run.Strict {
		data = "every file operation through rootfs's daemon (--strict)"
	}
	fmt.Fprintf(stdout, "data path: %s\n", data)
	return w.Flush()
}

// setByFlag says whether --setenv gave K.
func (rf *runFlags) setByFlag(k string) bool {
	for _, kv := range rf.run.SetEnv {
		if name, _, _ := strings.Cut(kv, "="); name == k {
			return true
		}
	}
	return false
}

func covers(binds []mountmgr.Bind, p string) bool {
	for _, b := range binds {
		if p == b.Dest || strings.HasPrefix(p, b.Dest+"/") {
			return true
		}
	}
	return false
}

func underRuntimeDir(p string) bool {
	for _, d := range mountmgr.DefaultRuntimeDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// files counts the files (all but directories) at or under p without
// following symlinks, up to countLimit.
func files(p string) string {
	fi, err := os.Lstat(p)
	if err != nil {
		return "missing"
	}
	if !fi.IsDir() {
		return "1 file"
	}
	n := 0
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		if n >= countLimit {
			return filepath.SkipAll
		}
		return nil
	})
	if n >= countLimit {
		return fmt.Sprintf("%d+ files", countLimit)
	}
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}
