package mountmgr

import (
	"strings"
	"testing"
)

func TestStderrTail(t *testing.T) {
	for _, tt := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"nothing", nil, ""},
		{"one line", []string{"fatal: cannot open db\n"}, "fatal: cannot open db"},
		{"last of several", []string{"starting\n", "fatal: cannot open db\n"}, "fatal: cannot open db"},
		{"split across writes", []string{"fatal: can", "not open db\nbye"}, "bye"},
		{"no final newline", []string{"one\ntwo"}, "two"},
		{"blank lines after", []string{"fatal: x\n\n  \n"}, "fatal: x"},
		{"python traceback", []string{"Traceback (most recent call last):\n  File \"/srv/main.py\", line 1, in <module>\n    import mcp\nModuleNotFoundError: No module named 'mcp'\n"}, "ModuleNotFoundError: No module named 'mcp'"},
		{"node uncaught error", []string{"/srv/index.js:3\nthrow new Error('fatal: cannot open db');\n^\n\nError: fatal: cannot open db\n    at Object.<anonymous> (/srv/index.js:3:7)\n    at node:internal/main:1:1\n\nNode.js v22.3.0\n"}, "Error: fatal: cannot open db"},
		{"terminal colours and controls", []string{"\x1b[31merror:\x1b[0m bad\x07 thing\r\n"}, "error: bad thing"},
		{"invalid utf-8", []string{"bad \xff byte\n"}, "bad ? byte"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var tl stderrTail
			for _, w := range tt.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := tl.last(); got != tt.want {
				t.Errorf("last() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStderrTailBounded: a flood keeps at most tailLines lines of
// tailLineMax bytes.
func TestStderrTailBounded(t *testing.T) {
	var tl stderrTail
	long := strings.Repeat("x", 10*tailLineMax)
	for range 1000 {
		tl.Write([]byte(long + "\n" + long))
	}
	tl.Write([]byte("\nthe end\n"))
	if len(tl.lines) > tailLines || cap(tl.part) > 2*tailLineMax {
		t.Errorf("kept %d lines, a partial line of capacity %d", len(tl.lines), cap(tl.part))
	}
	for _, l := range tl.lines {
		if len(l) > tailLineMax {
			t.Errorf("kept a line of %d bytes", len(l))
		}
	}
	if got := tl.last(); got != "the end" {
		t.Errorf("last() = %q", got)
	}
}
