package resolve

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestResolveShim: a pyenv-style shim, an asdf shim and a mise link are
// resolved by asking their manager; a script that is no shim is itself;
// a manager that finds nothing is a clear 127.
func TestResolveShim(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	real := filepath.Join(base, "versions", "3.12.1", "bin", "python3")
	writeFile(t, real, "#!/bin/sh\n", 0o755)
	// The manager answers "which NAME" from its working directory, as
	// pyenv reads .python-version there.
	manager := "#!/bin/sh\n[ \"$1\" = which ] && [ -f .version ] && { echo " + real + "; exit 0; }\necho \"$2: command not found\" >&2; exit 127\n"
	writeFile(t, filepath.Join(base, "pyenv", "libexec", "pyenv"), manager, 0o755)
	writeFile(t, filepath.Join(base, "pyenv", "shims", "python3"), "#!/usr/bin/env bash\nset -e\nexec \""+filepath.Join(base, "pyenv", "libexec", "pyenv")+"\" exec \"$program\" \"$@\"\n", 0o755)
	writeFile(t, filepath.Join(base, "asdf", "bin", "asdf"), manager, 0o755)
	writeFile(t, filepath.Join(base, "asdf", "shims", "python3"), "#!/usr/bin/env bash\nexec "+filepath.Join(base, "asdf", "bin", "asdf")+" exec \"python3\" \"$@\"\n", 0o755)
	writeFile(t, filepath.Join(base, "mise", "bin", "mise"), manager, 0o755)
	symlink(t, filepath.Join(base, "mise", "bin", "mise"), filepath.Join(base, "mise", "shims", "python3"))
	writeFile(t, filepath.Join(base, "proj", ".version"), "3.12.1\n", 0o644)
	writeFile(t, filepath.Join(base, "plain", "shims", "tool"), "#!/bin/sh\necho hi\n", 0o755)

	proj := filepath.Join(base, "proj")
	for _, c := range []struct{ shim, manager string }{
		{filepath.Join(base, "pyenv", "shims", "python3"), "pyenv"},
		{filepath.Join(base, "asdf", "shims", "python3"), "asdf"},
		{filepath.Join(base, "mise", "shims", "python3"), "mise"},
	} {
		got, mgr, err := Shim(c.shim, os.Environ(), proj)
		if err != nil || got != real || mgr != c.manager {
			t.Errorf("%s: %q %q %v, want %q %q", c.shim, got, mgr, err, real, c.manager)
		}
		// Where the manager finds no version, the error says what to do.
		_, _, err = Shim(c.shim, os.Environ(), base)
		if !errors.Is(err, ErrCommandNotFound) {
			t.Errorf("%s without a version: %v, want ErrCommandNotFound", c.shim, err)
		}
	}
	plain := filepath.Join(base, "plain", "shims", "tool")
	if got, mgr, err := Shim(plain, nil, base); got != plain || mgr != "" || err != nil {
		t.Errorf("no shim: %q %q %v", got, mgr, err)
	}
}
