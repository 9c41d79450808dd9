package mountmgr

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"unicode"
)

// Bounds of what stderrTail keeps: a server that floods its stderr costs
// at most tailLines × tailLineMax bytes.
const (
	tailLines   = 16
	tailLineMax = 512
)

// stderrTail remembers the last lines a server wrote to its stderr, so that
// rootfs can tell the client why the server ended (its log is in a file the
// user must first find). It keeps tailLines lines of at most tailLineMax
// bytes each (the rest of a longer line is dropped). Write and last may be
// called concurrently.
type stderrTail struct {
	// mu guards the fields that follow.
	mu    sync.Mutex
	lines []string // complete lines, oldest first
	part  []byte   // the line being written, up to tailLineMax bytes
}

// Write records p; it never fails.
func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
		}
		if room := tailLineMax - len(t.part); room < len(chunk) {
			chunk = chunk[:max(room, 0)]
		}
		t.part = append(t.part, chunk...)
		if i < 0 {
			break
		}
		t.push(string(t.part))
		t.part = t.part[:0]
		rest = rest[i+1:]
	}
	return len(p), nil
}

func (t *stderrTail) push(line string) {
	if len(t.lines) == tailLines {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:tailLines-1]
	}
	t.lines = append(t.lines, line)
}

// last returns the last line that says something, cleaned up for one line
// of a message: not blank, not indented (the frames of a stack trace), and
// not node's closing "Node.js vX.Y.Z", which follows the error it printed.
// A line still being written (no newline yet) counts. "" when none.
func (t *stderrTail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	cand := t.lines
	if len(t.part) > 0 {
		cand = append(cand[:len(cand):len(cand)], string(t.part))
	}
	for i := len(cand) - 1; i >= 0; i-- {
		l := cand[i]
		if strings.TrimSpace(l) == "" || l[0] == ' ' || l[0] == '\t' || strings.HasPrefix(l, "Node.js v") {
			continue
		}
		return cleanLine(l)
	}
	return ""
}

// csi matches a terminal control sequence (colours, cursor moves).
var csi = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// cleanLine makes l safe to put in a one-line message: valid UTF-8, no
// terminal control sequences or control characters, trimmed.
func cleanLine(l string) string {
	l = csi.ReplaceAllString(strings.ToValidUTF8(l, "?"), "")
	l = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, l)
	return strings.TrimSpace(l)
}
