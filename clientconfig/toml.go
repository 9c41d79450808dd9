package clientconfig

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/aymanbagabas/go-udiff"
	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// span is a byte range [off, end) of the file.
type span struct{ off, end int }

func rangeSpan(r unstable.Range) span {
	return span{int(r.Offset), int(r.Offset + r.Length)}
}

// tomlServer is what the parser located for one [mcp_servers.NAME].
type tomlServer struct {
	name   string
	cmd    *tomlValue
	cmdKV  span
	inline bool // command is a key of an inline table
	// above holds the whole comment lines right above the command's line
	// (no blank line between), trail the comment at the end of that line
	// with the blanks before it ({cmd end, cmd end} when none): the
	// comments that describe the command, moved with it (see
	// tomlEditor.wrapCommand). Both are empty for an inline table.
	above, trail span
	args         []tomlValue
	argsKV       span
	hasArgs      bool
	argsBad      bool
}

type tomlValue struct {
	raw  span
	data string
	str  bool
}

// rewriteTOML patches Codex's config.toml: go-toml's parser finds the byte
// spans of each server's command and args, go-toml decodes the rest (url,
// env), and the edits replace those spans only.
func rewriteTOML(data []byte, op Op, opt Options) ([]byte, []Change, error) {
	var doc struct {
		Servers map[string]map[string]any `toml:"mcp_servers"`
	}
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("not valid TOML (%v); fix the file and run again", err)
	}
	servers, err := locateTOML(data)
	if err != nil {
		return nil, nil, fmt.Errorf("not valid TOML (%v); fix the file and run again", err)
	}
	var edits []udiff.Edit
	var changes []Change
	for _, s := range servers {
		decoded := doc.Servers[s.name]
		ed := &tomlEditor{data: data, s: s, edits: &edits}
		e := &entry{name: s.name, ed: ed}
		if _, ok := decoded["url"]; ok {
			e.remote = "a remote server (url)"
		}
		if s.cmd != nil {
			e.hasCommand = true
			e.command = s.cmd.data
			if !s.cmd.str {
				e.bad = "command is not a string"
			}
		}
		if s.hasArgs {
			e.hasArgs = true
			if s.argsBad {
				e.bad = "args is not an array of strings"
			}
			for _, a := range s.args {
				if !a.str {
					e.bad = "args holds a value that is not a string"
				}
				e.args = append(e.args, a.data)
			}
		}
		if env, ok := decoded["env"].(map[string]any); ok {
			for n := range env {
				e.env = append(e.env, n)
			}
		}
		// Codex forwards the variables named in env_vars from its own
		// environment; they must be passed on into the sandbox too.
		if vars, ok := decoded["env_vars"].([]any); ok {
			var names []string
			for _, v := range vars {
				if n, ok := v.(string); ok {
					names = append(names, n)
				}
			}
			e.env = append(e.env, names...)
			if len(names) > 0 {
				// Codex skips an env_vars name it does not have; rootfs run
				// refuses a --setenv NAME that is unset.
				e.note = fmt.Sprintf("env_vars: the server now fails to start unless %s is set where Codex runs", strings.Join(names, ", "))
			}
		}
		for _, n := range e.env {
			if !validEnvName(n) {
				e.bad = fmt.Sprintf("env name %q cannot be passed on", n)
			}
		}
		e.env = sortedNames(e.env)
		if op == Wrap {
			changes = append(changes, e.wrap(opt))
		} else {
			changes = append(changes, e.unwrap(opt))
		}
	}
	out, err := udiff.ApplyBytes(data, edits)
	if err != nil {
		return nil, nil, fmt.Errorf("internal error: overlapping edits: %v", err)
	}
	return out, changes, nil
}

