// Package cli is the rootfs command line: it parses flags into each
// command's options, builds the logger, and maps errors to exit codes.
// It holds no logic another command could need: "rootfs run" is a
// session (package session), "rootfs mount" a view (package vfs).
//
// # Exit codes
//
//	0    success (mount: unmounted cleanly, after SIGINT/SIGTERM or from
//	     outside by fusermount3 -u)
//	1-124 run: the wrapped server's own status (0 too), also when the
//	     client leaves (closes stdin or dies) and on SIGINT/SIGTERM,
//	     which rootfs passes on after closing the server's stdin
//	2    usage error (mount, doctor, wrap, unwrap)
//	125  run: rootfs itself failed (one line on stderr says why)
//	126  run: COMMAND exists but cannot be executed
//	127  run: COMMAND was not found
//	128+N the wrapped server (or rootfs) was killed by signal N
//
// # Command tree
//
// The commands hang on a cobra tree (tree.go) for what cobra does well and
// hand code would repeat: dispatch, "help", --version, and shell completion
// (bash, zsh, fish) served by the binary itself, so that it always matches
// the flags. Each command still parses its own arguments (cobra's flag
// parsing is off for them): "rootfs run" must pass everything after the
// first operand or "--" to the server untouched, and the exit codes above
// are decided here, not by cobra.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rootfs-dev/rootfs/session"
)

// ErrUsage marks a command line that cannot be understood.
var ErrUsage = errors.New("usage")

// ExitError carries an exit status chosen by a command, such as the wrapped
// server's status in "rootfs run".
type ExitError struct {
	Code int
	Err  error // optional; printed when non-nil
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

const topUsage = `rootfs: turn MCP roots into a boundary the kernel enforces

Usage:
  rootfs run [flags] -- COMMAND [ARG...]   wrap a stdio MCP server in a sandbox whose / is its roots
  rootfs mount [flags] MOUNTPOINT          mount the roots view for a person to inspect
  rootfs doctor                            check this machine for what rootfs needs
  rootfs wrap [--client NAME] [--dry-run]  run the stdio servers of your MCP clients under rootfs
  rootfs unwrap [--client NAME]            undo rootfs wrap
  rootfs status [--json]                   the sessions running for you: roots, binds, counts
  rootfs why [PATH...]                     why a server cannot see a path, or what it was refused
  rootfs version                           print the version and VCS revision (also --version)
  rootfs completion bash|zsh|fish          print a shell completion script
  rootfs help [COMMAND]                    show help for a command

Run "rootfs COMMAND --help" for a command's flags, examples and exit codes.
`

// A command is one "rootfs NAME". Its flags are defined once, by flags,
// which both its own parser and the command tree (--help's flag list,
// shell completion, the man page) call on their own flag sets.
type command struct {
	run func(ctx context.Context, args []string, stderr io.Writer) error
	// runOut, when set instead of run, is a command that prints what it was
	// asked for (wrap's --dry-run diff, run's --dry-run sandbox) on stdout.
	// "rootfs run" writes nothing else there: it belongs to the MCP
	// protocol, which P1 speaks on the inherited descriptor.
	runOut func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	usage  string
	// flags registers the command's flags on f; nil means none.
	flags func(f *pflag.FlagSet)
	// operands says what completes the arguments that are not flags
	// (zero: file names).
	operands cobra.ShellCompDirective
	// passThrough: the arguments after the first operand are the
	// operand's own (run's COMMAND and its arguments), not flags.
	passThrough bool
}

func commands() map[string]command {
	return map[string]command{
		"mount":  {run: mountCommand, usage: mountUsage, flags: func(f *pflag.FlagSet) { addMountFlags(f, new(RootsOptions), new(MountOptions)) }, operands: cobra.ShellCompDirectiveFilterDirs},
		"run":    {runOut: runCommand, usage: runUsage, flags: func(f *pflag.FlagSet) { new(runFlags).addFlags(f) }, passThrough: true},
		"doctor": {run: doctorCommand, usage: doctorUsage, operands: cobra.ShellCompDirectiveNoFileComp},
		"wrap":   {runOut: wrapCommand, usage: wrapUsage, flags: func(f *pflag.FlagSet) { new(WrapOptions).AddFlags(f) }, operands: cobra.ShellCompDirectiveNoFileComp},
		"status": {runOut: statusCommand, usage: statusUsage, flags: func(f *pflag.FlagSet) { addStatusFlags(f) }, operands: cobra.ShellCompDirectiveNoFileComp},
		"why":    {runOut: whyCommand, usage: whyUsage, flags: func(f *pflag.FlagSet) { addWhyFlags(f) }},
		"unwrap": {runOut: unwrapCommand, usage: unwrapUsage, flags: func(f *pflag.FlagSet) { new(WrapOptions).AddFlags(f) }, operands: cobra.ShellCompDirectiveNoFileComp},
	}
}

// Main runs the command line args (without the program name) and returns the
// process exit status. It is the only place that decides exit codes.
// stdout gets only what was asked for on it (version, completion script,
// man page); "rootfs run" leaves it to the MCP protocol.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx := context.Background()
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return 2
	}
	root := newTree(ctx, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	name := ""
	if cmd != nil && cmd != root {
		name = cmd.Name()
	}
	return exitCode(name, err, stderr)
}

func exitCode(name string, err error, stderr io.Writer) int {
	prefix := "rootfs"
	if name != "" {
		prefix += " " + name
	}
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.Err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prefix, ee.Err)
		}
		return ee.Code
	case errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errMissingRoot):
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return 125
	case errors.Is(err, ErrUsage) || errors.Is(err, session.ErrUsage):
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		if name == "run" {
			return 125
		}
		return 2
	case errors.Is(err, context.Canceled):
		return 130
	default:
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		if name == "run" {
			return 125
		}
		return 1
	}
}

// errHelp is returned when --help was asked for and printed.
var errHelp = errors.New("help requested")

// newLogger builds the zap logger every command uses: human-readable lines
// on stderr only, because stdout carries the MCP protocol in "rootfs run".
func newLogger(level string, stderr io.Writer) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return nil, fmt.Errorf("%w: --log-level %q: want debug, info, warn or error", ErrUsage, level)
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	enc.EncodeCaller = nil
	enc.ConsoleSeparator = " "
	enc.NameKey = ""
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(stderr)), lvl)
	return zap.New(core).Named("rootfs"), nil
}

func mountCommand(ctx context.Context, args []string, stderr io.Writer) error {
	return runMount(ctx, args, stderr, nil)
}
