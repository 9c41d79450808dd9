package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rootfs-dev/rootfs/clientconfig"
	"github.com/rootfs-dev/rootfs/session"
)

// WrapOptions are the flags of "rootfs wrap" and "rootfs unwrap".
type WrapOptions struct {
	Clients []string // --client; empty means every client with a config file
	Project string   // --project; empty means the current directory
	DryRun  bool
	// Rootfs is the command written into wrapped entries; empty means
	// "rootfs" in files others share (clientconfig.Shared) and this
	// binary's absolute path in the user's own (see rootfsCommand). Both
	// commands also treat it as rootfs when they look for wrapped entries.
	Rootfs string
}

// AddFlags registers the flags on f.
func (o *WrapOptions) AddFlags(f *pflag.FlagSet) {
	f.StringSliceVar(&o.Clients, "client", nil, "only this client's files: "+strings.Join(clientconfig.ClientNames(), ", ")+" (repeatable or comma-separated; default: every client with a config file here or in your home)")
	setValues(f, "client", clientconfig.ClientNames()...)
	f.StringVar(&o.Project, "project", "", "the project `DIR` whose files (.vscode/mcp.json, .mcp.json, ...) to change (default: the current directory)")
	f.BoolVar(&o.DryRun, "dry-run", false, "print a unified diff of each change on stdout and write nothing")
	f.StringVar(&o.Rootfs, "rootfs", "", "write `PATH` as the command in every file (default: \"rootfs\" in project files and files in a git work tree, this binary's absolute path in your own); unwrap: also treat PATH as rootfs")
}

// wrapCommand is "rootfs wrap".
func wrapCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return wrapMain(ctx, clientconfig.Wrap, args, stdout, stderr)
}

// unwrapCommand is "rootfs unwrap".
func unwrapCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return wrapMain(ctx, clientconfig.Unwrap, args, stdout, stderr)
}

func wrapMain(ctx context.Context, op clientconfig.Op, args []string, stdout, stderr io.Writer) error {
	name, usage := "wrap", wrapUsage
	if op == clientconfig.Unwrap {
		name, usage = "unwrap", unwrapUsage
	}
	f := pflag.NewFlagSet(name, pflag.ContinueOnError)
	var o WrapOptions
	o.AddFlags(f)
	if err := parseFlags(f, args, usage, stderr); err != nil {
		return err
	}
	if f.NArg() != 0 {
		return fmt.Errorf("%w: %s takes no arguments (choose clients with --client)", ErrUsage, name)
	}
	return runWrap(ctx, op, o, stdout, stderr)
}

// runWrap does "rootfs wrap" (op Wrap) or "rootfs unwrap" with the options
// parsed: diffs go to stdout, what happened to each entry to stderr.
func runWrap(ctx context.Context, op clientconfig.Op, o WrapOptions, stdout, stderr io.Writer) error {
	var clients []clientconfig.Client
	for _, n := range o.Clients {
		c, ok := clientconfig.LookupClient(n)
		if !ok {
			return fmt.Errorf("%w: unknown client %q; known: %s", ErrUsage, n, strings.Join(clientconfig.ClientNames(), ", "))
		}
		clients = append(clients, c)
	}
	if len(clients) == 0 {
		clients = clientconfig.Clients
	}
	env, err := wrapEnv(o.Project)
	if err != nil {
		return err
	}
	// Unwrap needs the path too: it recognises entries by it when this
	// binary is not named rootfs.
	abs, err := rootfsCommand(o.Rootfs)
	if err != nil {
		return err
	}
	seen := map[string]bool{} // one file may be both the project's and the user's
	found, failed, written := 0, 0, 0
	var bareUsed string // a bare command written (or to be) into some file
	for _, c := range clients {
		noted := false
		var looked []string
		for _, loc := range c.Locations(env) {
			looked = append(looked, loc.Path)
			key := loc.Path
			if real, err := filepath.EvalSymlinks(loc.Path); err == nil {
				key = real
			}
			if seen[key] {
				continue
			}
			opt := clientconfig.Options{Rootfs: abs}
			if op == clientconfig.Wrap && o.Rootfs == "" && clientconfig.Shared(loc, env) {
				// A file others use gets a command that works on their
				// machines too; see wrapUsage.
				opt.Rootfs = "rootfs"
			}
			r, err := clientconfig.Plan(loc, op, opt)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			seen[key] = true
			found++
			if err != nil {
				fmt.Fprintf(stderr, "%s: %v; left as it was\n", loc.Path, err)
				failed++
				continue
			}
			fmt.Fprintf(stderr, "%s (%s, %s):\n", loc.Path, c.Title, loc.Scope)
			wrapped := printChanges(stderr, r.Changes, env)
			if wrapped && !strings.Contains(opt.Rootfs, "/") {
				bareUsed = opt.Rootfs
			}
			switch {
			case !r.Changed():
				fmt.Fprintf(stderr, "  nothing to change\n")
			case o.DryRun:
				fmt.Fprint(stdout, r.Diff())
				fmt.Fprintf(stderr, "  dry run: nothing written\n")
			default:
				backup, err := r.Write(env.BackupDir())
				if err != nil {
					fmt.Fprintf(stderr, "  write: %v; the file is as it was\n", err)
					failed++
					continue
				}
				fmt.Fprintf(stderr, "  written; the previous contents are in %s\n", backup)
				written++
				// Older versions kept the backup beside the file.
				if _, err := os.Lstat(loc.Path + clientconfig.LegacyBackupSuffix); err == nil {
					fmt.Fprintf(stderr, "  note: %s is an older rootfs backup, no longer kept there; delete it when you no longer need it\n", loc.Path+clientconfig.LegacyBackupSuffix)
				}
			}
			if wrapped && c.Note != "" && !noted {
				fmt.Fprintf(stderr, "  note: %s\n", c.Note)
				noted = true
			}
		}
		if len(o.Clients) > 0 && !anySeen(seen, looked) {
			fmt.Fprintf(stderr, "%s: no configuration file (looked at %s)\n", c.Title, strings.Join(looked, ", "))
		}
	}
	if found == 0 {
		return &ExitError{Code: 1, Err: fmt.Errorf("no MCP client configuration found for the project in %s or in %s; run it in your project, or see --help for where each client keeps its file", env.Project, env.Home)}
	}
	if bareUsed != "" {
		if _, err := exec.LookPath(bareUsed); err != nil {
			fmt.Fprintf(stderr, "warning: shared files now run %q, which is not on your PATH: install rootfs in a directory on PATH (/usr/local/bin, say) or clients will not start those servers\n", bareUsed)
		}
	}
	if failed > 0 {
		return &ExitError{Code: 1, Err: fmt.Errorf("%d file(s) could not be changed (see above)", failed)}
	}
	// A client reads its file when it starts: a restart matters only when a
	// file changed.
	if op == clientconfig.Wrap && written > 0 {
		fmt.Fprintln(stderr, "Restart the clients (or reload their MCP servers) to use the wrapped servers; \"rootfs unwrap\" undoes this.")
	}
	return nil
}