// locateTOML walks the document's expressions and returns, in order of first
// appearance, each mcp_servers.NAME with the spans of its command and args.
func locateTOML(data []byte) ([]*tomlServer, error) {
	// Comments are kept so that those describing a command can move with
	// it; standalone holds where each comment on a line of its own starts.
	p := unstable.Parser{KeepComments: true}
	p.Reset(data)
	standalone := map[int]bool{}
	var table []string
	var order []*tomlServer
	byName := map[string]*tomlServer{}
	server := func(name string) *tomlServer {
		s := byName[name]
		if s == nil {
			s = &tomlServer{name: name}
			byName[name] = s
			order = append(order, s)
		}
		return s
	}
	var visit func(path []string, kv *unstable.Node, inline bool)
	visit = func(path []string, kv *unstable.Node, inline bool) {
		v := kv.Value()
		if v.Kind == unstable.InlineTable {
			it := v.Children()
			for it.Next() {
				if c := it.Node(); c.Kind == unstable.KeyValue {
					visit(append(path[:len(path):len(path)], keyOf(c.Key())...), c, true)
				}
			}
			return
		}
		if len(path) != 3 || path[0] != "mcp_servers" {
			return
		}
		s := server(path[1])
		switch path[2] {
		case "command":
			s.cmd = &tomlValue{raw: rangeSpan(v.Raw), data: string(v.Data), str: v.Kind == unstable.String}
			s.cmdKV = rangeSpan(kv.Raw)
			s.inline = inline
			s.trail = span{s.cmd.raw.end, s.cmd.raw.end}
			if c := kv.Next(); !inline && c != nil && c.Valid() && c.Kind == unstable.Comment {
				s.trail.end = rangeSpan(c.Raw).end
			}
		case "args":
			s.hasArgs = true
			s.argsKV = rangeSpan(kv.Raw)
			if v.Kind != unstable.Array {
				s.argsBad = true
				return
			}
			it := v.Children()
			for it.Next() {
				c := it.Node()
				if c.Kind == unstable.Comment {
					continue
				}
				s.args = append(s.args, tomlValue{raw: rangeSpan(c.Raw), data: string(c.Data), str: c.Kind == unstable.String})
			}
		}
	}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			table = keyOf(e.Key())
		case unstable.ArrayTable:
			table = []string{"\x00array"} // servers are tables, not arrays of tables
		case unstable.KeyValue:
			visit(append(table[:len(table):len(table)], keyOf(e.Key())...), e, false)
		case unstable.Comment:
			standalone[int(e.Raw.Offset)] = true
		}
	}
	if err := p.Error(); err != nil {
		return nil, err
	}
	for _, s := range order {
		if s.cmd != nil && !s.inline {
			s.above = commentsAbove(data, s.cmdKV.off, standalone)
		}
	}
	return order, nil
}

// lineStart is the offset of the start of the line holding pos.
func lineStart(data []byte, pos int) int {
	for pos > 0 && data[pos-1] != '\n' {
		pos--
	}
	return pos
}

