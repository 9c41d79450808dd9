package mcpbridge

import "testing"

// setLimit sets one of the limits in limits.go for the test and restores it afterwards.
func setLimit(t testing.TB, limit *int, v int) {
	old := *limit
	*limit = v
	t.Cleanup(func() { *limit = old })
}
