package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
