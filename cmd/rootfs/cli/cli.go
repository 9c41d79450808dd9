// Package cli is the rootfs command line: it parses flags, builds the logger,
// wires vfs, mcpbridge and mountmgr together, and maps errors to exit codes.
// It holds no logic another command could need.
//
// # Exit codes
//
//	0    success (mount: unmounted cleanly after SIGINT/SIGTERM)
//	1-124 run: the wrapped server's own status
//	2    usage error (mount, doctor, wrap, unwrap)
//	125  run: rootfs itself failed (one line on stderr says why)
//	126  run: COMMAND exists but cannot be executed
//	127  run: COMMAND was not found
//	128+N the wrapped server (or rootfs) was killed by signal N
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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
  rootfs help [COMMAND]                    show help for a command

Run "rootfs COMMAND --help" for a command's flags, examples and exit codes.
`

type command struct {
	run   func(ctx context.Context, args []string, stderr io.Writer) error
	usage string
}

func commands() map[string]command {
	return map[string]command{
		"mount":  {run: mountCommand, usage: mountUsage},
		"run":    {run: runCommand, usage: runUsage},
		"doctor": {run: doctorCommand, usage: doctorUsage},
		"wrap":   {run: wrapCommand, usage: wrapUsage},
		"unwrap": {run: unwrapCommand, usage: unwrapUsage},
	}
}

// Main runs the command line args (without the program name) and returns the
// process exit status. It is the only place that decides exit codes.
func Main(args []string, stderr io.Writer) int {
	ctx := context.Background()
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "--help", "help":
		if len(args) > 1 {
			if c, ok := commands()[args[1]]; ok {
				fmt.Fprint(stderr, c.usage)
				return 0
			}
		}
		fmt.Fprint(stderr, topUsage)
		return 0
	}
	c, ok := commands()[name]
	if !ok {
		fmt.Fprintf(stderr, "rootfs: unknown command %q; run \"rootfs --help\" for the list\n", name)
		return 2
	}
	err := c.run(ctx, args[1:], stderr)
	return exitCode(name, err, stderr)
}

func exitCode(name string, err error, stderr io.Writer) int {
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.Err != nil {
			fmt.Fprintf(stderr, "rootfs %s: %v\n", name, ee.Err)
		}
		return ee.Code
	case errors.Is(err, errHelp):
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(stderr, "rootfs %s: %v\n", name, err)
		if name == "run" {
			return 125
		}
		return 2
	case errors.Is(err, context.Canceled):
		return 130
	default:
		fmt.Fprintf(stderr, "rootfs %s: %v\n", name, err)
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
