package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// preamble starts a report file that did not exist or had no markers.
const preamble = "# rootfs benchmarks\n\nProduced by `scripts/bench` (issue 6). Re-run as root: `scripts/bench`; quick check: `BENCH_SCALE=0.1 scripts/bench`.\n\n"

// splice returns doc with every line from one holding "<!-- bench:begin" to
// the next holding the end marker replaced by block, and ok false when doc
// has no begin marker.
func splice(doc, block string) (string, bool) {
	if !strings.Contains(doc, "<!-- bench:begin") {
		return "", false
	}
	var b strings.Builder
	skip := false
	for _, line := range strings.SplitAfter(doc, "\n") {
		if line == "" {
			continue
		}
		switch {
		case strings.Contains(line, "<!-- bench:begin"):
			b.WriteString(block)
			skip = true
		case strings.Contains(line, endMarker):
			skip = false
		case !skip:
			b.WriteString(strings.TrimSuffix(line, "\n"))
			b.WriteByte('\n')
		}
	}
	return b.String(), true
}

// spliceFile puts block into the markdown file path between its markers,
// or writes path anew as preamble and block. It replaces the file in one
// rename, so a reader never sees half a report.
func spliceFile(path, block string) error {
	doc, err := os.ReadFile(path)
	mode := fs.FileMode(0o644)
	switch {
	case err == nil:
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	out, ok := splice(string(doc), block)
	if !ok {
		out = preamble + block
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(out); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
