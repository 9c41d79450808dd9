package clientconfig

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/tailscale/hujson"
)

func rewriteJSON(data []byte, pointers []string, op Op, opt Options) ([]byte, []Change, error) {
	root, err := hujson.Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("not valid JSON (%v); fix the file and run again", err)
	}
	var changes []Change
	for _, p := range pointers {
		segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
		walkJSON(&root, segs, nil, func(servers *hujson.Object, at []string) {
			for i := range servers.Members {
				m := &servers.Members[i]
				name := qualify(m.Name.Value.(hujson.Literal).String(), at)
				obj, ok := m.Value.Value.(*hujson.Object)
				if !ok {
					changes = append(changes, Change{Server: name, Action: Skipped, Detail: "not an object"})
					continue
				}
				e := jsonEntry(name, obj)
				if op == Wrap {
					changes = append(changes, e.wrap(opt))
				} else {
					changes = append(changes, e.unwrap(opt))
				}
			}
		})
	}
	return root.Pack(), changes, nil
}

// walkJSON calls f for each object that the pointer segments segs lead to
// from v; "*" matches every member. at are the segments walked so far, with
// "*" replaced by the member's name.
func walkJSON(v *hujson.Value, segs, at []string, f func(*hujson.Object, []string)) {
	obj, ok := v.Value.(*hujson.Object)
	if !ok {
		return
	}
	if len(segs) == 0 {
		f(obj, at)
		return
	}
	for i := range obj.Members {
		name := obj.Members[i].Name.Value.(hujson.Literal).String()
		if segs[0] == "*" || segs[0] == name {
			walkJSON(&obj.Members[i].Value, segs[1:], append(at[:len(at):len(at)], name), f)
		}
	}
}

func jsonMember(obj *hujson.Object, name string) int {
	for i, m := range obj.Members {
		if m.Name.Value.(hujson.Literal).String() == name {
			return i
		}
	}
	return -1
}

func jsonString(v hujson.Value) (string, bool) {
	lit, ok := v.Value.(hujson.Literal)
	if !ok || lit.Kind() != '"' {
		return "", false
	}
	return lit.String(), true
}

func jsonEntry(name string, obj *hujson.Object) *entry {
	ed := &jsonEditor{obj: obj, cmd: jsonMember(obj, "command"), args: jsonMember(obj, "args")}
	e := &entry{name: name, ed: ed}
	for _, k := range []string{"url", "httpUrl", "serverUrl"} {
		if jsonMember(obj, k) >= 0 {
			e.remote = "a remote server (" + k + ")"
		}
	}
	if i := jsonMember(obj, "type"); i >= 0 {
		if t, _ := jsonString(obj.Members[i].Value); t != "stdio" {
			e.remote = fmt.Sprintf("a remote server (type %q)", t)
		}
	}
	if jsonMember(obj, "envFile") >= 0 {
		e.note = "its envFile's variables reach rootfs but not the server: add \"--setenv\", \"NAME\" after \"run\" for each"
	}
	var bad string
	e.sandbox, e.netFlags, bad = sandboxNet(obj)
	if bad != "" {
		e.bad = bad
	}
	if ed.cmd >= 0 {
		e.hasCommand = true
		var ok bool
		if e.command, ok = jsonString(obj.Members[ed.cmd].Value); !ok {
			e.bad = "command is not a string"
		}
	}
	if ed.args >= 0 {
		e.hasArgs = true
		arr, ok := obj.Members[ed.args].Value.Value.(*hujson.Array)
		if !ok {
			e.bad = "args is not an array"
		} else {
			for _, el := range arr.Elements {
				s, ok := jsonString(el)
				if !ok {
					e.bad = "args holds a value that is not a string"
					break
				}
				e.args = append(e.args, s)
			}
		}
	}
	if i := jsonMember(obj, "env"); i >= 0 {
		if env, ok := obj.Members[i].Value.Value.(*hujson.Object); ok {
			for _, m := range env.Members {
				n := m.Name.Value.(hujson.Literal).String()
				if !validEnvName(n) {
					e.bad = fmt.Sprintf("env name %q cannot be passed on", n)
				}
				e.env = append(e.env, n)
			}
		}
		e.env = sortedNames(e.env)
	}
	return e
}

// jsonEditor edits an entry in hujson's tree, which keeps every byte of
// whitespace and comments it does not touch.
type jsonEditor struct {
	obj       *hujson.Object
	cmd, args int // member indexes, -1 if absent
}

func (ed *jsonEditor) quote(s string) string { return string(hujson.String(s)) }

