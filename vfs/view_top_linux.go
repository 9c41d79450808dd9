//go:build linux

package vfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// rootDir is the synthetic top level: the entries of the current snapshot,
// then the placeholders. It is read-only; every change is EPERM.
type rootDir struct {
	fs.Inode
	v *View
}

var (
	_ = (fs.NodeOnAdder)((*rootDir)(nil))
	_ = (fs.NodeGetattrer)((*rootDir)(nil))
	_ = (fs.NodeLookuper)((*rootDir)(nil))
	_ = (fs.NodeReaddirer)((*rootDir)(nil))
	_ = (fs.NodeStatfser)((*rootDir)(nil))
	_ = (fs.NodeSetattrer)((*rootDir)(nil))
	_ = (fs.NodeMkdirer)((*rootDir)(nil))
	_ = (fs.NodeMknoder)((*rootDir)(nil))
	_ = (fs.NodeCreater)((*rootDir)(nil))
	_ = (fs.NodeSymlinker)((*rootDir)(nil))
	_ = (fs.NodeLinker)((*rootDir)(nil))
	_ = (fs.NodeUnlinker)((*rootDir)(nil))
	_ = (fs.NodeRmdirer)((*rootDir)(nil))
	_ = (fs.NodeRenamer)((*rootDir)(nil))
	_ = (fs.NodeSetxattrer)((*rootDir)(nil))
	_ = (fs.NodeRemovexattrer)((*rootDir)(nil))
	_ = (fs.NodeGetxattrer)((*rootDir)(nil))
	_ = (fs.NodeListxattrer)((*rootDir)(nil))
)

// topTimeout is how long the kernel may cache what only an install changes:
// the top level's attributes, the placeholders, and (with
// Options.BoundEntries) the entries' names. Install invalidates each of them
// when it changes, so the length only bounds how long an unused dentry
// stays cached.
const topTimeout = watchedCacheTimeout

// OnAdd builds the placeholders as persistent children.
func (r *rootDir) OnAdd(ctx context.Context) {
	r.v.mounted.Store(true)
	for _, p := range r.v.opts.Placeholders {
		if i, ok := r.v.placeholders[p.Name]; !ok || r.v.opts.Placeholders[i] != p {
			continue
		}
		var ch *fs.Inode
		if p.Symlink != "" {
			ch = r.NewPersistentInode(ctx, &placeholderLink{target: p.Symlink, t: r.v.start}, fs.StableAttr{Mode: syscall.S_IFLNK})
		} else {
			ch = r.NewPersistentInode(ctx, &placeholderDir{t: r.v.start}, fs.StableAttr{Mode: syscall.S_IFDIR})
		}
		r.AddChild(p.Name, ch, true)
	}
}

func setTimes(a *fuse.Attr, t int64) {
	a.Atime, a.Mtime, a.Ctime = uint64(t), uint64(t), uint64(t)
}

func (r *rootDir) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o755
	s := r.v.cur.Load()
	out.Nlink = uint32(2 + len(s.order) + len(r.v.placeholders))
	setTimes(&out.Attr, r.v.start.Unix())
	out.SetTimeout(topTimeout) // Install sends NotifyContent on the top level
	return 0
}

func (r *rootDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if _, ok := r.v.placeholders[name]; ok {
		ch := r.GetChild(name)
		if ch == nil {
			return nil, syscall.ENOENT
		}
		if ga, ok := ch.Operations().(fs.NodeGetattrer); ok {
			var a fuse.AttrOut
			ga.Getattr(ctx, nil, &a)
			out.Attr = a.Attr
		}
		out.SetEntryTimeout(topTimeout) // placeholders never change
		out.SetAttrTimeout(topTimeout)
		return ch, 0
	}
	ch, err := r.lookupEntry(ctx, name, out)
	if err == nil && r.v.opts.BoundEntries {
		// Only an install changes which node a name is, and it invalidates
		// what it changes: fewer revalidations, each one a chance to lose
		// the entry's bind.
		out.SetEntryTimeout(topTimeout)
	}
	return ch, r.v.toErrno("lookup", err)
}

