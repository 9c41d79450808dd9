package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/rootfs-dev/rootfs/instance"
)

// statusCommand is "rootfs status": the sessions running for this user,
// as each tells it over its socket.
func statusCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := pflag.NewFlagSet("status", pflag.ContinueOnError)
	asJSON := addStatusFlags(f)
	if err := parseFlags(f, args, statusUsage, stderr); err != nil {
		return err
	}
	infos, err := listInstances(ctx, f.Args())
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if infos == nil {
			infos = []instance.Info{}
		}
		return enc.Encode(infos)
	}
	if len(infos) == 0 {
		fmt.Fprintln(stdout, "no rootfs session is running for this user")
		return nil
	}
	for i, in := range infos {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printInstance(stdout, in)
	}
	return nil
}

func addStatusFlags(f *pflag.FlagSet) *bool {
	return f.Bool("json", false, "print the sessions as JSON, for tools")
}

// listInstances asks the sessions of this user; ids, when given, keep
// only those (an id, or its start, or the session's pid).
func listInstances(ctx context.Context, ids []string) ([]instance.Info, error) {
	dir, err := instance.Dir(os.Getenv, os.Getuid(), false)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	infos, err := instance.List(ctx, dir)
	if err != nil || len(ids) == 0 {
		return infos, err
	}
	var out []instance.Info
	for _, in := range infos {
		for _, id := range ids {
			if strings.HasPrefix(in.ID, id) || fmt.Sprint(in.PID) == id {
				out = append(out, in)
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no running session matches %s; \"rootfs status\" lists them", ErrUsage, strings.Join(ids, ", "))
	}
	return out, nil
}

func printInstance(w io.Writer, in instance.Info) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "session\t%s (pid %d, up %s)\n", in.ID, in.PID, time.Since(in.Started).Round(time.Second))
	fmt.Fprintf(tw, "command\t%s\n", shown(strings.Join(in.Command, " ")))
	if in.Client != "" {
		fmt.Fprintf(tw, "client\t%s\n", shown(in.Client))
	}
	fmt.Fprintf(tw, "data path\t%s, %s layout\n", in.DataPath, in.Layout)
	fmt.Fprintf(tw, "network\t%s\n", in.Network)
	if in.AuditLog != "" {
		fmt.Fprintf(tw, "audit log\t%s\n", in.AuditLog)
	}
	if len(in.Roots) == 0 {
		fmt.Fprintf(tw, "roots\t(none)\n")
	}
	for i, r := range in.Roots {
		label := ""
		if i == 0 {
			label = "roots"
		}
		mode := "read-write"
		if r.ReadOnly {
			mode = "read-only"
		}
		at := ""
		if r.Path != r.Host {
			at = " at " + r.Path
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%s\t%s\n", label, shown(r.Host), shown(at), mode, r.Source)
	}
	for i, b := range in.Binds {
		label := ""
		if i == 0 {
			label = "binds"
		}
		why := b.Reason
		if why == "" {
			why = b.Flag
		}
		mode := "read-write"
		if b.ReadOnly {
			mode = "read-only"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", label, shown(b.Host), mode, why)
	}
	fmt.Fprintf(tw, "counts\t%s\n", counts(in.Stats.Ops))
	fmt.Fprintf(tw, "refused\t%s\n", counts(in.Stats.Refused))
	if in.Stats.Dropped > 0 {
		fmt.Fprintf(tw, "dropped\t%d audit records\n", in.Stats.Dropped)
	}
}

func counts(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// whyCommand is "rootfs why [--session ID] [PATH...]": without a path,
// the last refusals of each session with the flag that would allow each;
// with paths, whether the server sees each and because of what.
func whyCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := pflag.NewFlagSet("why", pflag.ContinueOnError)
	session, asJSON := addWhyFlags(f)
	if err := parseFlags(f, args, whyUsage, stderr); err != nil {
		return err
	}
	var ids []string
	if *session != "" {
		ids = []string{*session}
	}
	infos, err := listInstances(ctx, ids)
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		return fmt.Errorf("%w: no rootfs session is running for this user", ErrUsage)
	}
	type answer struct {
		Session  string             `json:"session"`
		Command  []string           `json:"command"`
		Verdicts []instance.Verdict `json:"verdicts,omitempty"`
		Refusals any                `json:"refusals,omitempty"`
	}
	var answers []answer
	paths := make([]string, f.NArg())
	for i, p := range f.Args() {
		paths[i] = hostPath(p)
	}
	for _, in := range infos {
		a := answer{Session: in.ID, Command: in.Command}
		for _, p := range paths {
			a.Verdicts = append(a.Verdicts, instance.Explain(in, p))
		}
		if f.NArg() == 0 {
			a.Refusals = in.Refusals
		}
		answers = append(answers, a)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(answers)
	}
	for i, a := range answers {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "session %s: %s\n", a.Session, shown(strings.Join(a.Command, " ")))
		for _, v := range a.Verdicts {
			switch {
			case v.Visible:
				mode := "read-write"
				if v.ReadOnly {
					mode = "read-only"
				}
				at := ""
				if v.At != "" {
					at = " at " + v.At
				}
				fmt.Fprintf(stdout, "  %s: visible%s (%s), %s\n", shown(v.Path), shown(at), mode, shown(v.Because))
			case v.Because != "":
				fmt.Fprintf(stdout, "  %s: not visible (%s); to show it: %s\n", shown(v.Path), shown(v.Because), shown(v.Allow))
			default:
				fmt.Fprintf(stdout, "  %s: not visible; to show it: %s\n", shown(v.Path), shown(v.Allow))
			}
		}
		if f.NArg() == 0 {
			in := infos[i]
			if len(in.Refusals) == 0 {
				fmt.Fprintln(stdout, "  nothing refused so far")
			}
			for _, r := range in.Refusals {
				what := r.Path
				if r.Dest != "" && what == "" {
					what = r.Dest
				}
				if r.Syscall != "" && what == "" {
					what = r.Syscall
				}
				line := fmt.Sprintf("  %s %s %s", r.Time.Local().Format("15:04:05"), r.Op, shown(what))
				if r.Comm != "" {
					line += " by " + shown(r.Comm)
				}
				if r.Reason != "" {
					line += ": " + shown(r.Reason)
				}
				if r.Allow != "" {
					line += "; to allow: " + shown(r.Allow)
				}
				fmt.Fprintln(stdout, line)
			}
		}
	}
	return nil
}

func addWhyFlags(f *pflag.FlagSet) (session *string, asJSON *bool) {
	return f.String("session", "", "ask only the session whose id starts with `ID` (or whose pid it is)"),
		f.Bool("json", false, "print the answers as JSON, for tools")
}

// shown is s as printed to the user's terminal: quoted, escapes and all,
// when it holds anything but printable text. Paths and command names in a
// session's state may be the server's or the client's choice, and a
// newline or an escape sequence in them must not forge a line or drive
// the terminal.
func shown(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) < 0 {
		return s
	}
	return strconv.QuoteToGraphic(s)
}

// hostPath is p as the sessions know their roots: absolute, with the
// symlinks of its longest existing part resolved (what does not exist yet
// is kept as written).
func hostPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	rest := ""
	for d := p; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest)
		}
		if d == "/" || d == "." {
			return p
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}
