package clientconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aymanbagabas/go-udiff"
)

// Format is a configuration file's syntax.
type Format int

const (
	JSONC Format = iota // JSON, with comments and trailing commas allowed
	TOML
)

// Op is what to do to each stdio entry.
type Op int

const (
	Wrap   Op = iota // run it under rootfs
	Unwrap           // restore what wrap changed
)

// Client is an MCP client whose configuration files this package knows.
type Client struct {
	Name  string // as given to --client
	Title string // for people
	// Note is said once after wrapping one of its servers: what the client
	// gives rootfs as roots, when that needs saying.
	Note string
	// files lists its files for a home and project directory.
	files func(e Env) []Location
}

// Env is where to look for configuration files.
type Env struct {
	Home    string // the user's home directory
	Project string // the project directory (the current directory)
	// XDGConfigHome is $XDG_CONFIG_HOME; empty means Home/.config.
	XDGConfigHome string
	// CodexHome is $CODEX_HOME; empty means Home/.codex.
	CodexHome string
	// XDGStateHome is $XDG_STATE_HOME; empty (or, as the XDG base
	// directory specification says, relative) means Home/.local/state.
	XDGStateHome string
}

// BackupDir is the directory below which rootfs wrap keeps the files it
// rewrote, as they were (see Result.Write): rootfs/backups in the user's
// state directory.
func (e Env) BackupDir() string {
	state := e.XDGStateHome
	if !filepath.IsAbs(state) {
		state = filepath.Join(e.Home, ".local", "state")
	}
	return filepath.Join(state, "rootfs", "backups")
}

func (e Env) config() string {
	if e.XDGConfigHome != "" {
		return e.XDGConfigHome
	}
	return filepath.Join(e.Home, ".config")
}

// Location is one configuration file of one client.
type Location struct {
	Client string
	Scope  string // "project" or "user"
	Path   string
	Format Format
	// Servers are JSON pointers to the objects that map server names to
	// entries; a "*" segment stands for every member. TOML files use
	// /mcp_servers.
	Servers []string
}

// Shared reports whether loc's file is likely to reach other machines,
// where an absolute path to this machine's rootfs names nothing: a
// project's file (meant to be committed with the project), or any file in
// a git work tree other than the home directory itself (a dotfiles
// repository holding $XDG_CONFIG_HOME, say). A home directory that is a
// work tree does not count: its ~/.claude.json and the like are this
// machine's and seldom committed, and the user's own files are where an
// absolute path helps (see the package doc).
func Shared(loc Location, e Env) bool {
	if loc.Scope == "project" {
		return true
	}
	home := filepath.Clean(e.Home)
	for d := filepath.Dir(filepath.Clean(loc.Path)); ; d = filepath.Dir(d) {
		if d == home {
			return false
		}
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return true
		}
		if filepath.Dir(d) == d {
			return false
		}
	}
}

