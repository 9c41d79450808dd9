package cli

const runUsage = `rootfs run: wrap a stdio MCP server in a sandbox whose / is its roots

Synopsis:
  rootfs run [flags] -- COMMAND [ARG...]

rootfs speaks MCP to the client on its own stdin/stdout, asks the client for
its roots (roots/list), and starts COMMAND in private namespaces whose / is a
FUSE view holding exactly those roots, plus read-only runtime directories
(/usr, /bin, /lib*, a short list from /etc), a minimal /dev, a fresh /proc and
a private /tmp. COMMAND runs with no capabilities, no_new_privs and a seccomp
filter. When the client's roots change, the view changes in one step while
COMMAND keeps running, and COMMAND's own roots/list is answered with URIs
inside the view (file:///<entry>). Static roots (--root, --roots-file) are in
the view before COMMAND starts; client roots arrive after initialize. With
no --root and a client that declares no roots, the root is the directory
rootfs was started in (never / or the home directory).

What COMMAND needs to start is bound read-only at the same path (unless
--no-auto-bind): the executable through PATH and every symlink, its #!
interpreter (recursively, "env NAME" through the server's PATH), an ELF
file's loader and RPATH/RUNPATH libraries, the installation prefix of each
(a bin/ directory's parent, a venv's pyvenv.cfg home), and a launcher's
cache (npx, uvx, pipx) as a read-only layer whose writes stay in the
sandbox. Never the home directory, / or a directory holding credentials
(then only the files), nor anything named through a file the server can
write (a read-write root's symlinks, #! lines, pyvenv.cfg). An exec error names what is missing (interpreter,
symlink target, loader) and the flag that fixes it. A COMMAND path inside a
static root ("/app/bin/server") runs from the view.

Examples:
  rootfs run -- npx -y @modelcontextprotocol/server-filesystem
  rootfs run --git-identity -- ~/.venvs/git/bin/mcp-server-git
  rootfs run --root ~/src/app -- /app/bin/server
  rootfs run --setenv GITHUB_PERSONAL_ACCESS_TOKEN -- npx -y @modelcontextprotocol/server-github
  rootfs run --root ~/src/app --read-only -- /usr/bin/node server.js /app
  rootfs run --allow ~/src --ro-bind ~/src/tool -- node ./dist/index.js

Exit status:
  the server's own status; 125 when rootfs itself fails (one line on stderr
  says why), 126 when COMMAND cannot be executed, 127 when it is not found,
  128+N when the server was killed by signal N.

Flags:
`

const mountUsage = `rootfs mount: mount the roots view for a person to inspect

Synopsis:
  rootfs mount [--root PATH|URI]... [--roots-file FILE] [--read-only] MOUNTPOINT

The view's top-level entries are exactly the roots; below each is the host
tree, contained so that no symlink or rename leads out of it. rootfs prints
what it mounted, serves in the foreground, re-reads --roots-file on SIGHUP
(a bad file keeps the old view), and unmounts on SIGINT or SIGTERM.

Example:
  mkdir -p /tmp/view && rootfs mount --root ~/src/app --root ~/notes.md /tmp/view

Exit status:
  0 after a clean unmount, 1 on error (one line on stderr says why), 2 on a
  usage error.

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
