package mountmgr

import (
	"errors"
	"os"
	"testing"
)

func TestUserNSRefusalIsOneLine(t *testing.T) {
	err := userNSError(errors.New("operation not permitted"))
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("%v does not wrap ErrUnsupported", err)
	}
	if s := err.Error(); len(s) == 0 || containsNewline(s) {
		t.Fatalf("refusal %q is not one line", s)
	}
}

func containsNewline(s string) bool {
	for _, c := range s {
		if c == '\n' {
			return true
		}
	}
	return false
}

// TestTunFinding: rootfs doctor says whether the sandbox's own network can
// work here; a machine without a usable /dev/net/tun gets the fix, never
// a failure (the server still runs, with loopback only).
func TestTunFinding(t *testing.T) {
	f := tunFinding()
	if f.Fatal {
		t.Errorf("%+v: never fatal", f)
	}
	if _, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0); err == nil {
		if !f.OK {
			t.Errorf("%+v: /dev/net/tun opens here", f)
		}
	} else if f.OK || f.Fix == "" {
		t.Errorf("%+v: /dev/net/tun does not open here (%v), want the fix", f, err)
	}
}
