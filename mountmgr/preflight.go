package mountmgr

import "fmt"

// Finding is one preflight result. Fatal findings mean `rootfs run` refuses.
type Finding struct {
	Name   string // "userns", "sandbox", "fuse", "seccomp", "landlock"
	OK     bool
	Fatal  bool   // when !OK: run cannot work (as opposed to weaker containment)
	Detail string // one line: what was found
	Fix    string // one line: how to enable it, when !OK
}

func (f Finding) String() string {
	if f.OK {
		return fmt.Sprintf("%s: ok (%s)", f.Name, f.Detail)
	}
	if f.Fix == "" {
		return fmt.Sprintf("%s: %s", f.Name, f.Detail)
	}
	return fmt.Sprintf("%s: %s; %s", f.Name, f.Detail, f.Fix)
}

// PreflightError returns the first fatal finding as an error wrapping
// ErrUnsupported (one line), or nil.
func PreflightError(fs []Finding) error {
	for _, f := range fs {
		if !f.OK && f.Fatal {
			return fmt.Errorf("%w: %s", ErrUnsupported, f.String())
		}
	}
	return nil
}
