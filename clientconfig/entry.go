package clientconfig

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// entry is one server entry as the shared logic sees it: decoded values for
// deciding, and an editor that changes the file's bytes.
type entry struct {
	name       string
	remote     string // non-empty: why this is not a stdio server
	bad        string // non-empty: why this entry cannot be handled
	hasCommand bool
	command    string
	hasArgs    bool
	args       []string
	env        []string // names, sorted, deduplicated
	note       string   // said with a successful wrap
	// netFlags are the rootfs flags the client's own sandbox's network
	// rules become (sandbox.go); sandbox says that sandbox is on.
	netFlags []string
	sandbox  bool
	ed       editor
}

// sandboxer is an editor whose format has a client sandbox rootfs
// replaces (VS Code's): setSandbox turns it off or back on.
type sandboxer interface {
	setSandbox(on bool) bool
}

// editor changes one entry in place. Raw values are literals in the file's
// syntax (quotes and escapes included).
type editor interface {
	commandRaw() string
	setCommandRaw(raw string)
	argRaw(i int) string
	// spliceArgs replaces the args elements [i,j) with raw; the first
	// element written takes over the leading whitespace of element i.
	spliceArgs(i, j int, raw []string)
	// addArgs adds an args array holding raw, right after the command.
	addArgs(raw []string)
	// dropAddedArgs removes an empty args array if it has exactly the form
	// and place addArgs gives it. It is called after spliceArgs emptied it.
	dropAddedArgs()
	// quote makes a literal of s.
	quote(s string) string
}

// commandMover is an editor whose format keeps comments on lines of their
// own or at a line's end (TOML), where the comments describing the command
// must move with it. Each method reports false when it did nothing, and
// the editor's other methods then do the move.
type commandMover interface {
	// wrapCommand puts the quoted front and then the command's literal at
	// the front of args (made when absent) and writes rootfs, quoted, as
	// the command.
	wrapCommand(front []string, rootfs string) bool
	// unwrapCommand makes the literal args[cmd] the command again and
	// removes args[:cmd+1], and args when wrapCommand added it.
	unwrapCommand(cmd int) bool
}

// wrappedShape recognises "run [--setenv NAME]... [NETWORK FLAGS] -- CMD
// [ARG...]" (the network flags: --net-only LIST, --deny-net HOST,
// --no-network, from a client's sandbox) and returns the names and the
// index of CMD.
func wrappedShape(args []string) (setenv []string, cmd int, ok bool) {
	if len(args) < 3 || args[0] != "run" {
		return nil, 0, false
	}
	i := 1
flags:
	for i+1 < len(args) {
		switch {
		case args[i] == "--setenv" && validEnvName(args[i+1]):
			setenv = append(setenv, args[i+1])
			i += 2
		case args[i] == "--net-only" || args[i] == "--deny-net":
			i += 2
		case args[i] == "--no-network":
			i++
		default:
			break flags
		}
	}
	if i+1 < len(args) && args[i] == "--" {
		return setenv, i + 1, true
	}
	return nil, 0, false
}

// bare reports whether command is a name to look up on PATH rather than a
// path.
func bare(command string) bool {
	return command != "" && !strings.Contains(command, "/")
}

func validEnvName(s string) bool {
	return s != "" && !strings.ContainsAny(s, "=\x00")
}

func (e *entry) wrap(opt Options) Change {
	c := Change{Server: e.name}
	switch {
	case e.remote != "":
		c.Action, c.Detail = Skipped, e.remote+": rootfs wraps stdio servers only"
		return c
	case e.bad != "":
		c.Action, c.Detail = Skipped, e.bad
		return c
	case !e.hasCommand:
		c.Action, c.Detail = Skipped, "no command"
		return c
	}
	if isRootfs(e.command, opt) {
		setenv, cmd, ok := wrappedShape(e.args)
		if !ok {
			c.Action, c.Detail = Skipped, "already runs rootfs, with arguments of its own"
			return c
		}
		var missing []string
		for _, n := range e.env {
			if !slices.Contains(setenv, n) {
				missing = append(missing, "--setenv", n)
			}
		}
		var did []string
		if len(missing) > 0 {
			e.ed.spliceArgs(cmd-1, cmd-1, e.quoteAll(missing))
			did = append(did, "--setenv added for new env names")
		}
		// An absolute path names a file on one machine; where the caller
		// asks for a command looked up on PATH (a shared file), an entry an
		// earlier wrap wrote with this machine's path gets it too.
		if bare(opt.Rootfs) && filepath.IsAbs(e.command) && filepath.Base(e.command) == opt.Rootfs {
			e.ed.setCommandRaw(e.ed.quote(opt.Rootfs))
			did = append(did, fmt.Sprintf("runs %q from PATH instead of %s", opt.Rootfs, e.command))
		}
		if len(did) == 0 {
			c.Action = AlreadyWrapped
			return c
		}
		c.Action, c.Detail = Updated, strings.Join(did, "; ")
		return c
	}
	front := []string{"run"}
	for _, n := range e.env {
		front = append(front, "--setenv", n)
	}
	front = append(front, e.netFlags...)
	front = append(front, "--")
	if m, ok := e.ed.(commandMover); !ok || !m.wrapCommand(e.quoteAll(front), e.ed.quote(opt.Rootfs)) {
		raw := append(e.quoteAll(front), e.ed.commandRaw())
		if e.hasArgs {
			e.ed.spliceArgs(0, 0, raw)
		} else {
			e.ed.addArgs(raw)
		}
		e.ed.setCommandRaw(e.ed.quote(opt.Rootfs))
	}
	if e.sandbox {
		if sb, ok := e.ed.(sandboxer); ok && sb.setSandbox(false) {
			note := "VS Code's own sandbox is off: rootfs replaces it, with its network rules as " + strings.Join(e.netFlags, " ")
			if e.note != "" {
				note = e.note + "; " + note
			}
			e.note = note
		}
	}
	c.Action, c.Detail, c.Command, c.Args = Wrapped, e.note, e.command, e.args
	return c
}

func (e *entry) unwrap(opt Options) Change {
	c := Change{Server: e.name}
	switch {
	case e.remote != "":
		c.Action, c.Detail = Skipped, e.remote
		return c
	case e.bad != "":
		c.Action, c.Detail = Skipped, e.bad
		return c
	case !e.hasCommand || !isRootfs(e.command, opt):
		c.Action = NotWrapped
		return c
	}
	_, cmd, ok := wrappedShape(e.args)
	if !ok {
		c.Action, c.Detail = Skipped, "runs rootfs with arguments rootfs wrap does not write; edit it by hand"
		return c
	}
	if m, ok := e.ed.(commandMover); !ok || !m.unwrapCommand(cmd) {
		raw := e.ed.argRaw(cmd)
		e.ed.spliceArgs(0, cmd+1, nil)
		if cmd+1 == len(e.args) {
			e.ed.dropAddedArgs()
		}
		e.ed.setCommandRaw(raw)
	}
	if sb, ok := e.ed.(sandboxer); ok {
		sb.setSandbox(true)
	}
	c.Action = Unwrapped
	return c
}

func (e *entry) quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = e.ed.quote(s)
	}
	return out
}

func sortedNames(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
}

// jsonQuote is a JSON string literal of s; it is a valid TOML basic string
// too (JSON's escapes are a subset of TOML's).
func jsonQuote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
