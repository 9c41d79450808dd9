package cli

const runUsage = `rootfs run: wrap a stdio MCP server in a sandbox whose / is its roots

Synopsis:
  rootfs run [flags] -- COMMAND [ARG...]

rootfs speaks MCP to the client on its own stdin/stdout, asks the client for
its roots (roots/list), and starts COMMAND in private namespaces whose / is a
FUSE view holding exactly those roots, plus read-only runtime directories
(/usr, /bin, /lib*, a short list from /etc), a minimal /dev, a fresh /proc and
a private /tmp. COMMAND runs with no capabilities, no_new_privs and a seccomp
filter. Each root is at its own host path (--layout host, the default), below
read-only directories that list only what leads to a root, so COMMAND's own
roots/list is answered with the client's URIs unchanged; a root that is /,
or lies in or holds a directory the sandbox provides itself, is at /NAME
instead (NAME: its last path element), and its URI says so. --layout flat
puts every root at /NAME, and the URIs are file:///NAME. When the client's
roots change, the view changes in one step while COMMAND keeps running.
Static roots (--root, --roots-file; each must exist, or rootfs exits 125)
are in the view before COMMAND starts; client roots arrive after
initialize. The paths COMMAND's own arguments name (server-filesystem
~/proj, --db=~/data/app.db) are roots from the start too and stay when the
client's roots arrive (--no-arg-roots: not); an argument naming /, the home
directory or a credential directory is refused (125) unless given with
--root. With no --root, the directory rootfs was started in is a root from
the start until the client's roots replace it, and stays when the client
declares none; started in / or the home directory, rootfs then refuses
(125) and asks for --root.

What COMMAND needs to start is bound read-only at the same path (unless
--no-auto-bind), never what lies near it: the executable through PATH and
every symlink (a version manager's shim resolved to what it runs), its #!
interpreter (recursively, "env NAME" through the server's PATH), an ELF
file's loader and RPATH/RUNPATH libraries, of an interpreter's
installation prefix only the subtrees it reads (bin, lib*, include, share;
a venv's pyvenv.cfg and its base), the directories .pth files name
(editable installs), a node script's package, and a launcher's cache (npx,
uvx, pipx) as the read-only layer of an overlay: the cache never changes,
and what the server writes there (its data, the launcher's locks) is kept
for its next start in a layer of the command line's own below
~/.local/state/rootfs/overlay (--cache-writes discard: in its /tmp, gone
when it ends). Never
the home directory, / or a directory holding credentials, nor anything
named through a file the server can write (a read-write root's symlinks,
#! lines, pyvenv.cfg, .pth files). --dry-run prints the whole sandbox, each
bind with its reason, and starts nothing. An exec error names what is
missing (interpreter, symlink target, loader) and the flag that fixes it. A COMMAND path inside a
static root ("~/src/app/bin/server" with --root ~/src/app) runs from the
view.

COMMAND has a network namespace of its own whose only way out is rootfs,
which is its DNS resolver and judges every connection, for every program
(no proxy variables): the public internet is allowed, the host's loopback
and own addresses, private ranges, link-local (the cloud metadata address)
and multicast are refused; --allow-net adds (localhost:PORT shows a host
port at the same URL), --net-only allows nothing else, --deny-net takes
away, --no-network leaves loopback only, --host-network shares the host's
network unfiltered. Each refusal is one line on stderr with the flag that
allows it. --audit-log FILE records what COMMAND touched and was refused,
system calls the seccomp filter refused included; "rootfs status" and
"rootfs why" show a running session and its refusals.

Examples:
  rootfs run -- npx -y @modelcontextprotocol/server-filesystem
  rootfs run --git-identity -- ~/.venvs/git/bin/mcp-server-git
  rootfs run --root ~/src/app -- ~/src/app/bin/server
  rootfs run --setenv GITHUB_PERSONAL_ACCESS_TOKEN -- npx -y @modelcontextprotocol/server-github
  rootfs run --root ~/src/app --read-only -- /usr/bin/node server.js ~/src/app
  rootfs run --layout flat --root ~/src/app -- /usr/bin/node /app/server.js /app
  rootfs run --allow ~/src --ro-bind ~/src/tool -- node ./dist/index.js
  rootfs run --allow-net localhost:5432 --audit-log ~/mcp-audit.log -- npx -y some-db-server
  rootfs run --net-only registry.npmjs.org,api.github.com -- npx -y @modelcontextprotocol/server-github

Exit status:
  the server's own status; 125 when rootfs itself fails (one line on stderr
  says why), 126 when COMMAND cannot be executed, 127 when it is not found,
  128+N when the server was killed by signal N. When the server cannot start,
  or ends before answering, the client's initialize (if it comes within 2s)
  gets a JSON-RPC error (-32603) that says why in one line: the stderr line
  with its fix, or the server's status and its last line of stderr. When the client leaves
  (closes rootfs's stdin, or dies), the server gets end of input, then
  SIGTERM and SIGKILL after --grace each; on SIGINT or SIGTERM rootfs also
  passes the signal on. Either way rootfs exits with the server's status:
  what it exits with at end of input, or 128+N for the signal that ended it.

Flags:
`

