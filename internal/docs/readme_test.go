package docs

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite README.md's example blocks from examples/")

// block matches an example block: the marker names the file, the fenced code
// is its content.
var block = regexp.MustCompile("(?s)<!-- example: (\\S+) -->\n```(\\w*)\n(.*?)\n```\n<!-- end example -->")

func TestREADMEExamplesMatchFiles(t *testing.T) {
	top := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(top, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	out := block.ReplaceAllStringFunc(string(readme), func(m string) string {
		sub := block.FindStringSubmatch(m)
		found++
		want, err := os.ReadFile(filepath.Join(top, sub[1]))
		if err != nil {
			t.Errorf("README names %s: %v", sub[1], err)
			return m
		}
		w := strings.TrimRight(string(want), "\n")
		if sub[3] != w && !*update {
			t.Errorf("README's block for %s differs from the file; run go test ./internal/docs -update", sub[1])
		}
		return "<!-- example: " + sub[1] + " -->\n```" + sub[2] + "\n" + w + "\n```\n<!-- end example -->"
	})
	if found < 4 {
		t.Errorf("README has %d example blocks, want the 4 client configurations", found)
	}
	if *update {
		if err := os.WriteFile(filepath.Join(top, "README.md"), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