func (ed *jsonEditor) commandRaw() string {
	return string(ed.obj.Members[ed.cmd].Value.Value.(hujson.Literal))
}

func (ed *jsonEditor) setCommandRaw(raw string) {
	ed.obj.Members[ed.cmd].Value.Value = hujson.Literal(raw)
}

func (ed *jsonEditor) array() *hujson.Array {
	return ed.obj.Members[ed.args].Value.Value.(*hujson.Array)
}

func (ed *jsonEditor) argRaw(i int) string {
	return string(ed.array().Elements[i].Value.(hujson.Literal))
}

func (ed *jsonEditor) spliceArgs(i, j int, raw []string) {
	arr := ed.array()
	els := arr.Elements
	var lead hujson.Extra
	haveLead := i < len(els)
	if haveLead {
		lead = els[i].BeforeExtra
	}
	news := make([]hujson.Value, len(raw))
	for k, r := range raw {
		news[k] = hujson.Value{BeforeExtra: hujson.Extra(" "), Value: hujson.Literal(r)}
	}
	out := make([]hujson.Value, 0, len(els)-(j-i)+len(raw))
	out = append(out, els[:i]...)
	out = append(out, news...)
	out = append(out, els[j:]...)
	if i < len(out) {
		switch {
		case haveLead:
			out[i].BeforeExtra = lead
		case i == 0:
			out[0].BeforeExtra = nil
		}
		if len(news) > 0 && i+len(news) < len(out) {
			out[i+len(news)].BeforeExtra = hujson.Extra(" ")
		}
	}
	arr.Elements = out
}

// addedArgs is the args member addArgs writes: on the command's line, right
// after it, laid out as the command is. The same line tells it apart from
// an "args": [] a person wrote on a line of its own.
func (ed *jsonEditor) addedArgs(raw []string) hujson.ObjectMember {
	cmd := ed.obj.Members[ed.cmd]
	arr := &hujson.Array{}
	for k, r := range raw {
		var b hujson.Extra
		if k > 0 {
			b = hujson.Extra(" ")
		}
		arr.Elements = append(arr.Elements, hujson.Value{BeforeExtra: b, Value: hujson.Literal(r)})
	}
	return hujson.ObjectMember{
		Name:  hujson.Value{BeforeExtra: hujson.Extra(" "), Value: hujson.String("args"), AfterExtra: bytes.Clone(cmd.Name.AfterExtra)},
		Value: hujson.Value{BeforeExtra: bytes.Clone(cmd.Value.BeforeExtra), Value: arr},
	}
}

func (ed *jsonEditor) addArgs(raw []string) {
	m := ed.addedArgs(raw)
	if ed.cmd == len(ed.obj.Members)-1 {
		// The last member carries the trailing comma, if any.
		cmd := &ed.obj.Members[ed.cmd].Value
		m.Value.AfterExtra, cmd.AfterExtra = cmd.AfterExtra, nil
	}
	ms := ed.obj.Members
	ms = append(ms[:ed.cmd+1:ed.cmd+1], append([]hujson.ObjectMember{m}, ms[ed.cmd+1:]...)...)
	ed.obj.Members = ms
	ed.args = ed.cmd + 1
}

func (ed *jsonEditor) dropAddedArgs() {
	if ed.args != ed.cmd+1 {
		return
	}
	got := ed.obj.Members[ed.args]
	want := ed.addedArgs(nil)
	arr, ok := got.Value.Value.(*hujson.Array)
	if !ok || len(arr.Elements) != 0 || len(arr.AfterExtra) != 0 ||
		len(ed.obj.Members[ed.cmd].Value.AfterExtra) != 0 ||
		!bytes.Equal(got.Name.BeforeExtra, want.Name.BeforeExtra) ||
		got.Name.Value.(hujson.Literal).String() != "args" || !bytes.Equal(got.Name.Value.(hujson.Literal), hujson.String("args")) ||
		!bytes.Equal(got.Name.AfterExtra, want.Name.AfterExtra) ||
		!bytes.Equal(got.Value.BeforeExtra, want.Value.BeforeExtra) ||
		len(got.Value.AfterExtra) != 0 {
		return
	}
	if ed.args == len(ed.obj.Members)-1 {
		ed.obj.Members[ed.cmd].Value.AfterExtra = got.Value.AfterExtra // the trailing comma, if any
	}
	ed.obj.Members = append(ed.obj.Members[:ed.args:ed.args], ed.obj.Members[ed.args+1:]...)
	ed.args = -1
}
