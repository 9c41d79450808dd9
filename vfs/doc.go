// Package vfs turns a list of roots into the view rootfs serves: a FUSE file
// system whose entries are exactly the current roots, each a contained
// read-write passthrough to one host directory or file, at /<name> (flat
// layout) or at the root's own path (host layout, see Layouts).
//
// Roots and the immutable tables they are resolved into are package
// rootset's ([rootset.DecodeRoots], [rootset.BuildTable]), which needs no
// FUSE; this package is the view that serves them. A [View] serves the
// current table and is changed only by [View.Install], which builds the
// table under the view's own rules (Options.TableOptions, the view's own
// names added to Reserved), refuses one that would hold the view's own
// mount ([View.Mount]), and swaps it in. The view mounts itself. The
// go-fuse adapter is the _linux.go files: the View in view_linux.go, the
// swap Install does in swap_linux.go, the synthetic directories in
// view_top_linux.go, a node's operations in view_node_linux.go,
// view_file_linux.go and view_xattr_linux.go, and containment in
// contain_linux.go; the path helpers they share, which need no FUSE, are
// in viewpaths.go. Everything below an entry is reached
// through descriptors, never through host path strings.
//
// # Containment
//
// Every directory below an entry holds an O_PATH descriptor of its own host
// inode (the libfuse passthrough_hp / virtiofsd design); a file found by
// lookup holds its identity (device, inode) and is pinned for each
// operation by openat(parent, name, O_PATH|O_NOFOLLOW) and an identity
// check (ESTALE on a mismatch). A lookup is fstatat(parent, name,
// AT_SYMLINK_NOFOLLOW), plus openat(..., O_PATH|O_NOFOLLOW|O_DIRECTORY) for
// a directory; every other operation works on a pinned descriptor ("*at"
// calls with one name and no following, AT_EMPTY_PATH, or a reopen of
// /proc/self/fd/N, which names the inode and not a path). The
// view therefore never follows a symlink on the host side: a host process
// that swaps a directory of a root for a symlink to "/" makes lookups of that
// name return the symlink, whose target the kernel then resolves inside the
// caller's own view. Nested roots are independent: each entry has its own
// node identities (go-fuse StableAttr.Gen is the root's incarnation), so a
// change through one entry cannot redirect another.
//
// A root's own path is resolved once, when its table is built, and never
// through what the sandboxed side could have planted: a symlink in a
// directory served writable in the session ([rootset.WriteSet]) is not
// followed (see "Resolution" in package rootset).
//
// A root may be a directory or a single regular file; roots on kernel file
// systems (proc, sys, cgroup, ...) are refused when the table is built, and
// a lookup that would cross from a root into one of them is EACCES. The
// daemon never opens anything but regular files and directories (a FIFO
// met by create is opened non-blocking and refused), and device nodes cannot
// be created through the view.
//
// The synthetic top level is read-only (EPERM for every change) and lists the
// entries in table order followed by the placeholders of [Options]. Entries
// whose name is reserved by a placeholder or by go-fuse
// (".go-fuse-epoll-hack") are hidden and logged; [View.Install] names
// entries around them (rootset.TableOptions.Reserved).
//
// Files, directories, symlinks and nodes created through the view are
// chowned to the calling uid/gid (the parent's gid when the parent directory
// is set-group-ID), not left to the daemon. Extended attributes can be read
// in every namespace but set or removed only in "user." (others: EPERM), so a
// sandboxed process cannot plant file capabilities or trusted labels; the
// one exception is removing security.capability from a regular file (see
// Set-ID bits and file capabilities).
//
// # Layouts
//
// The table places each root ([rootset.Entry].ViewPath; see "Layouts" in
// package rootset): in flat layout (the zero [rootset.Layout]) at a
// top-level name, in host layout ([rootset.LayoutHost], rootfs run's
// default) at its lexical path, or under its flat name when it is
// displaced by a reserved path. In host layout the view's synthetic part
// is a tree: the top level and every directory above an entry (rootDir
// with a path), each listing only the names that lead to an entry or a
// placeholder, read-only (EPERM), mode 0555, owned by root. The snapshot
// holds the tree (dirs), so an install swaps names and directories in one
// step, and invalidates removed and new names and the changed directories
// at every depth. A root inside another directory root is reached through
// it ([rootset.Entry].Covered) and is not an entry of the view.
//
// # Errors
//
// The node methods work with Go errors; one function (toErrno) turns them
// into the errno the kernel sees. Links and renames across roots are EXDEV;
// any change at the top level is EPERM. syscall.Errno values pass unchanged,
// [ErrRevoked] becomes EIO, context.Canceled becomes EINTR, and anything
// unrecognised is logged and becomes EIO. With [Options].ReadOnly every
// mutating operation, and every open for writing or truncation, is EROFS,
// and locks stay inside the view (see Locks).
//
// # Swapping and revocation
//
// [View.Install] swaps in the new table in one atomic step. An entry whose name
// and host inode are unchanged keeps its nodes: readers of surviving roots
// never see an error. Every other old entry is revoked before Install returns:
// its nodes and open handles answer EIO to every operation except close
// (BSD revoke(2) semantics), the kernel's page cache for its known inodes is
// dropped, and its top-level dentry is removed with FUSE_NOTIFY_DELETE, so no
// new lookup can reach it. Names that are new drop any cached negative
// dentry. Install must not be called from inside a FUSE request handler of this
// view (the kernel notification would deadlock), and a View can be mounted
// once.
//
// Each directory node (and each entry, and each file the view created)
// holds one O_PATH descriptor while the kernel remembers it; the
// descriptor is closed by a runtime cleanup once go-fuse has forgotten the
// node, so a descriptor number is never closed (and reused) under a node
// that an operation could still reach. Files found by lookup hold none, so
// the daemon needs a descriptor per cached directory, not per cached file.
//
// When the daemon runs out of descriptors (EMFILE, ENFILE) during a lookup,
// pin, open or opendir, it asks the kernel to forget the inodes nobody uses
// (FUSE_NOTIFY_PRUNE, Linux 6.16+; sent from its own goroutine, never from
// the handler), lets the runtime close their descriptors and retries, so a
// walk over more files than RLIMIT_NOFILE completes, at the cost of the
// kernel's cache of those inodes (the figures are in BENCHMARKS.md).
//
// Revocation is strict by default: file I/O goes through the daemon, which
// refuses it once the root is gone. [Options].Passthrough turns on FUSE
// passthrough (kernel 6.9+, CAP_SYS_ADMIN in the initial user namespace,
// and a view mounted with [View.Mount]):
// reads and writes then bypass the daemon at near-native speed, and a file
// opened before its root was removed keeps reading and writing until it is
// closed, because the daemon cannot revoke a passthrough handle. Its other
// operations (fstat, fsync, locks) still fail with EIO.
//
// # The kernel data path
//
// With [Options].BoundEntries (rootfs run's default; --strict turns it
// off) each entry is covered by a bind mount of its pinned host directory
// or file, made by mountmgr (kpath.RootBinds) from the descriptor
// pinned when the root was admitted (open_tree(OPEN_TREE_CLONE|
// AT_RECURSIVE), nosuid,nodev and for read-only views rdonly set with
// mount_setattr on the detached tree, then move_mount), and the kernel
// serves everything below it, checked against the caller's own
// credentials; the view decides only which entries exist. The design
// relies on three kernel behaviours (Linux 5.12+, tested in
// internal/linux, see docs/kernel-data-path.md): FUSE_NOTIFY_DELETE of an
// entry detaches every mount on it, in every namespace, before it returns
// (d_invalidate, then detach_mounts); a revalidating LOOKUP answered with
// the same node id keeps the mount, any other answer or any error but
// ENOMEM/EINTR drops it (the entry then falls back to this FUSE path,
// which serves the same root, until mountmgr lays the bind again); and
// flags set with mount_setattr on the detached tree cannot be cleared by
// a process without CAP_SYS_ADMIN over the namespace. The view therefore
// never invalidates a kept entry (an install notifies only removed and new
// names), and answers a kept entry's lookup from memory with the same
// node, never failing (no descriptor is duplicated, so no EMFILE, and a
// file entry's node is never renewed), cached until the next install.
// Revocation is then of names only: a removed root's path is ENOENT as
// soon as Install returns, while descriptors and working directories opened
// before keep working until closed. On a kernel older than 5.12
// (mount_setattr missing) rootfs run says so in one info line and serves
// everything through the daemon, as with --strict.
//
// # Caching
//
// The synthetic directories (the top level, and in host layout those
// leading to the roots: their attributes, their placeholders, their
// listings and, on the kernel data path, the entries' names) change only
// at an install, which invalidates what it changes; the kernel caches them
// for an hour. Without OPENDIR (noopendir_linux.go) the kernel keeps their
// listings as under FOPEN_CACHE_DIR, so listing / again sends nothing
// (TestViewSyntheticListingsCached). A listing the kernel reads in several
// requests while an install drops its cache continues with an uncached
// READDIR at its offset; the offset names the snapshot the listing began
// in (toplist_linux.go), so it never mixes two tables.
//
// Where the daemon may use fanotify filesystem marks (root in the initial
// user namespace; see hostwatch_linux.go), a host watcher reports every
// change made on the roots' file systems by other processes, and the view
// sends exactly the invalidations they need. The kernel then caches names,
// attributes, negative lookups, directory listings (FOPEN_CACHE_DIR) and
// file pages (FOPEN_KEEP_CACHE) for an hour: a warm walk, stat or git
// status sends no request at all, and a host edit still shows at once.
// Changes made through the view are seen at once
// (the kernel updates its own caches; the watcher updates the other nodes
// of the same host inode, such as nested roots); swaps invalidate
// explicitly. Under [Options].Passthrough the kernel writes in the
// writer's context, so the watcher cannot tell the view's writes from a
// host process's by pid: while a file is open for writing through
// passthrough its modification events are not acted on and its replies
// are cached for the short timeout, so a host write to the same file in
// that time shows after at most that timeout (hostwatch_pt_linux.go). What the watcher cannot cover (no permission, a file system
// without file handles or fsid) is cached for [Options].CacheTimeout
// (default [DefaultCacheTimeout], 1s), per reply; [Options].NoHostWatch
// turns the watcher off. Only local file systems are watched (ext4, xfs,
// btrfs, tmpfs, f2fs, bcachefs, overlayfs): a network or FUSE file system
// changes under other machines or daemons, which no mark here reports.
// Mounts and unmounts raise no fanotify event either; the watcher follows
// the daemon's mount table instead (hostwatch_mounts_linux.go) and drops what a
// changed mount point below a root covers within a second. Lookups resolve
// beneath descriptors opened in the daemon's mount namespace, so what the
// view shows below a root is what is mounted there in that namespace (under
// `rootfs run`, a slave of the host's: see mountmgr). A mount on a root's
// own directory is not seen: the entry is the directory pinned when the
// root was admitted. What still stays hidden
// until the hour runs out: a host process writing a file through a shared
// writable mapping (mmap; write(2) is seen). Use NoHostWatch (1s caches)
// for trees changed that way. The watcher's other limits: files are matched to events
// by their directory and name, and by their own handle only when they had
// several links when looked up (indexing every file by handle costs memory
// and time on a cold walk: see BENCHMARKS.md), so a hard link the host creates
// later, and then changes the file through before the view has looked that
// new name up, leaves the old name stale until the hour runs out; a lookup
// answered while a host change was being processed is cached for the short
// timeout only. Close sends FLUSH on a writable view where a lock can
// need it (see Locks): there it carries the lock owner whose POSIX locks
// the close drops. A handle opened read-only on a file never locked
// through the view, and every handle of a read-only view, closes without
// a round trip (FOPEN_NOFLUSH). The first read-only OPEN of a file of up
// to 16 KiB pushes its data into the kernel's page cache
// (FUSE_NOTIFY_STORE, fileHandle.prefill), so its first read sends no READ.
//
// Writes go to the daemon as they are made (write-through) unless
// [Options].Writeback is set (and Passthrough is not). Under the writeback
// cache write(2) fills the page cache and the kernel writes back in blocks
// of up to 1 MiB, so small writes get much faster. It is not the default
// because of what it costs reads: under it every close makes the kernel
// forget st_blocks, so the fstat(2) after the next open is a GETATTR round
// trip, and reading many small files (open, fstat, read, close: what grep
// and cat do, and what an agent does most) is slower than write-through.
// The figures are in BENCHMARKS.md. What the writeback cache changes
// besides:
//   - A file opened write-only is opened read-write by the daemon when it
//     can (the kernel reads to fill partial pages; the data goes to the page
//     cache, not to the caller), and O_APPEND is done by the kernel at its
//     idea of the end of file, so appends are not atomic against host
//     processes appending to the same file.
//   - The kernel trusts its own size and mtime of a cached regular file and
//     ignores the daemon's. When a lookup finds that a host process changed
//     them and nothing has the file open for writing through the view, the
//     view answers with a renewed node (a new node id, so a new kernel
//     inode with the host's size); files already open keep the old inode.
//     While a file is open for writing through the view, a host process's
//     change to its size shows after the last writer closes it.
//   - Write-back errors (ENOSPC, EIO) are reported by fsync(2) and close(2),
//     not by the write(2) that cached the data.
//   - Revocation stays strict: a swap first writes back what the kernel holds
//     dirty for the leaving roots (those writes had succeeded), then revokes
//     and drops their pages and attributes; a later write(2) must refresh
//     the attributes and fails with EIO, and pages dirtied in the window
//     between the two passes are refused (EIO from fsync or close), never
//     written to the host.
//
// The go-fuse settings: entry, attribute and negative timeouts of an hour
// where the host watcher runs and CacheTimeout elsewhere; READDIRPLUS in the
// kernel's adaptive mode (READDIRPLUS_AUTO); MaxReadAhead left at the
// kernel's value; MaxBackground 64; MaxWrite 1 MiB. Why, with what was
// measured (and what was tried and dropped): BENCHMARKS.md, "Notes behind
// the view's settings".
//
// Directories are opened without OPENDIR (FUSE_NO_OPENDIR_SUPPORT,
// noopendir_linux.go): a warm walk sends no request per directory. Files
// keep OPEN and RELEASE (FUSE_NO_OPEN_SUPPORT is not used: RELEASE is where
// lock owners and unlinked open files are let go), and on a writable view
// a close sends FLUSH where a lock can need it (see Locks).
//
// # Set-ID bits and file capabilities
//
// The daemon is root and holds CAP_FSETID; the callers it acts for (the
// wrapped server) hold no capability. On a native file system every change
// to a regular file's data or size by a caller without CAP_FSETID clears
// S_ISUID, clears S_ISGID when the file is group-executable, and removes
// security.capability (the last whoever the caller). With
// CAP_HANDLE_KILLPRIV_V2 (negotiated: without it every write costs a
// GETXATTR round trip) the kernel leaves that to the daemon, so the view
// does it before each change it makes: write and writev (and splice, which
// the kernel turns into writes), the writeback cache's write-back (also of
// pages dirtied through a shared mapping), fallocate in every mode the
// kernel passes on (allocation, FALLOC_FL_KEEP_SIZE, PUNCH_HOLE,
// ZERO_RANGE), copy_file_range into the file, truncate and ftruncate,
// O_TRUNC (which the kernel sends as a truncation) and create over an
// existing file. It does so for every caller: the kernel marks some of these
// requests when the caller lacks CAP_FSETID (FUSE_WRITE_KILL_SUIDGID,
// FATTR_KILL_SUIDGID, FUSE_OPEN_KILL_SUIDGID), but marks no fallocate or
// copy_file_range and never says that a caller holds it. So `rootfs mount`
// used by root clears the bits too where a native file system would keep
// them for root; root re-sets them with chmod(2) afterwards (install(1) and
// package managers write first and chmod last anyway). The kernel itself
// asks the daemon to remove security.capability before a write
// (cap_inode_killpriv), and the view allows exactly that removal; a
// removexattr(2) of it reaches the daemon only from a caller the kernel
// found holding CAP_SETFCAP. Setting any "security." attribute, and
// chmod(2) to a set-ID mode by the sandboxed server (seccomp), stay refused.
//
// Passthrough reads and writes never reach the daemon: the kernel does them
// on the backing file with the credentials recorded when the daemon
// registered it (fs/fuse/backing.c). [View.Mount] registers backing files
// on a thread whose effective capabilities are lowered to CAP_SYS_ADMIN,
// which the registration demands; the kernel then clears the bits on
// passthrough writes as it would for the caller, also on a file made
// set-ID on the host while a passthrough handle was open. A file that is
// set-ID or carries a capability when opened gets no passthrough handle
// (a write through a shared mapping clears nothing natively; the daemon
// clears on every write it serves). The backing credentials keep the
// daemon's uids (uid 0): on ext4 they may use the blocks reserved for root,
// as the daemon's own writes do.
//
// # Locks
//
// On a writable view, flock and record locks are forwarded to the host,
// so locks taken inside and by host processes exclude each other. flock
// is taken on the handle's own host descriptor (per open file
// description, as natively). Record locks are keyed by the kernel's lock
// owner: the daemon keeps one host open file description per (file, lock
// owner) and takes the owner's locks on it as OFD locks, so POSIX locks
// are per process (two descriptors of one process, such as two SQLite
// connections, share them; a forked child does not), go when the process
// closes any descriptor of the file (a close sends FLUSH with the owner
// unless the handle is read-only and was opened before the file's first
// lock; then its RELEASE drops the opener's locks, just after the close:
// locks_linux.go), and F_GETLK names the holder's pid.
// A waiting lock is polled so an interrupted waiter returns at once; OFD
// locks have no deadlock detection, so EDEADLK is never reported. See
// locks_linux.go for the details and limits. On a view with [Options].ReadOnly they are
// not: the view does not negotiate lock forwarding (FUSE_POSIX_LOCKS,
// FUSE_FLOCK_LOCKS), so the kernel keeps flock, POSIX and OFD locks itself,
// on the view's own inodes. They exclude each other among the processes
// using the view, with the kernel's own semantics (POSIX locks per
// process, released on any close), and never reach the host: a sandboxed
// process cannot block a host process by locking a file it may only read.
// The price is the other direction: a host process's lock is not seen
// inside, so a reader inside can read a file (a SQLite database) while a
// host process is in the middle of changing it. SQLite readers, git and
// other tools that only read work as on a native read-only mount.
//
// # Deadlocks
//
// Never access the mount from the process that serves it (see go-fuse's
// package documentation): tests serve in one process and access from
// another. Never mount the view inside one of its roots.
package vfs
