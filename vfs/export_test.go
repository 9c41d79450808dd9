//go:build linux

package vfs

// Test knobs. Each turns one protection off for the negative control of
// the test that proves it; they live beside the code they bend
// (testSkipInvalidate, testNoOpenDrop: swap_linux.go; testNoFDRelief:
// fdrelief_linux.go; testNoHostEvents: hostwatch_linux.go; testNoKillPriv:
// view_file_linux.go; testPerFDLocks, testFlushLockedOnly: locks_linux.go;
// testNoPrefill: view_handle_linux.go; testPassthroughEvents:
// hostwatch_pt_linux.go; testOpendir: noopendir_linux.go;
// testTopPlainOffsets: toplist_linux.go) and are set only here, each
// through a function that returns the reset.

// setKnob sets *knob to on and returns the func that restores it.
func setKnob(knob *bool, on bool) (reset func()) {
	old := *knob
	*knob = on
	return func() { *knob = old }
}

// setKnobs sets every knob as cfg asks (the served view of the harness)
// and returns the func that restores them all.
func setKnobs(cfg serveConfig) (reset func()) {
	resets := []func(){
		setKnob(&testSkipInvalidate, cfg.NoInvalidate),
		setKnob(&testNoFDRelief, cfg.NoFDRelief),
		setKnob(&testNoHostEvents, cfg.NoHostEvents),
		setKnob(&testNoOpenDrop, cfg.NoOpenDrop),
		setKnob(&testNoKillPriv, cfg.NoKillPriv),
		setKnob(&testPerFDLocks, cfg.PerFDLocks),
		setKnob(&testPassthroughEvents, cfg.PassthroughEvents),
		setKnob(&testOpendir, cfg.KeepOpendir),
		setKnob(&testTopPlainOffsets, cfg.TopPlainOffsets),
		setKnob(&testFlushLockedOnly, cfg.FlushLockedOnly),
		setKnob(&testNoPrefill, cfg.NoPrefill),
	}
	return func() {
		for _, r := range resets {
			r()
		}
	}
}
