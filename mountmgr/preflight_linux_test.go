package mountmgr

import (
	"errors"
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
