package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// top is the repository's top directory, seen from this package.
const top = ".."

// TestPackageConfigsAgree: the local package (packaging/nfpm.yaml) and the
// release packages (.goreleaser.yaml) install the same files and depend on
// the same packages. Each file says "change both together"; this checks.
func TestPackageConfigsAgree(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(top, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	local, release := read("packaging/nfpm.yaml"), read(".goreleaser.yaml")
	dst := regexp.MustCompile(`(?m)^\s*dst: (/\S+)$`)
	all := func(re *regexp.Regexp, s string) []string {
		var out []string
		for _, m := range re.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return out
	}
	// goreleaser puts the binary in bindir; nfpm.yaml lists it.
	releaseFiles := append(all(dst, release), "/usr/bin/rootfs")
	slices.Sort(releaseFiles)
	if got := all(dst, local); !slices.Equal(got, releaseFiles) {
		t.Errorf("installed files differ:\n  packaging/nfpm.yaml: %q\n  .goreleaser.yaml:    %q", got, releaseFiles)
	}
	localDeps := all(regexp.MustCompile(`(?ms)^depends:\n((?:  - \S+\n)+)`), local)
	releaseDeps := all(regexp.MustCompile(`(?ms)^    dependencies:\n((?:      - \S+\n)+)`), release)
	norm := regexp.MustCompile(`\s*-\s*`)
	if len(localDeps) != 1 || len(releaseDeps) != 1 || norm.ReplaceAllString(localDeps[0], " ") != norm.ReplaceAllString(releaseDeps[0], " ") {
		t.Errorf("dependencies differ: %q vs %q", localDeps, releaseDeps)
	}
	if !regexp.MustCompile(`(?m)^\s+- fuse3$`).MatchString(local) {
		t.Errorf("packaging/nfpm.yaml does not depend on fuse3")
	}
}

// versionVar is the variable --version and the man page read the
// package's version from (cmd/rootfs/cli.version).
const versionVar = "github.com/rootfs-dev/rootfs/cmd/rootfs/cli.version"

// TestVersionLinkedEverywhere: both ways of packaging link the package's
// version into the binary and into the build that writes the man page, so
// the three say the same; TestPackageVersionAgrees checks a built package.
func TestVersionLinkedEverywhere(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(top, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	script := read("scripts/package")
	if !strings.Contains(script, `version_flag="-X `+versionVar+`=$version"`) {
		t.Errorf("scripts/package does not define version_flag as -X %s=$version", versionVar)
	}
	builds := regexp.MustCompile(`(?m)^.*go build .*$`).FindAllString(script, -1)
	if len(builds) != 2 {
		t.Fatalf("scripts/package: %d go build lines, want the binary's and the man page's: %q", len(builds), builds)
	}
	for _, b := range builds {
		if !strings.Contains(b, "$version_flag") {
			t.Errorf("scripts/package builds without the version: %s", strings.TrimSpace(b))
		}
	}
	release := read(".goreleaser.yaml")
	linked := versionVar + "={{ .Version }}"
	for _, re := range []string{`(?m)^.*\./cmd/rootfs man.*$`, `(?m)^\s+- -s -w.*$`} {
		lines := regexp.MustCompile(re).FindAllString(release, -1)
		if len(lines) == 0 {
			t.Errorf(".goreleaser.yaml has no line matching %s", re)
		}
		for _, l := range lines {
			if !strings.Contains(l, linked) {
				t.Errorf(".goreleaser.yaml builds without the version: %s", strings.TrimSpace(l))
			}
		}
	}
}