// Clients are the clients rootfs wrap knows, in the order it visits them.
var Clients = []Client{
	{Name: "vscode", Title: "VS Code", files: func(e Env) []Location {
		return []Location{
			{Scope: "project", Path: filepath.Join(e.Project, ".vscode", "mcp.json"), Servers: []string{"/servers"}},
			{Scope: "user", Path: filepath.Join(e.config(), "Code", "User", "mcp.json"), Servers: []string{"/servers"}},
			{Scope: "user", Path: filepath.Join(e.config(), "Code - Insiders", "User", "mcp.json"), Servers: []string{"/servers"}},
		}
	}},
	{Name: "claude-code", Title: "Claude Code", files: func(e Env) []Location {
		return []Location{
			{Scope: "project", Path: filepath.Join(e.Project, ".mcp.json"), Servers: []string{"/mcpServers"}},
			{Scope: "user", Path: filepath.Join(e.Home, ".claude.json"), Servers: []string{"/mcpServers", "/projects/*/mcpServers"}},
		}
	}},
	{Name: "claude-desktop", Title: "Claude Desktop",
		Note: "Claude Desktop may answer roots/list with an empty list: give such a server a static root by adding \"--root\", \"DIR\" after \"run\" in its args.",
		files: func(e Env) []Location {
			return []Location{
				{Scope: "user", Path: filepath.Join(e.config(), "Claude", "claude_desktop_config.json"), Servers: []string{"/mcpServers"}},
			}
		}},
	{Name: "cursor", Title: "Cursor", files: func(e Env) []Location {
		return []Location{
			{Scope: "project", Path: filepath.Join(e.Project, ".cursor", "mcp.json"), Servers: []string{"/mcpServers"}},
			{Scope: "user", Path: filepath.Join(e.Home, ".cursor", "mcp.json"), Servers: []string{"/mcpServers"}},
		}
	}},
	{Name: "gemini", Title: "Gemini CLI", files: func(e Env) []Location {
		return []Location{
			{Scope: "project", Path: filepath.Join(e.Project, ".gemini", "settings.json"), Servers: []string{"/mcpServers"}},
			{Scope: "user", Path: filepath.Join(e.Home, ".gemini", "settings.json"), Servers: []string{"/mcpServers"}},
		}
	}},
	{Name: "codex", Title: "Codex",
		Note: "Codex declares no roots: a wrapped Codex server's root is the directory rootfs starts in, which is the directory Codex runs in (the project). Add \"--root\", \"DIR\" after \"run\" to choose another.",
		files: func(e Env) []Location {
			home := e.CodexHome
			if home == "" {
				home = filepath.Join(e.Home, ".codex")
			}
			return []Location{
				{Scope: "project", Path: filepath.Join(e.Project, ".codex", "config.toml"), Format: TOML, Servers: []string{"/mcp_servers"}},
				{Scope: "user", Path: filepath.Join(home, "config.toml"), Format: TOML, Servers: []string{"/mcp_servers"}},
			}
		}},
}

// ClientNames lists the names --client accepts.
func ClientNames() []string {
	var out []string
	for _, c := range Clients {
		out = append(out, c.Name)
	}
	return out
}

// LookupClient returns the client called name.
func LookupClient(name string) (Client, bool) {
	for _, c := range Clients {
		if c.Name == name {
			return c, true
		}
	}
	return Client{}, false
}

// Locations returns the client's configuration files for e, existing or
// not.
func (c Client) Locations(e Env) []Location {
	locs := c.files(e)
	for i := range locs {
		locs[i].Client = c.Name
	}
	return locs
}

// Action is what happened to one entry.
type Action int

const (
	Wrapped        Action = iota // now runs under rootfs
	Updated                      // already wrapped; Detail says what changed (a --setenv added, the command)
	AlreadyWrapped               // already wrapped; nothing to do
	Unwrapped                    // restored
	NotWrapped                   // unwrap: not under rootfs; nothing to do
	Skipped                      // left alone; Detail says why
)

// Change is the outcome for one server entry.
type Change struct {
	Server string // its name; for a Claude Code project entry, "NAME (project DIR)"
	Action Action
	Detail string // why, for Skipped; what, for Updated
	// Command and Args are the server's own command and arguments as the
	// file has them (client variables unexpanded), for Wrapped: the
	// caller says which of them name paths that become roots.
	Command string
	Args    []string
}

// Options are the choices the caller makes for every entry.
type Options struct {
	// Rootfs is the command written into wrapped entries; required for
	// Wrap. Both Wrap and Unwrap treat it, and any command whose file is
	// named rootfs, as rootfs. When it is a bare name ("rootfs", looked up
	// on PATH), Wrap also gives it to wrapped entries that run rootfs by an
	// absolute path.
	Rootfs string
}

// Result is a planned rewrite of one file.
type Result struct {
	Location
	Old, New []byte
	Changes  []Change
	st       fs.FileInfo // the file's, when planned: mode and owner to keep
	target   string      // Path with symlinks resolved: the file written
}

// Changed reports whether the file's bytes would change.
func (r *Result) Changed() bool { return !bytes.Equal(r.Old, r.New) }

// Diff is a unified diff from the file's old to its new contents.
func (r *Result) Diff() string {
	return udiff.Unified(r.Path, r.Path, string(r.Old), string(r.New))
}

// MaxFileSize bounds the configuration files read; MCP configs are
// kilobytes, ~/.claude.json a few megabytes.
const MaxFileSize = 64 << 20

