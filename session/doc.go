// Package session is what the daemon of "rootfs run" (P1, see mountmgr) assembles for one
// wrapped server, and the policy that decides it: which roots the session starts with, where
// COMMAND is, what the server can write, where it starts. The command line parses flags into
// Options and maps the errors to exit codes; everything between is here, so that another
// front end (a test, a future command) starts the same session.
//
//	Options ─▶ Resolve ─▶ Plan: roots at start, COMMAND, the sandbox's spec
//	                        │
//	Start:  view ─▶ FUSE mount ─▶ kernel data path ─▶ [session services] ─▶ server ─▶ bridge
//	Wait:   bridge runs ─▶ server stopped (grace, SIGTERM, SIGKILL) ─▶ all of it released
//
// # Where later planes plug in
//
// The sandbox's spec is built in one place (Plan.buildSpec): a plane that changes what the
// server is given (its network, say) adds its part there, so that --dry-run shows it too.
// Whatever runs beside the server for the length of the session starts in Start between the
// mount and the server, where the kernel data path starts, and registers its stop with the
// session's release list, which Wait (or a Start that fails) runs in reverse order.
//
// # Errors
//
// Start and Check return errors for the caller to map: ErrUsage for options that cannot work,
// errors wrapping mountmgr.ErrCommandNotFound or mountmgr.ErrCommandNotExecutable, a
// *mountmgr.ExecError when the sandbox could not exec COMMAND, a *MountError when the view's
// FUSE mount failed, anything else for a failure of the machine. Every message is one line
// that names the fix, as the client is shown it.
//
// # Processes
//
// Check and Resolve run anywhere (P0 calls them to refuse early and for --dry-run). Start and
// Wait run in the daemon's private mount namespace, where the view's mount lives; Start
// catches SIGINT, SIGTERM, SIGHUP and SIGQUIT, which Wait passes on to the server.
package session
