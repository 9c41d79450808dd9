package instance

import (
	"path/filepath"
	"strings"
)

// Verdict says whether the server of a session can see a path, and
// because of what; or, when it cannot, what would show it.
type Verdict struct {
	Path    string `json:"path"`
	Visible bool   `json:"visible"`
	// Because names what shows it: "root /home/me/proj (client)",
	// "runtime /usr (read-only)", "auto-bind /opt/node/bin (interpreter)",
	// "--ro-bind ~/.npm", "private /tmp".
	Because  string `json:"because,omitempty"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// Allow is the flag that would show it, when it is not visible.
	Allow string `json:"allow,omitempty"`
}

// under reports whether p is d or below it.
func under(p, d string) bool {
	return d == "/" || p == d || strings.HasPrefix(p, d+"/")
}

// Explain says whether the server of info can see p (a path as the server
// sees it, which in host layout is the host path) and because of what.
// The deepest match wins, as mounts do.
func Explain(info Info, p string) Verdict {
	p = filepath.Clean(p)
	v := Verdict{Path: p}
	best := -1
	take := func(at, because string, ro bool) {
		if n := len(at); under(p, at) && n > best {
			best, v.Visible, v.Because, v.ReadOnly = n, true, because, ro
		}
	}
	for _, r := range info.Roots {
		what := "root " + r.Host
		if r.Path != r.Host {
			what += " (at " + r.Path + ")"
		}
		if r.Source != "" {
			what += ", from " + r.Source
		}
		take(r.Path, what, r.ReadOnly)
	}
	for _, d := range info.Runtime {
		take(d, "runtime "+d+" (read-only)", true)
	}
	for _, d := range info.Private {
		take(d, "the sandbox's own "+d+" (not the host's)", false)
	}
	for _, b := range info.Binds {
		what := b.Flag + " " + b.Host
		if b.Reason != "" {
			what = "auto-bind " + b.Host + " (" + b.Reason + ")"
		}
		take(b.Path, what, b.ReadOnly)
	}
	if !v.Visible {
		v.Allow = "--root " + p + " (read-write, a root the server is told of) or --ro-bind " + p + " (read-only)"
		if info.Layout == "flat" {
			v.Allow = "--root DIR, seen as /" + filepath.Base(p)
		}
	}
	return v
}
