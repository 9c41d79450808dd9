package cli

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// version is the version a package of rootfs carries, set when it is
// linked:
//
//	go build -ldflags "-X github.com/rootfs-dev/rootfs/cmd/rootfs/cli.version=1.2.0"
//
// scripts/package and .goreleaser.yaml set it to the package's own version
// in both the binary and the build that writes the man page, so that
// --version, the man page and the package say the same. Empty in other
// builds, which use the module version.
var version string

// Version describes this build: the version it was linked with (version),
// else the module version the Go toolchain embedded (debug.ReadBuildInfo:
// "v1.2.0", a pseudo-version, or "(devel)" for a build without a tag), then
// the VCS revision, its time and whether the tree had uncommitted changes,
// then the Go version. A build without VCS information (go build
// -buildvcs=false, or "go install module@version", which builds from the
// module proxy) says "revision unknown"; the version then names the
// source.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if version != "" {
			return version
		}
		return "(unknown: built without module information)"
	}
	return describe(bi, version)
}

// describe is Version for bi, with linked (when not empty) in place of the
// module version.
func describe(bi *debug.BuildInfo, linked string) string {
	version := linked
	if version == "" {
		version = bi.Main.Version
	}
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
