package clientconfig

// VS Code's own MCP sandbox ("sandboxEnabled": true, with
// "sandbox": {"network": {"allowedDomains": [...], "deniedDomains": [...]}})
// wraps a stdio server in sandbox-runtime (bubblewrap, an HTTP/SOCKS proxy
// for the network). rootfs replaces it rather than running inside it:
// under bubblewrap rootfs has neither /dev/fuse nor the user namespaces it
// needs, and the proxy would leave a program that ignores proxy variables
// with no network at all. So wrap carries the network rules into rootfs's
// flags, with VS Code's meaning (a sandboxed server reaches nothing but
// allowedDomains; deniedDomains win), and turns VS Code's sandbox off with
// a comment that says so; unwrap turns it back on. The file-system part
// needs nothing: rootfs shows only the roots (the workspace folders) and
// what the command needs, where sandbox-runtime allows every read.

import (
	"fmt"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// sandboxMark follows the value wrap wrote for sandboxEnabled.
const sandboxMark = " /* rootfs wrap: was true; rootfs applies sandbox.network */"

// sandboxNet reads a VS Code entry's sandbox: whether it is on, and the
// rootfs flags its network rules become. An entry whose rules rootfs
// cannot take gets a reason.
func sandboxNet(obj *hujson.Object) (on bool, flags []string, bad string) {
	i := jsonMember(obj, "sandboxEnabled")
	if i < 0 {
		return false, nil, ""
	}
	lit, ok := obj.Members[i].Value.Value.(hujson.Literal)
	if !ok || lit.Kind() != 't' {
		return false, nil, ""
	}
	var allowed, denied []string
	if s := jsonMember(obj, "sandbox"); s >= 0 {
		if so, ok := obj.Members[s].Value.Value.(*hujson.Object); ok {
			if n := jsonMember(so, "network"); n >= 0 {
				if no, ok := so.Members[n].Value.Value.(*hujson.Object); ok {
					var err string
					if allowed, err = stringList(no, "allowedDomains"); err != "" {
						return true, nil, err
					}
					if denied, err = stringList(no, "deniedDomains"); err != "" {
						return true, nil, err
					}
				}
			}
		}
	}
	for _, d := range append(append([]string(nil), allowed...), denied...) {
		if _, err := netpolicy.ParseRule(d); err != nil {
			return true, nil, fmt.Sprintf("sandbox.network: %v; fix the domain, or wrap it by hand", err)
		}
	}
	if len(allowed) == 0 {
		// Sandboxed with no allowed domain: VS Code's sandbox gives no
		// network at all.
		return true, []string{"--no-network"}, ""
	}
	flags = []string{"--net-only", strings.Join(allowed, ",")}
	for _, d := range denied {
		flags = append(flags, "--deny-net", d)
	}
	return true, flags, ""
}

// stringList is the array of strings obj's member name holds.
func stringList(obj *hujson.Object, name string) ([]string, string) {
	i := jsonMember(obj, name)
	if i < 0 {
		return nil, ""
	}
	arr, ok := obj.Members[i].Value.Value.(*hujson.Array)
	if !ok {
		return nil, "sandbox.network." + name + " is not an array"
	}
	var out []string
	for _, el := range arr.Elements {
		s, ok := jsonString(el)
		if !ok {
			return nil, "sandbox.network." + name + " holds a value that is not a string"
		}
		out = append(out, s)
	}
	return out, ""
}

// setSandbox turns VS Code's sandbox off (wrap) or back on (unwrap, only
// where wrap turned it off), keeping every other byte.
func (ed *jsonEditor) setSandbox(on bool) bool {
	i := jsonMember(ed.obj, "sandboxEnabled")
	if i < 0 {
		return false
	}
	v := &ed.obj.Members[i].Value
	lit, ok := v.Value.(hujson.Literal)
	if !ok {
		return false
	}
	switch {
	case !on && lit.Kind() == 't':
		if i == len(ed.obj.Members)-1 && v.AfterExtra == nil {
			// The last member with no trailing comma: the comment goes
			// where the object's closing whitespace starts.
			v.Value = hujson.Literal("false")
			ed.obj.AfterExtra = append(hujson.Extra(sandboxMark), ed.obj.AfterExtra...)
			return true
		}
		v.Value = hujson.Literal("false")
		v.AfterExtra = append(hujson.Extra(sandboxMark), v.AfterExtra...)
		return true
	case on && lit.Kind() == 'f' && i == len(ed.obj.Members)-1 && v.AfterExtra == nil && strings.HasPrefix(string(ed.obj.AfterExtra), sandboxMark):
		v.Value = hujson.Literal("true")
		ed.obj.AfterExtra = ed.obj.AfterExtra[len(sandboxMark):]
		return true
	case on && lit.Kind() == 'f' && strings.HasPrefix(string(v.AfterExtra), sandboxMark):
		v.Value = hujson.Literal("true")
		v.AfterExtra = v.AfterExtra[len(sandboxMark):]
		if len(v.AfterExtra) == 0 {
			v.AfterExtra = nil // non-nil on a last member is a trailing comma
		}
		return true
	}
	return false
}
