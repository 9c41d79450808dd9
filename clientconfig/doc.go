// Package clientconfig rewrites MCP clients' configuration files so that each
// stdio server runs under "rootfs run", and restores them. It knows the files
// of VS Code, Claude Code, Claude Desktop, Cursor, Gemini CLI and Codex, and
// nothing of FUSE or of the MCP wire protocol.
//
// # The wrapped shape
//
// A stdio entry {command: CMD, args: [A...], env: {N: ...}} becomes
//
//	{command: ROOTFS, args: ["run", "--setenv", N, ..., "--", CMD, A...], env: {N: ...}}
//
// where ROOTFS is the command the caller chose (Options.Rootfs): rootfs wrap
// gives files others check out (Shared) the bare name "rootfs", and the
// user's own files an absolute path, which a client with a minimal PATH
// still finds. The env block
// stays: the client still sets it on the rootfs process, and each name's
// "--setenv N" passes that value on into the sandbox, whose environment
// otherwise starts nearly empty. Unwrap derives the original entry from this
// shape alone (CMD is the element after "--", A... the rest), so it needs no
// backup and no bookkeeping inside the entry. An entry whose command is
// already rootfs is never wrapped again; if it has the shape above and the
// env block gained a name, wrap adds the missing "--setenv". Entries of
// another shape that run rootfs (with --root, say) are left alone by both.
//
// # Keeping the file as it was
//
// Files are patched, not re-serialised: JSON with comments through
// github.com/tailscale/hujson, whose tree keeps every byte of whitespace and
// comments, and TOML through byte edits at spans located by go-toml's
// parser (github.com/pelletier/go-toml/v2/unstable). Only the command string
// and the front of the args array change; the original command's literal is
// moved into args byte for byte, and the args inserted in front take over
// the first element's leading whitespace. So wrap followed by unwrap gives
// back the original bytes. An entry without "args" gets one, written where
// people seldom put one: in JSON on the command's line, right after it; in
// TOML on the line after the command, with the comment "# added by rootfs
// wrap". Unwrap removes an args array of exactly that form once it is empty
// and keeps any other, so an explicit "args": [] on a line of its own
// survives the round trip; one written right after the command on its line
// (or, in a TOML inline table, which has no room for the comment, right
// after the command) is removed, which means the same to every client.
//
// In TOML, comments on the lines right above the command's line (as
// indented as it, with no blank line between) and at the end of that line
// describe the command, so they move with its literal: wrap gives the
// literal a line of its own in args, after "run ... --", with those
// comment lines before it and the line's comment after it, and unwrap
// moves them back when args has exactly that form. The command's line is
// left with rootfs alone. An inline table has no room for comments; the
// comment after it describes the whole entry and stays.
//
// # Servers left alone
//
// HTTP and SSE servers (a "url", "httpUrl" or "serverUrl", or a "type" other
// than stdio) have no process to wrap and are reported as skipped, as are
// entries without a command and entries whose command or args are not
// strings.
package clientconfig
