// Package mountmgr owns the processes and mounts of `rootfs run`: the
// namespace daemon, the sandbox init, the wrapped server's launch, reaping
// and signals, and the private directory the view is mounted on (the view
// mounts itself: vfs.View.Mount). It knows nothing of MCP, and does not
// import the view: the roots, tables and placeholders it reads are package
// rootset's, and RootBinds lays its binds over a [View] (an interface the
// CLI satisfies with the real view), so the sandbox's init stage links no
// FUSE.
//
// # Processes and the stage protocol
//
// rootfs re-executes /proc/self/exe into hidden stages selected by the
// ROOTFS_STAGE environment variable, which MaybeRunStage (the first call in
// main) reads and removes. The spec travels to P2 as JSON over a pipe
// whose fd is named in the environment, and P2 answers with exactly one
// line on a second pipe (runc's init pipe, libcontainer/sync.go):
//
//	P0 rootfs run                  RunDaemon: clone(NEWNS [+NEWUSER, uid/gid -> 0]),
//	 |                             Pdeathsig=KILL, relays INT/TERM/HUP/QUIT, returns P1's status
//	 |  ROOTFS_STAGE=daemon, same argv, same cwd and env, stdio inherited
//	 v
//	P1 rootfs (namespace daemon)   MaybeRunStage: / -> MS_REC|MS_SLAVE, not dumpable,
//	 |                             RLIMIT_CORE 0, fds >= 3 CLOEXEC; then main runs again:
//	 |                             PrivateMountDir, mount the view there, bridge on stdio,
//	 |                             StartServer(spec)
//	 |  clone(NEWNS|NEWPID|NEWIPC|NEWUTS [+NEWNET: Spec.Net or NoNetwork]), setsid, Pdeathsig=KILL,
//	 |  cwd "/", binary /proc/self/exe (never on the mount: go-fuse's exec deadlock)
//	 |  env ROOTFS_STAGE=init ROOTFS_SPEC_FD=3 ROOTFS_SYNC_FD=4 [ROOTFS_NET_FD=5: Spec.Net,
//	 |  P2 sends its TUN device and localhost listeners back over it, net_linux.go]
//	 |  fd 0/1: pipes to P1 (Server.Stdin/Stdout), fd 2: P1's stderr
//	 |
//	 |   P1 ---- spec JSON (fd 3) ---------------------------------> P2
//	 |   P1 <--- one stageReport: ok | exec 126/127 | error (fd 4) -- P2  (stagesync_linux.go)
//	 v
//	P2 rootfs init (PID 1)         / -> MS_REC|MS_SLAVE; rbind NewRoot on itself (+nosuid,nodev,
//	 |                             also on its submounts); ro binds of /usr /bin /sbin /lib*
//	 |                             (as on the host; every bind of a host path made private);
//	 |                             /etc tmpfs with DefaultEtcFiles, then ro;
//	 |                             /dev tmpfs (null zero full random urandom, fd links, shm);
//	 |                             fresh /proc (hidepid=invisible, runc masks, ro /proc/sys...);
//	 |                             /tmp tmpfs (size cap); extra binds; pivot_root(".", ".") +
//	 |                             umount2(".", MNT_DETACH); setgroups/setresgid/setresuid(0);
//	 |                             secure bits locked, bounding/ambient/all caps empty; not
//	 |                             dumpable; fds >= 3 CLOEXEC; no_new_privs; Landlock (scopes:
//	 |                             abstract unix sockets, signals; unix sockets in the roots,
//	 |                             landlock_linux.go); seccomp (TSYNC)
//	 |  fork+exec from the same locked thread, setsid, Pdeathsig=KILL
//	 v
//	P3 the wrapped server          inherits the filter, the empty capability sets and
//	                               no_new_privs; only fds 0-2; env = Spec.Env only
//
// P2 stays PID 1: it forwards INT, TERM, HUP, QUIT, USR1 and USR2 to the
// server, reaps every zombie, and exits with the server's status (128+n for
// signal n); its exit kills the rest of the PID namespace. Each parent sets
// a death signal on its child from a goroutine locked to the forking thread
// (Pdeathsig follows the thread), so SIGKILL of P0 tears everything down,
// and since the view is mounted only in P1's namespace no mount is ever
// left on the host.
//
// # Mount propagation
//
// P1's tree is a slave of the host's: a mount or unmount the host makes
// later (below a root, say) propagates into P1, where the view resolves
// beneath the roots' descriptors and so shows it, but nothing propagates
// from P1 to the host, and P1's own mounts (PrivateMountDir, the view) are
// private. This only works where the host's mounts are shared (systemd
// makes / shared; many containers keep everything private). Without root
// the kernel already turned the copies of shared host mounts into slaves
// when it created the less privileged namespace. One consequence: while P1
// pins a root on a mount whose parent is shared, a plain umount of that
// mount on the host is EBUSY (propagate_mount_busy counts P1's copy);
// umount -l detaches both.
//
// P2 starts from copies of P1's mounts, which are slaves of the host's too.
// It marks / a slave (its own mounts never propagate out) and makes every
// bind of a host path (runtime directories, /etc files, device nodes,
// --bind/--ro-bind) private right after mounting it: a host mount below
// one of them would otherwise appear in the sandbox, and without the
// bind's ro,nosuid,nodev. The view's rbind keeps what P1 gave it, so
// mounts below a root reach the sandbox only through the view, or through
// a root's bind.
//
// # The kernel data path (rootbinds_linux.go)
//
// By default P1 makes its view mount shared (a new peer group; P1's / stays
// a slave, so nothing reaches the host) before StartServer, so P2's copy,
// made a slave by its MS_REC|MS_SLAVE, receives what P1 mounts on the view
// later; nothing P2 mounts comes back. RootBinds then lays, after every
// swap and under the lock that serialises swaps, a bind of each entry's
// pinned descriptor over the entry (open_tree(OPEN_TREE_CLONE|
// AT_RECURSIVE), mount_setattr nosuid,nodev[,rdonly] on the detached tree,
// move_mount onto the entry resolved through P1's own view), checks that
// the entry shows the pinned inode, and follows P1's mount table to lay
// again a bind the kernel dropped. The clone of a slave mount is a slave
// of the same master, so host mounts and unmounts below a root keep
// reaching the sandbox. Removal needs nothing here: the view's
// FUSE_NOTIFY_DELETE detaches the bind everywhere. docs/kernel-data-path.md
// has the kernel facts and their tests.
//
// # Host layout (tmproots_linux.go)
//
// With Spec.HostLayout the view shows roots at their host paths and
// provides every bind's mount point itself, at the bind's destination
// below its synthetic directories (Placeholders; none inside a static
// root, which the sandbox mounts through), so P2 makes no tmpfs scaffold
// that would hide the roots. The sandbox's /tmp stays its own tmpfs; for
// each first component X of the roots below /tmp, a recursive clone of the
// view's tmp/X is mounted on /tmp/X as a slave of the view: P2 mounts those
// of the static roots (Spec.TmpRoots) before the server starts, RootBinds
// the later ones after each swap, from a thread that joined the sandbox's
// mount namespace (Attach). Roots below one X change in one step with the
// view; a new X is one mount more.
//
// # Identity
//
// As real root the server stays uid 0 with every capability set empty
// (securebits NOROOT locked, so exec gives nothing back); it cannot read
// what is not in its mount namespace. Without root, P1 is the user
// namespace's root mapped to the invoking user, and so is the server, again
// with no capabilities: on the host it acts as the invoking user.
//
// # Errors
//
// Setup failures are one line wrapping ErrSetup; an unusable host gives
// ErrUnsupported with the fix (Preflight lists all findings, for `rootfs
// doctor`); bad specs ErrBadSpec; a command that cannot run
// ErrCommandNotExecutable (126) or ErrCommandNotFound (127), from
// ResolveCommand or ResolveAutoBind on the host (a *MissingError names the
// missing interpreter, symlink target or ELF loader) or as *ExecError from
// StartServer, whose message P2 builds with DiagnoseExec inside the sandbox
// when exec says ENOENT. Nothing is ever run unconfined: any failing step
// aborts P2 before the exec.
//
// # What the command needs
//
// ResolveAutoBind (autobind.go) follows COMMAND on the host through its
// symlinks, "#!" interpreters ("env NAME" through the server's PATH), ELF
// loader and RPATH/RUNPATH libraries, and returns read-only binds at the
// same paths, each with its reason. It binds what is needed, never what is
// near: of an installation prefix only the subtrees its interpreter reads
// (autobind.go lists the rules), a node script's package, the directories
// a .pth file names; a guard refuses /, the home directory or above, and a
// directory holding credentials. Symlinks are shown as symlinks
// (Bind.Symlink). Launcher caches are Bind.Overlay: the host directory is
// the read-only lower layer of an overlay, so a launcher may write (npx
// locks and records its installs) and a server may keep its data beside
// its code (server-memory) while nothing reaches the cache that the user
// runs unsandboxed. The upper layer is kept per server below the user's
// state directory (Bind.Layer, layer.go: made and locked by PrepareLayers
// in P1, opened by P2 refusing symlinks and given to overlayfs as
// /proc/self/fd/N), or, without one, lies in the sandbox's /tmp and
// vanishes with it; either way a line on stderr says which. ResolveShim (shim.go) asks a version manager which
// executable its shim runs.
//
// # Limits
//
// Capabilities, no_new_privs and Landlock are per thread; P2 drops them on
// the thread that forks the server (other P2 threads are emptied too where
// the runtime allows AllThreadsSyscall, i.e. in non-cgo builds); seccomp is
// synchronised to all threads. Without Landlock ABI 6 (Linux 6.12) and
// without a network namespace of its own (NoNetwork or Net), host
// abstract unix sockets stay reachable (Preflight warns). Without ABI 2 (Linux 5.19) the server may make socket files in
// its roots, and without ABI 9 (Linux 7.1) connect to host sockets there on
// the kernel data path (StartServer says so); in a root below /tmp it may
// always make them, as the rule for the private /tmp covers what is
// mounted below it.
package mountmgr
