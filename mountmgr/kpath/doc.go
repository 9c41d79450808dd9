// Package kpath is the kernel data path of `rootfs run`: in P1, the
// namespace daemon, RootBinds lays a bind of each root's pinned
// descriptor over its entry in the mounted view, and shows the roots
// below /tmp in the sandbox's own /tmp (host layout). It takes the view
// as an interface (View, which vfs.View satisfies), so it links no FUSE;
// it knows nothing of MCP, the sandbox's processes or command resolution.
// The sandbox's init uses CloneTmpRoot and AttachTmpRoot for the roots
// below /tmp it shows before the server starts.
//
// # Binds over the view (rootbinds_linux.go)
//
// By default P1 makes its view mount shared (a new peer group; P1's / stays
// a slave, so nothing reaches the host) before mountmgr.StartServer, so
// P2's copy, made a slave by its MS_REC|MS_SLAVE, receives what P1 mounts
// on the view later; nothing P2 mounts comes back. RootBinds then lays,
// after every swap and under the lock that serialises swaps, a bind of
// each entry's pinned descriptor over the entry (open_tree(OPEN_TREE_CLONE|
// AT_RECURSIVE), mount_setattr nosuid,nodev[,rdonly] on the detached tree,
// move_mount onto the entry resolved through P1's own view), checks that
// the entry shows the pinned inode, and follows P1's mount table to lay
// again a bind the kernel dropped. The clone of a slave mount is a slave
// of the same master, so host mounts and unmounts below a root keep
// reaching the sandbox. Removal needs nothing here: the view's
// FUSE_NOTIFY_DELETE detaches the bind everywhere. docs/kernel-data-path.md
// has the kernel facts and their tests.
//
// # Roots below /tmp (tmproots_linux.go)
//
// With mountmgr.Spec.HostLayout the view shows roots at their host paths
// and provides every bind's mount point itself. The sandbox's /tmp stays
// its own tmpfs; for each first component X of the roots below /tmp, a
// recursive clone of the view's tmp/X is mounted on /tmp/X as a slave of
// the view: P2 mounts those of the static roots (Spec.TmpRoots, steps of
// its mount plan) before the server starts, RootBinds the later ones after
// each swap, from a thread that joined the sandbox's mount namespace
// (Attach). Roots below one X change in one step with the view; a new X
// is one mount more.
package kpath