// ErrChanged is returned by Write when the file changed after Plan read it
// (a running client rewrote it); nothing was written.
var ErrChanged = errors.New("the file changed while rootfs was rewriting it (is the client running?); nothing written, run again")

// LegacyBackupSuffix named the copy that rootfs wrap kept beside a file
// before backups moved to BackupDir, where a git work tree does not list
// them as untracked files. Nothing writes it any more.
const LegacyBackupSuffix = ".rootfs-backup"

// BackupPath is where Write keeps the old contents of file (absolute, its
// symlinks resolved) below the backup directory dir: at the file's whole
// path, so each file has its own and a person finds it by the file's name.
func BackupPath(dir, file string) string {
	return filepath.Join(dir, file)
}

// Plan reads loc's file and computes the rewrite; it writes nothing. It
// returns an error wrapping fs.ErrNotExist when the file does not exist.
func Plan(loc Location, op Op, opt Options) (*Result, error) {
	if op == Wrap && opt.Rootfs == "" {
		return nil, errors.New("no rootfs command to write")
	}
	target, err := filepath.EvalSymlinks(loc.Path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(target)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", loc.Path)
	}
	if abs, err := filepath.Abs(loc.Path); err == nil {
		if err := checkLinkOwners(abs, st); err != nil {
			return nil, err
		}
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: %d bytes, more than an MCP configuration holds (limit %d); left alone", loc.Path, st.Size(), MaxFileSize)
	}
	old, err := os.ReadFile(target)
	if err != nil {
		return nil, err
	}
	newb, changes, err := Rewrite(old, loc.Format, loc.Servers, op, opt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc.Path, err)
	}
	return &Result{Location: loc, Old: old, New: newb, Changes: changes, st: st, target: target}, nil
}

// Write saves the old contents below backupDir (at BackupPath, replacing an
// older backup of the same file; directories it makes there are private
// to the user, since configurations hold tokens) and then replaces the
// file in one step (a new file renamed over it, with the old one's
// permissions and, as root, its owner), so a client reading it never sees
// half a file. A symlinked file is written at its target. It returns the
// backup's path; it does nothing when nothing changed.
//
// Backups stay out of the file's directory: in a project that is a git
// work tree, a copy beside .vscode/mcp.json shows up as an untracked file
// and is easily committed. Unwrap does not need them; they are for a
// person who wants the old bytes back.
func (r *Result) Write(backupDir string) (backup string, err error) {
	if !r.Changed() {
		return "", nil
	}
	if !filepath.IsAbs(backupDir) {
		return "", fmt.Errorf("backup directory %q is not an absolute path", backupDir)
	}
	// A client that rewrote the file since Plan would lose its change.
	if now, err := readFile(r.target); err != nil || !bytes.Equal(now, r.Old) {
		return "", ErrChanged
	}
	backup = BackupPath(backupDir, r.target)
	if err := writeBackup(backupDir, r.target, r.Old, r.st); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	if err := writeAtomic(r.target, r.New, r.st); err != nil {
		return backup, err
	}
	return backup, nil
}

// Rewrite applies op to every server entry under the pointers servers of a
// file's contents, returning the new contents and what happened to each
// entry. Bytes outside the changed values are kept as they were.
func Rewrite(data []byte, format Format, servers []string, op Op, opt Options) ([]byte, []Change, error) {
	switch format {
	case JSONC:
		return rewriteJSON(data, servers, op, opt)
	case TOML:
		return rewriteTOML(data, op, opt)
	}
	return nil, nil, fmt.Errorf("unknown format %d", format)
}

// qualify names an entry under a Claude Code project.
func qualify(name string, pointer []string) string {
	if len(pointer) >= 2 && pointer[0] == "projects" {
		return fmt.Sprintf("%s (project %s)", name, pointer[1])
	}
	return name
}

// isRootfs reports whether command runs rootfs: its file is named rootfs, or
// it is the command wrap writes (which a caller may name otherwise).
func isRootfs(command string, opt Options) bool {
	return filepath.Base(command) == "rootfs" || (opt.Rootfs != "" && command == opt.Rootfs)
}