// lineEnding is the end of the line holding pos: "\r\n" or "\n" (also at
// the end of a file without one).
func lineEnding(data []byte, pos int) string {
	if i := bytes.IndexByte(data[pos:], '\n'); i > 0 && data[pos+i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// commentsAbove returns the span of the comment lines right above the line
// of the key/value starting at kv: lines indented at least as that line
// whose first non-blank is a comment the parser found on a line of its
// own (so never a line of a multi-line string), up to a blank line or
// anything else.
func commentsAbove(data []byte, kv int, standalone map[int]bool) span {
	start := lineStart(data, kv)
	indent := data[start:kv]
	if len(bytes.Trim(indent, " \t")) != 0 {
		return span{start, start}
	}
	end := start
	for start > 0 {
		prev := lineStart(data, start-1)
		hash := prev + len(data[prev:start]) - len(bytes.TrimLeft(data[prev:start], " \t"))
		if !standalone[hash] || !bytes.HasPrefix(data[prev:start], indent) {
			break
		}
		start = prev
	}
	return span{start, end}
}

// cmdIndent is the indentation of the command's line.
func (ed *tomlEditor) cmdIndent() string {
	return string(ed.data[lineStart(ed.data, ed.s.cmdKV.off):ed.s.cmdKV.off])
}

func keyOf(it unstable.Iterator) []string {
	var out []string
	for it.Next() {
		out = append(out, string(it.Node().Data))
	}
	return out
}

// tomlEditor records byte edits against the original document.
type tomlEditor struct {
	data  []byte
	s     *tomlServer
	edits *[]udiff.Edit
}

func (ed *tomlEditor) add(off, end int, s string) {
	*ed.edits = append(*ed.edits, udiff.Edit{Start: off, End: end, New: s})
}

func (ed *tomlEditor) quote(s string) string { return jsonQuote(s) }

func (ed *tomlEditor) commandRaw() string {
	return string(ed.data[ed.s.cmd.raw.off:ed.s.cmd.raw.end])
}

func (ed *tomlEditor) setCommandRaw(raw string) {
	ed.add(ed.s.cmd.raw.off, ed.s.cmd.raw.end, raw)
}

func (ed *tomlEditor) argRaw(i int) string {
	a := ed.s.args[i].raw
	return string(ed.data[a.off:a.end])
}

func (ed *tomlEditor) spliceArgs(i, j int, raw []string) {
	els := ed.s.args
	joined := strings.Join(raw, ", ")
	switch {
	case j < len(els):
		if len(raw) > 0 {
			joined += ", "
		}
		ed.add(els[i].raw.off, els[j].raw.off, joined)
	case len(els) == 0: // insert before the closing bracket, which ends the key/value
		pos := ed.s.argsKV.end - 1
		ed.add(pos, pos, joined)
	case i == 0:
		end := els[len(els)-1].raw.end
		if len(raw) == 0 {
			// Every element goes: so does a trailing comma, since [,]
			// is not TOML.
			rest := ed.data[end:]
			if t := bytes.TrimLeft(rest, " \t\r\n"); len(t) > 0 && t[0] == ',' {
				end += len(rest) - len(t) + 1
			}
		}
		ed.add(els[0].raw.off, end, joined)
	default:
		if len(raw) > 0 {
			joined = ", " + joined
		}
		ed.add(els[i-1].raw.end, els[len(els)-1].raw.end, joined)
	}
}

// addedMark ends the args line addArgs writes into a table, so that unwrap
// can tell it from an args = [] a person wrote.
const addedMark = " # added by rootfs wrap"

// argsSep is what addArgs puts between the command and the args it adds:
// in a table, the end of the command's line, so that the args line ends
// as the file's lines do.
func (ed *tomlEditor) argsSep() string {
	if ed.s.inline {
		return ", "
	}
	return lineEnding(ed.data, ed.s.cmdKV.end)
}

func (ed *tomlEditor) addArgs(raw []string) {
	end := ed.s.cmdKV.end
	mark := addedMark
	if ed.s.inline {
		mark = "" // an inline table ends on its line: no room for a comment
	}
	ed.add(end, end, ed.argsSep()+"args = ["+strings.Join(raw, ", ")+"]"+mark)
}

func (ed *tomlEditor) dropAddedArgs() {
	s := ed.s
	sep := ed.argsSep()
	if s.argsKV.off != s.cmdKV.end+len(sep) || string(ed.data[s.cmdKV.end:s.argsKV.off]) != sep {
		return
	}
	var raws []string
	for i := range s.args {
		raws = append(raws, ed.argRaw(i))
	}
	if string(ed.data[s.argsKV.off:s.argsKV.end]) != "args = ["+strings.Join(raws, ", ")+"]" {
		return
	}
	end := s.argsKV.end
	if !s.inline {
		if !bytes.HasPrefix(ed.data[end:], []byte(addedMark)) {
			return
		}
		end += len(addedMark)
	}
	// The whole key/value goes, so the splice inside it is dropped.
	*ed.edits = slices.DeleteFunc(*ed.edits, func(e udiff.Edit) bool {
		return e.Start >= s.argsKV.off && e.End <= s.argsKV.end
	})
	ed.add(s.cmdKV.end, end, "")
}

// indentBefore is the indentation of array elements starting a line at
// pos: the blanks after the last line break right before pos, or two
// spaces when the element at pos does not start a line.
func (ed *tomlEditor) indentBefore(pos int) string {
	ws := ed.data[:pos]
	ws = ws[len(bytes.TrimRight(ws, " \t\r\n")):]
	if i := bytes.LastIndexByte(ws, '\n'); i >= 0 {
		return string(ws[i+1:])
	}
	return "  "
}

// wrapCommand is the wrap of a command that comments describe (see
// tomlServer.above): they move with its literal, which takes a line of its
// own in args, right after front:
//
//	# from npm                          command = "/usr/bin/rootfs"
//	command = "npx"  # pinned     =>    args = ["run", "--",
//	args = ["-y", "pkg"]                  # from npm
//	                                      "npx",  # pinned
//	                                      "-y", "pkg"]
//
// Each line in args starts with the elements' indentation (indentBefore)
// in place of the command line's. An args array it adds ends on
// a line of its own, with addedMark. It reports false, doing nothing, for
// a command without such comments or in an inline table, which has no
// room for them.
func (ed *tomlEditor) wrapCommand(front []string, rootfs string) bool {
	s := ed.s
	if s.inline || (s.above.off == s.above.end && s.trail.off == s.trail.end) {
		return false
	}
	nl := lineEnding(ed.data, s.cmd.raw.end)
	at, indent, next := -1, "  ", ""
	switch {
	case len(s.args) > 0:
		at = s.args[0].raw.off
		indent = ed.indentBefore(at)
		next = indent // the old first element starts the next line
	case s.hasArgs: // empty: before the closing bracket
		at = s.argsKV.end - 1
		indent = ed.indentBefore(at)
	}
	var b strings.Builder
	b.WriteString(strings.Join(front, ", ") + "," + nl)
	for _, line := range bytes.SplitAfter(ed.data[s.above.off:s.above.end], []byte("\n")) {
		if len(line) > 0 {
			b.WriteString(indent + strings.TrimPrefix(string(line), ed.cmdIndent()))
		}
	}
	b.WriteString(indent + ed.commandRaw() + "," + string(ed.data[s.trail.off:s.trail.end]) + nl + next)
	if s.above.off < s.above.end {
		ed.add(s.above.off, s.above.end, "")
	}
	if at >= 0 {
		ed.add(s.cmd.raw.off, s.trail.end, rootfs)
		ed.add(at, at, b.String())
	} else {
		ed.add(s.cmd.raw.off, s.cmd.raw.end, rootfs)
		ed.add(s.cmd.raw.end, s.trail.end, ed.argsSep()+"args = ["+b.String()+"]"+addedMark)
	}
	return true
}

// unwrapCommand undoes wrapCommand: when the gaps around the literal
// args[cmd] have exactly the form wrapCommand writes, the comment lines
// before it go back above the command's line, the comment after it back to
// the end of that line, and the args it added go. Otherwise it reports
// false, doing nothing.
func (ed *tomlEditor) unwrapCommand(cmd int) bool {
	s, els := ed.s, ed.s.args
	if s.inline || cmd < 1 || cmd >= len(els) {
		return false
	}
	indent := ed.indentBefore(els[0].raw.off)
	last := cmd+1 == len(els)
	end := s.argsKV.end - 1 // the closing bracket
	if !last {
		end = els[cmd+1].raw.off
	}
	before := string(ed.data[els[cmd-1].raw.end:els[cmd].raw.off])
	after := string(ed.data[els[cmd].raw.end:end])
	above, ok := movedAbove(before, indent, ed.cmdIndent())
	if !ok {
		return false
	}
	trail, ok := movedTrail(after, indent, last)
	if !ok {
		return false
	}
	if above != "" {
		ls := lineStart(ed.data, s.cmdKV.off)
		ed.add(ls, ls, above)
	}
	ed.add(s.cmd.raw.off, s.cmd.raw.end, ed.argRaw(cmd)+trail)
	sep := ed.argsSep()
	var raws []string
	for i := range cmd {
		raws = append(raws, ed.argRaw(i))
	}
	added := "args = [" + strings.Join(raws, ", ") + before + ed.argRaw(cmd) + after + "]"
	if last && s.argsKV.off == s.cmdKV.end+len(sep) && string(ed.data[s.cmdKV.end:s.argsKV.off]) == sep &&
		string(ed.data[s.argsKV.off:s.argsKV.end]) == added && bytes.HasPrefix(ed.data[s.argsKV.end:], []byte(addedMark)) {
		ed.add(s.cmdKV.end, s.argsKV.end+len(addedMark), "")
		return true
	}
	ed.add(els[0].raw.off, end, "")
	return true
}

// movedAbove parses the gap wrapCommand leaves between front and the
// literal: a comma, a line break, then comment lines and the literal's
// indentation, each line starting with indent. It returns the comment
// lines with cmdIndent in place of indent.
func movedAbove(gap, indent, cmdIndent string) (string, bool) {
	rest, ok := strings.CutPrefix(gap, ",")
	if !ok {
		return "", false
	}
	if rest, ok = strings.CutPrefix(rest, "\n"); !ok {
		if rest, ok = strings.CutPrefix(rest, "\r\n"); !ok {
			return "", false
		}
	}
	var above strings.Builder
	for rest != indent {
		line, ok := strings.CutPrefix(rest, indent)
		i := strings.IndexByte(line, '\n')
		if !ok || i < 0 || !strings.HasPrefix(strings.TrimLeft(line, " \t"), "#") {
			return "", false
		}
		above.WriteString(cmdIndent + line[:i+1])
		rest = line[i+1:]
	}
	return above.String(), true
}

// movedTrail parses the gap wrapCommand leaves after the literal: a comma,
// the comment (with the blanks before it) or nothing, a line break, and
// indent (nothing when the literal is the last element). It returns the
// comment with its blanks.
func movedTrail(gap, indent string, last bool) (string, bool) {
	rest, ok := strings.CutPrefix(gap, ",")
	i := strings.IndexByte(rest, '\n')
	if !ok || i < 0 {
		return "", false
	}
	trail := strings.TrimSuffix(rest[:i], "\r")
	if t := strings.TrimLeft(trail, " \t"); t != "" && !strings.HasPrefix(t, "#") {
		return "", false
	}
	if last {
		indent = ""
	}
	if rest[i+1:] != indent {
		return "", false
	}
	return trail, true
}
