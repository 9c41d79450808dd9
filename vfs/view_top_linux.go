//go:build linux

package vfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/rootset"
)

// rootDir is a synthetic directory: the top level (path ""), or in host
// layout one of the directories leading to the entries (path
// "home/me/src"). It lists the names in it that lead to entries of the
// current snapshot, then the placeholders. It is read-only; every change
// is EPERM.
type rootDir struct {
	fs.Inode
	v    *View
	path string
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
	if r.path != "" {
		return // only the top level holds persistent children
	}
	r.v.mounted.Store(true)
	for _, p := range r.v.ph.tops {
		r.AddChild(p.Name, r.newPlaceholder(ctx, p), true)
	}
}

// newPlaceholder makes p's node. It is persistent: the kernel may forget
// it, the view keeps it (a mount point's inode stays the same).
func (r *rootDir) newPlaceholder(ctx context.Context, p rootset.Placeholder) *fs.Inode {
	switch {
	case p.Symlink != "":
		return r.NewPersistentInode(ctx, &placeholderLink{target: p.Symlink, t: r.v.start}, fs.StableAttr{Mode: syscall.S_IFLNK})
	case p.File:
		return r.NewPersistentInode(ctx, &placeholderFile{t: r.v.start}, fs.StableAttr{Mode: syscall.S_IFREG})
	}
	// A directory is a synthetic one, empty unless (host layout) roots
	// lie below it (TableOptions.Beneath).
	return r.NewPersistentInode(ctx, &rootDir{v: r.v, path: p.Name}, fs.StableAttr{Mode: syscall.S_IFDIR})
}

func setTimes(a *fuse.Attr, t int64) {
	a.Atime, a.Mtime, a.Ctime = uint64(t), uint64(t), uint64(t)
}

func (r *rootDir) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	// 0555 at every level, "/" included: every change is refused (EPERM)
	// whatever the mode, and the mode says so to whoever looks.
	out.Mode = syscall.S_IFDIR | 0o555
	out.Nlink = uint32(2 + len(r.list()))
	setTimes(&out.Attr, r.v.start.Unix())
	out.SetTimeout(topTimeout) // Install sends NotifyContent on what changes
	return 0
}

func (r *rootDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	key := childKey(r.path, name)
	if p, ok := r.v.ph.at(key); ok {
		ch := r.GetChild(name)
		if ch == nil {
			if r.path == "" {
				return nil, syscall.ENOENT
			}
			ch = r.newPlaceholder(ctx, p)
		}
		r.attrOf(ctx, ch, out)
		out.SetEntryTimeout(topTimeout) // placeholders never change
		out.SetAttrTimeout(topTimeout)
		return ch, 0
	}
	s := r.v.current()
	if _, ok := s.byName[key]; !ok {
		_, dir := s.dirs[key]
		_, phDir := r.v.ph.dirs[key]
		if !dir && !phDir {
			r.auditRefusedName(ctx, key)
			return nil, syscall.ENOENT
		}
		// A synthetic directory: the same node for the same path while
		// the kernel remembers it (go-fuse returns the known inode of a
		// number), so its cached children stay valid.
		ch := r.GetChild(name)
		if d, ok := chOps[*rootDir](ch); !ok || d.path != key {
			ch = r.NewInode(ctx, &rootDir{v: r.v, path: key}, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: synthIno(key)})
		}
		r.attrOf(ctx, ch, out)
		out.SetEntryTimeout(topTimeout) // an install invalidates what it changes
		out.SetAttrTimeout(topTimeout)
		return ch, 0
	}
	ch, err := r.lookupEntry(ctx, name, key, out)
	if err == nil && r.v.opts.BoundEntries {
		// Only an install changes which node a name is, and it invalidates
		// what it changes: fewer revalidations, each one a chance to lose
		// the entry's bind.
		out.SetEntryTimeout(topTimeout)
	}
	return ch, r.v.toErrno("lookup", err)
}

// attrOf fills out with ch's attributes.
func (r *rootDir) attrOf(ctx context.Context, ch *fs.Inode, out *fuse.EntryOut) {
	if ga, ok := ch.Operations().(fs.NodeGetattrer); ok {
		var a fuse.AttrOut
		ga.Getattr(ctx, nil, &a)
		out.Attr = a.Attr
	}
	out.Ino = ch.StableAttr().Ino
}

// chOps returns the operations of ch as a T, if ch is not nil and they are.
func chOps[T any](ch *fs.Inode) (T, bool) {
	var zero T
	if ch == nil {
		return zero, false
	}
	t, ok := ch.Operations().(T)
	return t, ok
}

func (r *rootDir) lookupEntry(ctx context.Context, name, key string, out *fuse.EntryOut) (*fs.Inode, error) {
	v := r.v
	v.sw.closeMu.RLock()
	sl, ok := v.current().byName[key]
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
				v.sw.closeMu.RUnlock()
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
	v.sw.closeMu.RUnlock()
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
	return v.childOf(ctx, r.EmbeddedInode(), nil, name, sl.inc, fd, &st, out), nil
}

func (r *rootDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return &topStream{r: r}, 0 // toplist_linux.go
}

// list is the directory now: the names in it that lead to the current
// snapshot's entries (in table order), then the placeholders.
func (r *rootDir) list() []fuse.DirEntry { return r.listOf(r.v.current()) }

// listOf is the directory in snapshot s.
func (r *rootDir) listOf(s *snapshot) []fuse.DirEntry {
	names := s.dirs[r.path]
	list := make([]fuse.DirEntry, 0, len(names)+len(r.v.ph.dirs[r.path]))
	listed := map[string]bool{}
	for _, name := range names {
		key := childKey(r.path, name)
		listed[name] = true
		if sl, ok := s.byName[key]; ok {
			inc := sl.inc
			mode := uint32(syscall.S_IFREG)
			if inc.isDir {
				mode = syscall.S_IFDIR
			}
			list = append(list, fuse.DirEntry{Name: name, Mode: mode, Ino: mixIno(inc.dev, inc.dev, inc.ino)})
			continue
		}
		list = append(list, fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR, Ino: synthIno(key)})
	}
	add := func(name string) {
		if listed[name] {
			return
		}
		listed[name] = true
		key := childKey(r.path, name)
		if _, ok := r.v.ph.dirs[key]; ok {
			list = append(list, fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR, Ino: synthIno(key)})
			return
		}
		p, ok := r.v.ph.at(key)
		if !ok {
			return
		}
		mode := uint32(syscall.S_IFDIR)
		switch {
		case p.Symlink != "":
			mode = syscall.S_IFLNK
		case p.File:
			mode = syscall.S_IFREG
		}
		ino := uint64(0)
		if ch := r.GetChild(name); ch != nil {
			ino = ch.StableAttr().Ino
		}
		list = append(list, fuse.DirEntry{Name: name, Mode: mode, Ino: ino})
	}
	if r.path == "" {
		for _, p := range r.v.ph.tops {
			add(p.Name)
		}
	}
	for _, name := range r.v.ph.dirs[r.path] {
		add(name)
	}
	return list
}

func (r *rootDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize = 4096
	out.Frsize = 4096
	out.NameLen = 255
	return 0
}

// No synthetic directory can be changed through the view: which roots exist
// is decided by Install alone.

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

// placeholderFile is an empty read-only file: a mount point for a file.
type placeholderFile struct {
	fs.Inode
	t interface{ Unix() int64 }
}

var _ = (fs.NodeGetattrer)((*placeholderFile)(nil))

func (p *placeholderFile) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Nlink = 1
	setTimes(&out.Attr, p.t.Unix())
	out.SetTimeout(topTimeout)
	return 0
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
