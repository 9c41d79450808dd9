package mountmgr

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
)

// TestLandlockRuleset: what P2's Landlock layer handles and allows on each
// ABI that changes it.
func TestLandlockRuleset(t *testing.T) {
	const (
		scopes = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		mk     = unix.LANDLOCK_ACCESS_FS_MAKE_SOCK
		refer  = unix.LANDLOCK_ACCESS_FS_REFER
		res    = unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
	)
	binds := []Bind{{Source: "/h/cache", Dest: "/cache"}, {Source: "/h/tool", Dest: "/opt/tool", ReadOnly: true}}
	rules := func(sock uint64) []linux.LandlockRule {
		return []linux.LandlockRule{
			{Path: "/", Access: refer}, {Path: "/tmp", Access: sock}, {Path: "/dev/shm", Access: sock},
			{Path: "/cache", Access: sock}, {Path: "/opt/tool", Access: sock},
		}
	}
	for _, tt := range []struct {
		name  string
		abi   int
		allow bool
		want  linux.LandlockRuleset
	}{
		{"no landlock", 0, false, linux.LandlockRuleset{}},
		// ABI 1 has no REFER: handling MAKE_SOCK there would refuse every
		// rename across directories.
		{"abi 1", 1, false, linux.LandlockRuleset{}},
		{"abi 2", 2, false, linux.LandlockRuleset{HandledFS: mk | refer, Rules: rules(mk)}},
		{"abi 6 adds the scopes", 6, false, linux.LandlockRuleset{HandledFS: mk | refer, Scoped: scopes, Rules: rules(mk)}},
		{"abi 8", 8, false, linux.LandlockRuleset{HandledFS: mk | refer, Scoped: scopes, Rules: rules(mk)}},
		{"abi 9 refuses connect too", 9, false, linux.LandlockRuleset{HandledFS: mk | res | refer, Scoped: scopes, Rules: rules(mk | res)}},
		{"allowed, abi 9: scopes only", 9, true, linux.LandlockRuleset{Scoped: scopes}},
		{"allowed, abi 5: nothing", 5, true, linux.LandlockRuleset{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := landlockRuleset(&Spec{Binds: binds, AllowUnixSockets: tt.allow}, tt.abi)
			if got.HandledFS != tt.want.HandledFS || got.Scoped != tt.want.Scoped || len(got.Rules) != len(tt.want.Rules) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got.Rules {
				if got.Rules[i] != tt.want.Rules[i] {
					t.Errorf("rule %d: got %+v, want %+v", i, got.Rules[i], tt.want.Rules[i])
				}
			}
		})
	}
}
