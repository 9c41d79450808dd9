package control

import "testing"

// TestNames: every knob has a name of its own, so that EnvVar can name it.
func TestNames(t *testing.T) {
	seen := map[string]Knob{}
	for k := Knob(1); k < numKnobs; k++ {
		name := k.String()
		if name == "" {
			t.Errorf("knob %d has no name", k)
			continue
		}
		if o, dup := seen[name]; dup {
			t.Errorf("knobs %d and %d are both %q", o, k, name)
		}
		seen[name] = k
	}
	if got, want := Names(NoPrefill, NoKillPriv), "no-prefill,no-kill-priv"; got != want {
		t.Errorf("Names = %q, want %q", got, want)
	}
}