func anySeen(seen map[string]bool, paths []string) bool {
	for _, p := range paths {
		if real, err := filepath.EvalSymlinks(p); err == nil && seen[real] {
			return true
		}
	}
	return false
}

// printChanges says what happened to each entry and reports whether one was
// wrapped or updated.
func printChanges(w io.Writer, changes []clientconfig.Change, env clientconfig.Env) bool {
	wrapped := false
	for _, c := range changes {
		var what string
		switch c.Action {
		case clientconfig.Wrapped:
			what, wrapped = "wrapped", true
		case clientconfig.Updated:
			what, wrapped = "already wrapped; updated", true
		case clientconfig.AlreadyWrapped:
			what = "already wrapped"
		case clientconfig.Unwrapped:
			what = "unwrapped"
		case clientconfig.NotWrapped:
			what = "not wrapped"
		case clientconfig.Skipped:
			what = "left alone"
		}
		if c.Detail != "" {
			what += ": " + c.Detail
		}
		fmt.Fprintf(w, "  %s: %s\n", c.Server, what)
		if c.Action == clientconfig.Wrapped {
			if roots := argRootsPreview(c.Command, c.Args, env); len(roots) > 0 {
				fmt.Fprintf(w, "    roots from its arguments (kept whatever the client sends): %s\n", strings.Join(roots, ", "))
			}
		}
	}
	if len(changes) == 0 {
		fmt.Fprintf(w, "  no MCP servers\n")
	}
	return wrapped
}

// argRootsPreview names the arguments that "rootfs run" will make roots
// (session.ArgPaths), with the variables a client expands in them taken as
// the project (${workspaceFolder}) and the home directory (${userHome},
// ~): what the user will see in the sandbox, before the client starts it.
func argRootsPreview(command string, args []string, env clientconfig.Env) []string {
	rep := strings.NewReplacer("${workspaceFolder}", env.Project, "${workspaceRoot}", env.Project, "${userHome}", env.Home, "${HOME}", env.Home, "$HOME", env.Home)
	expand := func(v string) string {
		x := rep.Replace(v)
		if strings.HasPrefix(x, "~/") {
			x = filepath.Join(env.Home, x[2:])
		}
		return x
	}
	var out []string
	for _, c := range session.ArgPaths(command, args, env.Project, expand) {
		p := c.Path
		if v := argValue(c.Arg); expand(v) != v {
			p += " (" + v + ")"
		}
		out = append(out, p)
	}
	return out
}

// argValue is what of an argument names a path: the argument, or the
// value of "--flag=VALUE".
func argValue(a string) string {
	if strings.HasPrefix(a, "-") {
		_, v, _ := strings.Cut(a, "=")
		return v
	}
	return a
}

func wrapEnv(project string) (clientconfig.Env, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return clientconfig.Env{}, fmt.Errorf("no home directory: %w", err)
	}
	if project == "" {
		if project, err = os.Getwd(); err != nil {
			return clientconfig.Env{}, err
		}
	}
	if project, err = filepath.Abs(project); err != nil {
		return clientconfig.Env{}, err
	}
	return clientconfig.Env{Home: home, Project: project, XDGConfigHome: os.Getenv("XDG_CONFIG_HOME"), CodexHome: os.Getenv("CODEX_HOME"), XDGStateHome: os.Getenv("XDG_STATE_HOME")}, nil
}

// rootfsCommand is the command wrapped entries of the user's own files run
// (files others share get the bare name, see runWrap). By default it is the
// absolute path of this binary: clients start servers with whatever PATH
// they were started with (a desktop app's is minimal and lacks ~/go/bin or
// ~/.local/bin), so "rootfs" alone would often not be found. When "rootfs"
// on this PATH is this same binary, its PATH entry is used (/usr/bin/rootfs
// rather than a symlink's target), so the entry survives a package upgrade
// that moves the target. --rootfs PATH writes PATH into every file.
func rootfsCommand(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find this rootfs binary (%v); name it with --rootfs PATH", err)
	}
	if p, err := exec.LookPath("rootfs"); err == nil {
		if abs, err := filepath.Abs(p); err == nil && sameFile(abs, exe) {
			return abs, nil
		}
	}
	return exe, nil
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
