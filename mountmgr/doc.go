// Package mountmgr is the sandbox of `rootfs run`: the namespace daemon,
// the sandbox init and its mount plan, the wrapped server's launch,
// reaping and signals, preflight, the launcher caches' kept layers, and
// the private directory the view is mounted on (the view mounts itself:
// vfs.View.Mount). It knows nothing of MCP, and does not import the view:
// the roots, tables and placeholders it reads are package rootset's, so
// the sandbox's init stage links no FUSE.
//
// Two jobs live in sub-packages: the kernel data path (mountmgr/kpath:
// the binds laid over the view's entries, over the view as an interface,
// and the roots below /tmp) and command resolution (mountmgr/resolve:
// finding COMMAND, auto-bind, "#!" and ELF
// following, shims). The spec they share is in mountmgr/internal/spec,
// below all three; this package gives its types and errors their public
// names (Spec, Bind, ErrSetup, ...).
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
//	 |  P2 sends its TUN device, the fast path's relay and localhost listeners back over it,
//	 |  net_linux.go] [ROOTFS_AUDIT_FD=N,M: ServerOptions.AuditGroup]
//	 |  [ROOTFS_SECCOMP_FD=N ROOTFS_SECCOMP_NOTIFY=refusals,connect: ServerOptions.SyscallRefused,
//	 |  .Connect with Spec.Net]
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
//	 |                             landlock_linux.go); seccomp (TSYNC; with ROOTFS_SECCOMP_FD, with a
//	 |                             listener sent to P1, which answers its EPERM refusals and
//	 |                             reports them, and carries out its connect(2)s when the
//	 |                             sandbox has its TUN: seccompnotify_linux.go)
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
// # The mount plan (plan_linux.go)
//
// Every mount P2 makes below the new root is one step of a list built
// from the spec before the first one is made (plan), each with a kind
// (opKind: root-rbind, tmp-clone, bind, devbind, tmpfs, proc, dir,
// symlink, overlay, remount-ro, mask-file, mask-dir, ro-self, tmp-attach)
// that apply executes; the order is the list's, and a unit test reads it
// without mounting. Making / a slave, pivot_root and dropping privileges
// come before and after the list.
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
// # The kernel data path (mountmgr/kpath)
//
// By default P1 makes its view mount shared before StartServer, so that
// P2's copy, a slave after its MS_REC|MS_SLAVE, receives the binds
// kpath.RootBinds lays over the view's entries later; nothing P2 mounts
// comes back.
//
// # Host layout
//
// With Spec.HostLayout the view shows roots at their host paths and
// provides every bind's mount point itself, at the bind's destination
// below its synthetic directories (Placeholders; none inside a static
// root, which the sandbox mounts through), so P2 makes no tmpfs scaffold
// that would hide the roots. The sandbox's /tmp stays its own tmpfs: for
// each first component X of Spec.TmpRoots, P2 clones the view's tmp/X
// before its /tmp covers it and mounts the clone on /tmp/X once /tmp is
// there (kpath.CloneTmpRoot, kpath.AttachTmpRoot); the binds below /tmp
// come after those, on the view's mount points. kpath.RootBinds shows the
// later ones.
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
// resolve.Command or resolve.AutoBind on the host (a *resolve.MissingError
// names the missing interpreter, symlink target or ELF loader) or as
// *ExecError from StartServer, whose message P2 builds with
// resolve.DiagnoseExec inside the sandbox when exec says ENOENT. Nothing
// is ever run unconfined: any failing step aborts P2 before the exec.
//
// # What the command needs
//
// resolve.AutoBind finds on the host what COMMAND needs to start and
// returns read-only binds at the same paths, each with its reason; the
// sandbox mounts them. A Bind.Symlink is made as a symlink. A Bind.Overlay
// (a launcher cache) is the read-only lower layer of an overlay whose
// upper layer is kept per server below the user's state directory
// (Bind.Layer, named in internal/spec/layer.go: made and locked by
// PrepareLayers in P1, opened by P2 refusing symlinks and given to
// overlayfs as /proc/self/fd/N), or, without one, lies in the sandbox's
// /tmp and vanishes with it; either way a line on stderr says which.
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
