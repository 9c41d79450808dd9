package spec

import "testing"

// TestMappedUID: the layer's key names the host user, the same in P0 and
// in P1's user namespace.
func TestMappedUID(t *testing.T) {
	for _, tt := range []struct {
		name, uidMap string
		uid, want    int
	}{
		{"initial namespace", "         0          0 4294967295\n", 1000, 1000},
		{"rootfs's user namespace (P1 without root)", "         0       1000          1\n", 0, 1000},
		{"a container's range", "0 100000 65536\n", 1000, 101000},
		{"unmapped", "0 1000 1\n", 5, 5},
		{"unreadable", "", 7, 7},
	} {
		if got := mappedUID(tt.uidMap, tt.uid); got != tt.want {
			t.Errorf("%s: mappedUID(%q, %d) = %d, want %d", tt.name, tt.uidMap, tt.uid, got, tt.want)
		}
	}
}