const mountUsage = `rootfs mount: mount the roots view for a person to inspect

Synopsis:
  rootfs mount [--root PATH|URI]... [--roots-file FILE] [--read-only] MOUNTPOINT

The view's top-level entries are exactly the roots, each at /NAME (its last
path element; --layout host puts each at its own path, as rootfs run does);
below each is the host tree, contained so that no symlink or rename leads
out of it. rootfs prints
what it mounted, serves in the foreground, re-reads --roots-file on SIGHUP
(a bad file keeps the old view), and unmounts on SIGINT or SIGTERM.

Example:
  mkdir -p /tmp/view && rootfs mount --root ~/src/app --root ~/notes.md /tmp/view

Exit status:
  0 after a clean unmount (on SIGINT or SIGTERM, or by fusermount3 -u or
  umount from outside), 1 on error (one line on stderr says why and what to
  do, such as a /dev/fuse this user cannot open, or a mount whose FUSE
  connection was aborted), 2 on a usage error, 125 when a --root or
  --roots-file entry does not exist (as rootfs run).

Flags:
`

const doctorUsage = `rootfs doctor: check this machine for what rootfs needs

Synopsis:
  rootfs doctor

Checks the kernel version, /dev/fuse, fusermount3, namespaces (user, mount,
pid), seccomp and privileges, and prints for each missing piece exactly what to
add. Exits 0 when "rootfs run" can work here, 1 otherwise.

Flags:
`

const wrapUsage = `rootfs wrap: run the stdio servers of your MCP clients under rootfs

Synopsis:
  rootfs wrap [--client NAME]... [--project DIR] [--dry-run] [--rootfs PATH]

Rewrites the MCP configuration of each client whose file exists, for the
project in the current directory and for your user, so that each stdio
server runs under "rootfs run":

  {"command": "npx", "args": ["-y", "pkg"], "env": {"TOKEN": "..."}}
  becomes
  {"command": "rootfs", "args": ["run", "--setenv", "TOKEN", "--", "npx", "-y", "pkg"], "env": {"TOKEN": "..."}}

Each env name becomes --setenv NAME, which passes the value the client sets
on rootfs on into the sandbox. HTTP and SSE servers, and entries that already
run rootfs, are left alone and reported. Comments and layout are kept; only
the command and the front of args change. Before writing a file, rootfs keeps
its old contents outside it, at the file's full path below
~/.local/state/rootfs/backups ($XDG_STATE_HOME/rootfs/backups), where a git
work tree does not list them as untracked files. Wrapping twice changes
nothing; "rootfs unwrap" restores the entries exactly.

The command written depends on who reads the file. Project files, and any
file in a git work tree other than your home directory itself, are checked
out on other machines: they get "rootfs", looked up on PATH (wrap warns when
it is not on yours), and an entry an older wrap gave an absolute path gets
it too. Your own files get this binary's absolute path, because clients
start servers with their own, often minimal, PATH. --rootfs PATH writes PATH
into every file. Quit Claude Code before wrapping ~/.claude.json: it
rewrites that file while it runs.

Files, per --client NAME:
  vscode          .vscode/mcp.json, ~/.config/Code/User/mcp.json
  claude-code     .mcp.json, ~/.claude.json (its own and each project's servers)
  claude-desktop  ~/.config/Claude/claude_desktop_config.json
  cursor          .cursor/mcp.json, ~/.cursor/mcp.json
  gemini          .gemini/settings.json, ~/.gemini/settings.json
  codex           .codex/config.toml, ~/.codex/config.toml ($CODEX_HOME)

Codex gives no roots: a wrapped Codex server sees the directory rootfs starts
in, which is the directory Codex runs in (the project). Claude Desktop may
list no roots: add "--root", "DIR" after "run" for such a server.

Examples:
  rootfs wrap --dry-run              # show what would change
  rootfs wrap --client vscode        # only VS Code's files

Exit status:
  0 when every file found was changed or needed no change, 1 when no file was
  found or one could not be written (one line on stderr says why), 2 on a
  usage error.

Flags:
`

const unwrapUsage = `rootfs unwrap: undo rootfs wrap

Synopsis:
  rootfs unwrap [--client NAME]... [--project DIR] [--dry-run] [--rootfs PATH]

Restores each entry of the form
  rootfs run [--setenv NAME]... -- COMMAND [ARG...]
to COMMAND [ARG...], from the entry alone (no backup needed), in the same
files "rootfs wrap" changes. Entries that run rootfs with other flags
(--root, --read-only, ...) were not written by wrap and are left alone and
reported. The old contents are kept as rootfs wrap keeps them, below
~/.local/state/rootfs/backups.

Exit status:
  as for rootfs wrap.

Flags:
`

const statusUsage = `rootfs status: the rootfs sessions running for you

Synopsis:
  rootfs status [--json] [SESSION...]

Asks each "rootfs run" session of this user, over its socket in your runtime
directory ($XDG_RUNTIME_DIR/rootfs, which only you can enter), for its
command, its client, its roots (host path, path inside, read-only or not),
its data path, network policy, binds (auto-bind's with their reasons) and
counts of operations and refusals since it started. Sessions of other users
are neither listed nor answer.

Flags:
`

const whyUsage = `rootfs why: why a server cannot see a file, or what it was refused

Synopsis:
  rootfs why [--session ID] [--json] [PATH...]

With no PATH, prints each session's last refusals (names looked up outside
the roots, changes refused on read-only roots, client roots refused,
network destinations refused), each with the flag that would allow it.
With PATHs, says for each whether the server sees it and because of what
(a root, a runtime directory, an auto-bind and its reason, a bind), or what
would show it.

Flags:
`
