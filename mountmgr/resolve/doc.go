// Package resolve is command resolution: it finds COMMAND on the host
// (Command, Shim for a version manager's shim) and what it needs to start
// in the sandbox (AutoBind), and, in the sandbox's init after a failed
// exec, what is missing (DiagnoseExec). It reads files and mounts nothing;
// it knows nothing of the view, the sandbox's processes or the kernel data
// path, and links no FUSE (the sandbox's init imports it).
//
// # What the command needs
//
// AutoBind (autobind.go) follows COMMAND on the host through its
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
// state directory (Bind.Layer, named here; made and locked by
// mountmgr.PrepareLayers in P1, mounted by the sandbox's init), or,
// without one, lies in the sandbox's /tmp and vanishes with it. Shim
// (shim.go) asks a version manager which executable its shim runs.
//
// # Errors
//
// A command that cannot run gives mountmgr.ErrCommandNotExecutable (126)
// or mountmgr.ErrCommandNotFound (127); a *MissingError (127) names the
// missing interpreter, symlink target or ELF loader. The sandbox's init
// builds its exec error's message with DiagnoseExec when exec says ENOENT.
package resolve
