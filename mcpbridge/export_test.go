package mcpbridge

import "testing"

// setLimit sets one of the limits in limits.go for the test and restores it afterwards.
func setLimit(t testing.TB, limit *int, v int) {
	old := *limit
	*limit = v
	t.Cleanup(func() { *limit = old })
}

// setHold turns the hold of client messages for the roots on or off for the test (off: the
// negative control of the tests that need it) and restores it afterwards.
func setHold(t testing.TB, on bool) {
	old := holdForRoots
	holdForRoots = on
	t.Cleanup(func() { holdForRoots = old })
}
