//go:build !linux

package vfs

import (
	"errors"
	"slices"

	"github.com/rootfs-dev/rootfs/rootset"
)

var errNotLinux = errors.New("rootfs needs Linux")

// View is the roots view; on this platform it can hold a table but not be
// served (rootfs needs Linux).
type View struct {
	opts Options
	t    *rootset.Table
}

// NewView returns a view serving an empty table.
func NewView(opts Options) *View { return &View{opts: opts, t: rootset.EmptyTable()} }

// reserved returns the top-level names the view uses itself.
func (v *View) reserved() []string {
	out := []string{rootset.EpollHackName}
	for _, p := range v.opts.Placeholders {
		out = append(out, p.Name)
	}
	return out
}

// Table returns the current table.
func (v *View) Table() *rootset.Table { return v.t }

// Entries returns the current table's entries.
func (v *View) Entries() []*rootset.Entry { return v.t.Entries() }

// swap fails: rootfs needs Linux.
func (v *View) swap(t *rootset.Table) error { t.Close(); return errNotLinux }

// Close closes the current table.
func (v *View) Close() error { return v.t.Close() }

// Install fails: rootfs needs Linux.
func (v *View) Install(roots []rootset.Root) (*rootset.Table, error) {
	o := v.opts.TableOptions
	o.Reserved = append(slices.Clip(o.Reserved), v.reserved()...)
	t := rootset.BuildTable(roots, o)
	t.Close()
	return t, errNotLinux
}

// checkMountpoint fails: rootfs needs Linux.
func checkMountpoint(*rootset.Table, string) error { return errNotLinux }
