package resolve

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/rootfs-dev/rootfs/mountmgr/internal/spec"
)

// # Version-manager shims
//
// pyenv, rbenv, nodenv, asdf and mise put "shims" first on the user's
// PATH: small scripts (or, for mise, links to mise itself) that choose the
// real interpreter when they run, from PYENV_VERSION, a .python-version
// file in the working directory or above, or the global version. Inside
// the sandbox the manager and its version files are not there, so a shim
// cannot run. Shim asks the manager, on the host and as the client
// would have run it, which executable the shim runs now, and rootfs runs
// that one.

// shimExec matches the line a pyenv-style or asdf shim ends with:
// exec "/root/.pyenv/libexec/pyenv" exec "$program" "$@", or
// exec /home/me/.asdf/bin/asdf exec "node" "$@".
var shimExec = regexp.MustCompile(`(?m)^\s*exec\s+"?([^"\s]+)"?\s+exec\s`)

// shimTimeout bounds the manager's answer.
const shimTimeout = 10 * time.Second

// Shim returns the executable that the version-manager shim exe
// would run, and the manager's name; exe and "" when exe is no shim. env
// and dir are rootfs's own environment and working directory, which the
// manager reads to choose a version. The error wraps mountmgr.ErrCommandNotFound
// and says how to name the interpreter instead.
func Shim(exe string, env []string, dir string) (string, string, error) {
	if filepath.Base(filepath.Dir(exe)) != "shims" {
		return exe, "", nil
	}
	name := filepath.Base(exe)
	var tool, manager string
	if fi, err := os.Lstat(exe); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if real, err := filepath.EvalSymlinks(exe); err == nil && (filepath.Base(real) == "mise" || filepath.Base(real) == "rtx") {
			tool, manager = real, filepath.Base(real)
		}
	} else if b, err := readSmall(exe); err == nil && bytes.HasPrefix(b, []byte("#!")) {
		if m := shimExec.FindSubmatch(b); m != nil {
			tool = string(m[1])
			manager = strings.TrimSuffix(filepath.Base(tool), filepath.Ext(tool))
		}
	}
	if tool == "" {
		return exe, "", nil
	}
	if !filepath.IsAbs(tool) {
		p, err := exec.LookPath(tool)
		if err != nil {
			return "", manager, fmt.Errorf("%w: %s is a %s shim and %s is not on PATH; give the interpreter's own path (%s which %s)", spec.ErrCommandNotFound, exe, manager, tool, manager, name)
		}
		tool = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), shimTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, "which", name)
	cmd.Env, cmd.Dir = env, dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	real := strings.TrimSpace(string(out))
	if i := strings.IndexByte(real, '\n'); i >= 0 {
		real = real[:i]
	}
	if err != nil || !filepath.IsAbs(real) {
		why := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(why, '\n'); i >= 0 {
			why = why[i+1:]
		}
		if why == "" && err != nil {
			why = err.Error()
		}
		return "", manager, fmt.Errorf("%w: %s is a %s shim and \"%s which %s\" found no executable (%s); give the interpreter's own path", spec.ErrCommandNotFound, exe, manager, manager, name, why)
	}
	if _, err := Command(real, ""); err != nil {
		return "", manager, err
	}
	return real, manager, nil
}
