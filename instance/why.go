package instance

import (
	"path/filepath"
	"strings"
)

// Verdict says whether the server of a session can see a host path, and
// because of what; or, when it cannot, what would show it.
type Verdict struct {
	Path    string `json:"path"`
	Visible bool   `json:"visible"`
	// At is where the server sees it, when that is not Path (flat
	// layout, a bind to another place).
	At string `json:"at,omitempty"`
	// Because names what shows it: "root /home/me/proj, from client",
	// "runtime /usr (read-only)", "auto-bind /opt/node/bin (interpreter)",
	// "--ro-bind /home/me/.npm"; or, for a path that is not visible, why
	// not when there is more to say than "nothing shows it".
	Because  string `json:"because,omitempty"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// Allow is the flag that would show it, when it is not visible.
	Allow string `json:"allow,omitempty"`
}

// under reports whether p is d or below it.
func under(p, d string) bool {
	return d == "/" || p == d || strings.HasPrefix(p, d+"/")
}

// Explain says whether the server of info can see the host path p and
// because of what. The deepest match wins, as mounts do.
func Explain(info Info, p string) Verdict {
	p = filepath.Clean(p)
	v := Verdict{Path: p}
	best := -1
	take := func(host, inside, because string, ro bool) {
		if n := len(host); under(p, host) && n > best {
			best, v.Visible, v.Because, v.ReadOnly = n, true, because, ro
			v.At = ""
			if inside != host {
				v.At = inside + strings.TrimPrefix(p, host)
			}
		}
	}
	for _, r := range info.Roots {
		what := "root " + r.Host
		if r.Source != "" {
			what += ", from " + r.Source
		}
		take(r.Host, r.Path, what, r.ReadOnly)
	}
	for _, d := range info.Runtime {
		take(d, d, "runtime "+d+" (read-only)", true)
	}
	for _, b := range info.Binds {
		what := b.Flag + " " + b.Host
		if b.Reason != "" {
			what = "auto-bind " + b.Host + " (" + b.Reason + ")"
		}
		take(b.Host, b.Path, what, b.ReadOnly)
	}
	if v.Visible {
		return v
	}
	for _, d := range info.Private {
		if under(p, d) {
			v.Because = "the sandbox has its own " + d + ", which does not show the host's"
		}
	}
	v.Allow = "--root " + p + " (read-write, a root the server is told of) or --ro-bind " + p + " (read-only)"
	if info.Layout == "flat" {
		v.Allow = "--root " + p + ", seen as /" + filepath.Base(p)
	}
	return v
}
