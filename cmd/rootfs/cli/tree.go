package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newTree builds the cobra command tree over commands(). Each command has
// DisableFlagParsing set and parses its own arguments, so its behaviour,
// its errors and "run"'s pass-through of COMMAND's arguments are exactly
// those of its own parser. Help, the man page and completion read the
// command's flags from its flags function (flagSet), not from cobra.
func newTree(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "rootfs",
		Short:         "turn MCP roots into a boundary the kernel enforces",
		Version:       Version(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				fmt.Fprint(stderr, topUsage)
				return &ExitError{Code: 2}
			}
			return &ExitError{Code: 2, Err: fmt.Errorf("unknown command %q; run \"rootfs --help\" for the list", args[0])}
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("rootfs {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return fmt.Errorf("%w: %v (see --help)", ErrUsage, err)
	})
	cobraHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if cmd == root {
			fmt.Fprint(stderr, topUsage)
			return
		}
		if c, ok := commands()[cmd.Name()]; ok && cmd.Parent() == root {
			fmt.Fprint(stderr, helpText(c))
			return
		}
		cobraHelp(cmd, args)
	})
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [COMMAND]",
		Short: "show help for a command",
		Args:  cobra.ArbitraryArgs,
		Run: func(_ *cobra.Command, args []string) {
			c, _, err := root.Find(args)
			if err != nil || c == nil {
				c = root
			}
			c.Help()
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return slices.Sorted(func(yield func(string) bool) {
				for name := range commands() {
					if !yield(name) {
						return
					}
				}
			}), cobra.ShellCompDirectiveNoFileComp
		},
	})

	for _, name := range commandNames() {
		c := commands()[name]
		sub := &cobra.Command{
			Use:                name,
			Short:              shortOf(c.usage),
			Args:               cobra.ArbitraryArgs,
			DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error {
				if c.runOut != nil {
					return c.runOut(ctx, args, stdout, stderr)
				}
				return c.run(ctx, args, stderr)
			},
			ValidArgsFunction: func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return completeArgs(c, args, toComplete)
			},
		}
		// The command's flags are completed by completeArgs, which knows
		// where they end; cobra would offer them after "--" too. A hidden
		// --help keeps cobra from adding one it would offer there.
		sub.Flags().Bool("help", false, "")
		sub.Flags().MarkHidden("help")
		root.AddCommand(sub)
	}
	root.AddCommand(&cobra.Command{
		Use:               "version",
		Short:             "print the version and VCS revision (also --version)",
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(stdout, "rootfs %s\n", Version())
			return err
		},
	})
	root.AddCommand(&cobra.Command{
		Use:    "man [DIR]",
		Short:  "write the man page, rootfs.1, to stdout or into DIR",
		Hidden: true,
		Args:   cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			page := ManPage()
			if len(args) == 0 {
				_, err := io.WriteString(stdout, page)
				return err
			}
			p := filepath.Join(args[0], "rootfs.1")
			if err := os.WriteFile(p, []byte(page), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "rootfs: wrote %s\n", p)
			return nil
		},
	})
	// cobra adds "completion bash|zsh|fish|powershell" by itself; it writes
	// the script to stdout.
	root.CompletionOptions.HiddenDefaultCmd = false
	return root
}