func (r *rootDir) lookupEntry(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, error) {
	v := r.v
	v.closeMu.RLock()
	sl, ok := v.cur.Load().byName[name]
	if ok && v.opts.BoundEntries {
		if old := r.GetChild(name); old != nil {
			if on, same := old.Operations().(*node); same && on.inc == sl.inc {
				// A kept entry, maybe covered by its bind: answer with the
				// same node and never fail, since any other answer makes
				// the kernel invalidate the dentry and detach the bind.
				// No descriptor is duplicated (EMFILE) and the node is not
				// renewed; the attributes come from the pinned descriptor.
				var st syscall.Stat_t
				if syscall.Fstat(sl.entry.FD(), &st) == nil && on.same(&st) {
					out.Attr.FromStat(&st)
					out.Ino = old.StableAttr().Ino
				} else {
					out.Mode = old.StableAttr().Mode | 0o555
				}
				v.closeMu.RUnlock()
				on.cacheTimes(out)
				return old, nil
			}
		}
	}
	var fd int
	var err error
	if ok {
		fd, err = unix.FcntlInt(uintptr(sl.entry.FD()), unix.F_DUPFD_CLOEXEC, 3)
	}
	v.closeMu.RUnlock()
	if !ok {
		return nil, syscall.ENOENT
	}
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	out.Attr.FromStat(&st)
	old := r.GetChild(name)
	on, renew := reusable(old, sl.inc, &st)
	if on != nil {
		unix.Close(fd)
		on.cacheTimes(out)
		return old, nil
	}
	ch, _ := v.newChild(ctx, r.EmbeddedInode(), nil, name, sl.inc, fd, &st, renew, out)
	return ch, nil
}

func (r *rootDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return &topStream{r: r}, 0 // toplist_linux.go
}

// list is the top level now: the current snapshot's entries, then the
// placeholders.
func (r *rootDir) list() []fuse.DirEntry {
	s := r.v.cur.Load()
	list := make([]fuse.DirEntry, 0, len(s.order)+len(r.v.opts.Placeholders))
	for _, name := range s.order {
		inc := s.byName[name].inc
		mode := uint32(syscall.S_IFREG)
		if inc.isDir {
			mode = syscall.S_IFDIR
		}
		list = append(list, fuse.DirEntry{Name: name, Mode: mode, Ino: mixIno(inc.dev, inc.dev, inc.ino)})
	}
	for _, p := range r.v.opts.Placeholders {
		if i, ok := r.v.placeholders[p.Name]; !ok || r.v.opts.Placeholders[i] != p {
			continue
		}
		mode := uint32(syscall.S_IFDIR)
		if p.Symlink != "" {
			mode = syscall.S_IFLNK
		}
		ino := uint64(0)
		if ch := r.GetChild(p.Name); ch != nil {
			ino = ch.StableAttr().Ino
		}
		list = append(list, fuse.DirEntry{Name: p.Name, Mode: mode, Ino: ino})
	}
	return list
}

func (r *rootDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize = 4096
	out.Frsize = 4096
	out.NameLen = 255
	return 0
}

// The top level cannot be changed through the view (security battery D15).

func (r *rootDir) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EPERM
}
func (r *rootDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (r *rootDir) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (r *rootDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EPERM
}
func (r *rootDir) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (r *rootDir) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (r *rootDir) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EPERM }
func (r *rootDir) Rmdir(ctx context.Context, name string) syscall.Errno  { return syscall.EPERM }
func (r *rootDir) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EPERM
}
func (r *rootDir) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EPERM
}
func (r *rootDir) Removexattr(ctx context.Context, attr string) syscall.Errno { return syscall.EPERM }
func (r *rootDir) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENODATA
}
func (r *rootDir) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) { return 0, 0 }

// placeholderDir is an empty read-only directory: a mount point.
type placeholderDir struct {
	fs.Inode
	t interface{ Unix() int64 }
}

var _ = (fs.NodeGetattrer)((*placeholderDir)(nil))
var _ = (fs.NodeReaddirer)((*placeholderDir)(nil))
var _ = (fs.NodeLookuper)((*placeholderDir)(nil))

func (p *placeholderDir) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o555
	out.Nlink = 2
	setTimes(&out.Attr, p.t.Unix())
	out.SetTimeout(topTimeout)
	return 0
}
func (p *placeholderDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ENOENT
}
func (p *placeholderDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return fs.NewListDirStream(nil), 0
}

// placeholderLink is a symlink such as bin -> usr/bin.
type placeholderLink struct {
	fs.Inode
	target string
	t      interface{ Unix() int64 }
}

var _ = (fs.NodeGetattrer)((*placeholderLink)(nil))
var _ = (fs.NodeReadlinker)((*placeholderLink)(nil))

func (p *placeholderLink) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFLNK | 0o777
	out.Nlink = 1
	out.Size = uint64(len(p.target))
	setTimes(&out.Attr, p.t.Unix())
	out.SetTimeout(topTimeout)
	return 0
}
func (p *placeholderLink) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	return []byte(p.target), 0
}
