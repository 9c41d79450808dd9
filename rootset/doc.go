// Package rootset is what a set of roots becomes before anything serves
// it: a [Root] as it arrives (from an MCP client, a roots file or a flag),
// parsed by [ParseRoot] and decoded by [DecodeRoots], then resolved once
// into an immutable [Table] of [Entry] values by [BuildTable], under the
// rules of [TableOptions]: reserved names, --allow, the layout, and the
// session's [WriteSet]. The view (package vfs) serves a table, the bridge
// (package mcpbridge) hands it roots and answers the server's roots/list
// from it, and the sandbox (package mountmgr) lays a bind over each entry
// and asks for its [Placeholder] names; all of them import this package,
// which needs no FUSE, no MCP and no process of its own, so the bridge and
// the sandbox's init stage link none of the view.
//
// Each entry holds an O_PATH descriptor of its root, pinned when the table
// was built ([Entry.FD], [Entry.Ident]); whoever serves the entry starts
// from that descriptor, never from the host path again. A table is never
// changed once built: replace it as a whole, and close the one replaced.
//
// # Resolution
//
// A root's own path is resolved once, when its table is built, and never
// through what the sandboxed side could have planted. [TableOptions].Written
// (a [WriteSet]) records every directory served writable in the session:
// the writable roots of every table, including the other roots of the table
// being built, and read-write binds; each is pinned, and the set is bounded
// ([DefaultWriteLimit]; past it a new writable root is refused rather than
// recorded). A path without symlinks is opened with RESOLVE_NO_SYMLINKS; any
// other is walked one component at a time with O_NOFOLLOW, and a symlink is
// followed only when the directory holding it lies outside every recorded
// directory (by identity, walking ".."). So a host layout such as
// /home -> /data/home keeps working, while /ws/app swapped by the server for
// a link to /etc is refused ([ErrWritableSymlink]), also after /ws has left
// the roots. The --allow directories ([TableOptions].Allow) are resolved
// the same way for every table; one reached through such a link is dropped
// and the restriction stays on. Inside a recorded tree only real
// directories are crossed, so a root found there lies inside that tree: a
// directory the server renamed into place gives it only what it was given
// earlier in the session. The record lasts as long as the process; a link
// planted in an earlier session looks like one the person made (--allow
// bounds what any root may be).
//
// A root may be a directory or a single regular file; roots on kernel file
// systems (proc, sys, cgroup, ...), and paths through their symlinks, are
// refused ([ErrBadRoot]).
//
// # Layouts
//
// In flat layout (the zero [Layout]) each entry is a top-level name, the
// last element of its resolved path made unique. In host layout
// ([LayoutHost], rootfs run's default) each entry is at its lexical path
// (the client's URI path, cleaned; symlinks are not resolved in it, so the
// path is the one the client names), below directories the view makes up.
// The table decides placement once ([Entry].ViewPath): a root at, above or
// below a reserved path (TableOptions.Reserved: in host layout paths such
// as "usr" or "home/me/.nvm/v20", the sandbox's own mount points) keeps its
// flat name ([Entry].Displaced), except below TableOptions.Beneath ("tmp");
// a root inside another directory root is reached through it
// ([Entry].Covered) and is not an entry of the view; two paths to one
// directory are two entries. [Entry].ViewURI is then the client's own URI.
package rootset
