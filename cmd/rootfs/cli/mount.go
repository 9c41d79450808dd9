package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/audit"
	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/rootset"
	"github.com/rootfs-dev/rootfs/vfs"
)

// MountOptions are the flags of "rootfs mount" beyond the roots.
type MountOptions struct {
	AllowOther bool
	ViewFlags
}

// AddFlags registers the flags on f.
func (o *MountOptions) AddFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.AllowOther, "allow-other", false, "let other users use the mount (the kernel still checks file permissions)")
	o.ViewFlags.AddFlags(f)
	o.addLayoutFlag(f, "flat")
}

// addMountFlags registers the flags of "rootfs mount" on f.
func addMountFlags(f *pflag.FlagSet, ro *RootsOptions, mo *MountOptions) {
	ro.AddFlags(f)
	mo.AddFlags(f)
}

// runMount is "rootfs mount": mount the view of the given roots at
// MOUNTPOINT, serve in the foreground, re-read the roots on SIGHUP, unmount
// and return nil on SIGINT or SIGTERM. An unmount from outside (fusermount3
// -u, umount) is a clean end too, and returns nil; a mount that stops being
// served but stays mounted (its connection aborted) is an error. A nil log
// is built from --log-level.
func runMount(ctx context.Context, args []string, stderr io.Writer, log *zap.Logger) error {
	f := pflag.NewFlagSet("mount", pflag.ContinueOnError)
	var ro RootsOptions
	var mo MountOptions
	addMountFlags(f, &ro, &mo)
	if err := parseFlags(f, args, mountUsage, stderr); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return fmt.Errorf("%w: give exactly one MOUNTPOINT (got %d arguments)", ErrUsage, f.NArg())
	}
	dir := f.Arg(0)
	if _, err := mo.layout(); err != nil {
		return err
	}
	if log == nil {
		l, err := newLogger(ro.LogLevel, stderr)
		if err != nil {
			return err
		}
		log = l
	}
	if len(ro.Roots) == 0 && ro.RootsFile == "" {
		return fmt.Errorf("%w: no roots; give --root PATH or --roots-file FILE", ErrUsage)
	}
	roots, err := ro.StaticRoots()
	if err != nil {
		return err
	}
	// The view holds a descriptor per inode the kernel knows.
	if n, err := linux.RaiseNoFile(); err != nil {
		log.Warn("could not raise the open-file limit", zap.Error(err))
	} else {
		log.Debug("open-file limit", zap.Uint64("nofile", n))
	}
	// Whoever uses the mount can plant symlinks in its writable roots; a
	// root re-read on SIGHUP is never resolved through them.
	written := rootset.NewWriteSet(0)
	defer written.Close()
	vopts := mo.Options(ro.ReadOnly, log)
	vopts.Written = written
	if mo.AuditLog != "" {
		w, err := audit.Open(mo.AuditLog)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		defer w.Close()
		vopts.Audit = audit.New(w, audit.Options{Logger: log})
		defer vopts.Audit.Close() // after the view's Close
	}
	v := vfs.NewView(vopts)
	defer v.Close()
	t, err := v.Install(roots)
	if err != nil {
		return err
	}
	if err := vfs.CheckMountpoint(dir, t, log); err != nil {
		return err
	}

	// Signals are caught before mounting, so none is lost once we say
	// "mounted".
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	if err := fuseProblem(mo.AllowOther); err != nil {
		return err
	}
	m, err := v.Mount(dir, vfs.MountOptions{AllowOther: mo.AllowOther})
	if err != nil {
		return fuseMountError(err, mo.AllowOther)
	}
	defer m.Unmount()
	report(stderr, "rootfs: mounted "+m.Dir(), t)

	served := make(chan struct{})
	go func() { m.Wait(); close(served) }()
	for {
		select {
		case <-ctx.Done():
			log.Info("unmounting", zap.String("mountpoint", m.Dir()))
			return m.Unmount()
		case <-served:
			if m.Mounted() {
				// Deferred Unmount detaches the dead mount.
				return fmt.Errorf("%s stopped being served (its FUSE connection was aborted) and is detached; mount it again", m.Dir())
			}
			log.Info("unmounted from outside; stopping", zap.String("mountpoint", m.Dir()))
			return nil
		case <-hup:
			reload(&ro, v, stderr, log)
		}
	}
}

// reload re-reads the roots and swaps them in; on any problem the current
// view stays and the reason is logged.
func reload(ro *RootsOptions, v *vfs.View, stderr io.Writer, log *zap.Logger) {
	if ro.RootsFile == "" {
		log.Info("sighup: no --roots-file to re-read; keeping the current view")
		return
	}
	roots, err := ro.StaticRoots()
	if err != nil {
		log.Error("sighup: keeping the current view", zap.Error(err))
		return
	}
	t, err := v.Install(roots)
	if errors.Is(err, vfs.ErrBadMountpoint) {
		log.Error("sighup: keeping the current view", zap.Error(err))
		return
	}
	if err != nil {
		log.Error("sighup: swap", zap.Error(err))
		return
	}
	report(stderr, "rootfs: roots re-read from "+ro.RootsFile, t)
}

// report prints a heading, what the table holds and what it left out, one
// line each, in one write.
func report(w io.Writer, heading string, t *rootset.Table) {
	var b strings.Builder
	b.WriteString(heading + "\n")
	for _, e := range t.Entries() {
		fmt.Fprintf(&b, "  %s -> %s\n", strings.TrimPrefix(e.InView(), "/"), e.HostPath)
	}
	if len(t.Entries()) == 0 {
		b.WriteString("  (no roots)\n")
	}
	for _, s := range t.Skipped() {
		fmt.Fprintf(&b, "  left out %s: %v\n", s.Root.URI, s.Reason)
	}
	io.WriteString(w, b.String())
}
