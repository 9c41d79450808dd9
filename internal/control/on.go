//go:build rootfs_control

package control

import (
	"fmt"
	"os"
	"strings"
)

// Built reports whether this is a control build.
const Built = true

// on holds the knobs EnvVar turned on, read once before any other package's
// init runs (every package that has a knob imports this one); env is that
// entry of the environment, for Environ.
var (
	on  [numKnobs]bool
	env string
)

func init() {
	v, ok := os.LookupEnv(EnvVar)
	if !ok {
		return
	}
	env = EnvVar + "=" + v
	for name := range strings.SplitSeq(v, ",") {
		if name == "" {
			continue
		}
		k := lookup(name)
		if k == 0 {
			fmt.Fprintf(os.Stderr, "rootfs control build: %s: unknown knob %q\n", EnvVar, name)
			os.Exit(2)
		}
		on[k] = true
	}
}

func lookup(name string) Knob {
	for k := Knob(1); k < numKnobs; k++ {
		if names[k] == name {
			return k
		}
	}
	return 0
}

// On reports whether k is on, as EnvVar said when the process started.
func On(k Knob) bool { return on[k] }

// Environ returns the environment entries that keep this process's knobs
// on in a process it starts with an environment of its own.
func Environ() []string {
	if env == "" {
		return nil
	}
	return []string{env}
}
