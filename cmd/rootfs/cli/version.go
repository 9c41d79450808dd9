package cli

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Version describes this build from the information the Go toolchain
// embedded in it (debug.ReadBuildInfo): the module version ("v1.2.0", a
// pseudo-version, or "(devel)" for a build without a tag), then the VCS
// revision, its time and whether the tree had uncommitted changes, then
// the Go version. A build without VCS information (go build -buildvcs=false,
// or "go install module@version", which builds from the module proxy)
// says "revision unknown"; the module version then names the source.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module information)"
	}
	return describe(bi)
}

func describe(bi *debug.BuildInfo) string {
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, when string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var b strings.Builder
	b.WriteString(version)
	if rev == "" {
		b.WriteString(" (revision unknown")
	} else {
		fmt.Fprintf(&b, " (revision %s", rev)
		if when != "" {
			fmt.Fprintf(&b, " of %s", when)
		}
		if modified {
			b.WriteString(", modified")
		}
	}
	fmt.Fprintf(&b, ", %s)", bi.GoVersion)
	return b.String()
}
