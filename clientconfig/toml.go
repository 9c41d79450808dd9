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
	name    string
	cmd     *tomlValue
	cmdKV   span
	inline  bool // command is a key of an inline table
	args    []tomlValue
	argsKV  span
	hasArgs bool
	argsBad bool
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
	var p unstable.Parser
	p.Reset(data)
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
		}
	}
	if err := p.Error(); err != nil {
		return nil, err
	}
	return order, nil
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
		ed.add(els[0].raw.off, els[len(els)-1].raw.end, joined)
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

// argsSep is what addArgs puts between the command and the args it adds.
func (ed *tomlEditor) argsSep() string {
	if ed.s.inline {
		return ", "
	}
	return "\n"
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