// commandNames lists commands() in the order the help and man page show
// them: the three documented first, then any other, sorted.
func commandNames() []string {
	first := []string{"run", "mount", "doctor"}
	var rest []string
	for name := range commands() {
		if !slices.Contains(first, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	var out []string
	for _, name := range first {
		if _, ok := commands()[name]; ok {
			out = append(out, name)
		}
	}
	return append(out, rest...)
}

// shortOf takes "rootfs run: wrap a stdio..." from the first line of a
// usage text and returns what follows the colon.
func shortOf(usage string) string {
	line, _, _ := strings.Cut(usage, "\n")
	if _, s, ok := strings.Cut(line, ": "); ok {
		return s
	}
	return line
}

// flagSet returns c's flags on a fresh set whose values nobody reads.
func flagSet(c command) *pflag.FlagSet {
	f := pflag.NewFlagSet("flags", pflag.ContinueOnError)
	if c.flags != nil {
		c.flags(f)
	}
	return f
}

// helpText is what "rootfs help NAME" and "rootfs NAME --help" print: the
// command's usage text followed by its flags.
func helpText(c command) string {
	return c.usage + flagSet(c).FlagUsages()
}

// completeArgs completes one argument of a command whose flags cobra does
// not parse: a flag's name, a flag's value (given as the next argument or
// after "=") from the values the flag lists (setValues) or by the kind its
// usage names (`DIR`, `PATH`, `FILE`...), an operand by c.operands. After
// "--", or for a passThrough command after its first operand, every
// argument is an operand: "rootfs run -- node --r<TAB>" offers no rootfs
// flags.
func completeArgs(c command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	f := flagSet(c)
	if name, value, ok := strings.Cut(toComplete, "="); ok && strings.HasPrefix(name, "--") && !slices.Contains(args, "--") {
		if fl := f.Lookup(name[2:]); fl != nil && (!c.passThrough || !pastOperand(f, args)) {
			// cobra answers "--flag=v" with whole words, as here.
			out, dir := completeFlagValue(fl, value)
			for i := range out {
				out[i] = name + "=" + out[i]
			}
			return out, dir
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return nil, c.operands
		case strings.HasPrefix(a, "--") && !strings.Contains(a, "="):
			if fl := f.Lookup(a[2:]); fl != nil && fl.NoOptDefVal == "" {
				if i == len(args)-1 {
					return completeFlagValue(fl, toComplete)
				}
				i++ // the flag's value
			}
		case strings.HasPrefix(a, "-") && a != "-":
		default:
			if c.passThrough {
				return nil, c.operands
			}
		}
	}
	if !strings.HasPrefix(toComplete, "-") {
		return nil, c.operands
	}
	var out []cobra.Completion
	f.VisitAll(func(fl *pflag.Flag) {
		if fl.Hidden || fl.Deprecated != "" || !strings.HasPrefix("--"+fl.Name, toComplete) {
			return
		}
		_, usage := pflag.UnquoteUsage(fl)
		out = append(out, cobra.CompletionWithDesc("--"+fl.Name, usage))
	})
	return out, cobra.ShellCompDirectiveNoFileComp
}

// pastOperand reports whether args (of a passThrough command) hold an
// operand, after which every argument is the operand's own.
func pastOperand(f *pflag.FlagSet, args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return true
		case strings.HasPrefix(a, "--") && !strings.Contains(a, "="):
			if fl := f.Lookup(a[2:]); fl != nil && fl.NoOptDefVal == "" {
				i++
			}
		case strings.HasPrefix(a, "-") && a != "-":
		default:
			return true
		}
	}
	return false
}

// completeFlagValue completes a value of fl: one of the values it lists
// (for a list flag such as --client, the item after the last comma, not
// repeating one already given), else by the kind its usage names.
func completeFlagValue(fl *pflag.Flag, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if values, ok := fl.Annotations[valuesAnnotation]; ok {
		prefix, partial := "", toComplete
		var given []string
		if strings.HasSuffix(fl.Value.Type(), "Slice") {
			if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
				prefix, partial = toComplete[:i+1], toComplete[i+1:]
				given = strings.Split(toComplete[:i], ",")
			}
		}
		var out []cobra.Completion
		for _, v := range values {
			if strings.HasPrefix(v, partial) && !slices.Contains(given, v) {
				out = append(out, prefix+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	kind, _ := pflag.UnquoteUsage(fl)
	switch kind {
	case "DIR":
		return nil, cobra.ShellCompDirectiveFilterDirs
	case "PATH", "FILE", "SRC[:DST]":
		return nil, cobra.ShellCompDirectiveDefault
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}
