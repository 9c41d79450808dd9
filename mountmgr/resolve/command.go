package resolve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rootfs-dev/rootfs/mountmgr/internal/spec"
)

// Command finds name on the host: a name with a slash is made
// absolute, otherwise it is searched in path (the host's PATH). The error
// wraps mountmgr.ErrCommandNotFound (exit 127) or mountmgr.ErrCommandNotExecutable (126).
func Command(name, path string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty command", spec.ErrCommandNotFound)
	}
	check := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if _, lerr := os.Lstat(p); lerr == nil {
					// A dangling symlink: name the target that is missing.
					if _, cerr := chain(p, p); cerr != nil {
						return cerr
					}
				}
				return fmt.Errorf("%w: %s", spec.ErrCommandNotFound, p)
			}
			return fmt.Errorf("%w: %v", spec.ErrCommandNotExecutable, err)
		}
		if fi.IsDir() {
			return fmt.Errorf("%w: %s is a directory", spec.ErrCommandNotExecutable, p)
		}
		if fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%w: %s has no execute permission", spec.ErrCommandNotExecutable, p)
		}
		return nil
	}
	if strings.Contains(name, "/") {
		p, err := filepath.Abs(name)
		if err != nil {
			return "", fmt.Errorf("%w: %v", spec.ErrCommandNotFound, err)
		}
		return p, check(p)
	}
	var firstErr error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // relative PATH entries would resolve against rootfs's cwd
		}
		p := filepath.Join(dir, name)
		err := check(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && errors.Is(err, spec.ErrCommandNotExecutable) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", fmt.Errorf("%w: %q is not in PATH", spec.ErrCommandNotFound, name)
}
