package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.md from testdata/golden.raw.tsv")

// parse is ParseRaw of a raw file given as text, the header added.
func parse(t *testing.T, rows string) *Raw {
	t.Helper()
	raw, err := ParseRaw(strings.NewReader(header + "\n" + rows))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func renderFile(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, err := ParseRaw(f)
	if err != nil {
		t.Fatal(err)
	}
	block, err := Render(raw)
	if err != nil {
		t.Fatal(err)
	}
	return block
}

// TestGolden renders a small raw file that has a row of each kind; refresh
// the expected block with go test -update.
func TestGolden(t *testing.T) {
	got := renderFile(t, "testdata/golden.raw.tsv")
	if *update {
		if err := os.WriteFile("testdata/golden.md", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/golden.md")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("report of testdata/golden.raw.tsv differs from testdata/golden.md (go test -update rewrites it):\n%s", diffLines(string(want), got))
	}
}

// TestOldShell checks that the report of each raw file in testdata/oldshell
// is, byte for byte, the BENCHMARKS file the shell renderer this command
// replaced wrote for the same measurements (see testdata/oldshell/README).
// These files are never rewritten by -update.
func TestOldShell(t *testing.T) {
	raws, err := filepath.Glob("testdata/oldshell/*.raw.tsv")
	if err != nil || len(raws) == 0 {
		t.Fatalf("no raw files in testdata/oldshell: %v", err)
	}
	for _, rawPath := range raws {
		name := strings.TrimSuffix(filepath.Base(rawPath), ".raw.tsv")
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(strings.TrimSuffix(rawPath, ".raw.tsv") + ".md")
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
			if err := run([]string{"-o", out, rawPath}, nil); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("report differs from the shell's:\n%s", diffLines(string(want), string(got)))
			}
		})
	}
}

// diffLines lists the lines where want and got differ.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var x, y string
		if i < len(w) {
			x = w[i]
		}
		if i < len(g) {
			y = g[i]
		}
		if x != y {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want: " + x + "\n  got:  " + y + "\n")
		}
	}
	return b.String()
}

const sizeRows = "meta\t\t\t0\tformat\t1\t\n" +
	"meta\t\t\t0\tn_walk\t500\t\nmeta\t\t\t0\tn_bigdir\t100\t\nmeta\t\t\t0\tn_small\t200\t\n" +
	"meta\t\t\t0\tseq_mb\t16\t\nmeta\t\t\t0\tn_4k\t1024\t\nmeta\t\t\t0\tn_repo\t200\t\n" +
	"meta\t\t\t0\tn_nm\t200\t\nmeta\t\t\t0\tn_nmrepo\t100\t\nmeta\t\t\t0\ttargets\tnative rootfs bindfs\t\n"

func TestCell(t *testing.T) {
	walk, seq := warmWorkloads[0], warmWorkloads[6]
	tests := []struct {
		name      string
		rows      string
		w         workload
		target    string
		want      string
		wantRatio string
	}{
		{
			name: "no runs", w: walk, target: "rootfs",
			rows: "warm\twalk_find\tnative\t1\ttime\t1000\tus\n",
			want: "n/a",
		},
		{
			name: "every run failed, last reason", w: walk, target: "rootfs",
			rows: "warm\twalk_find\trootfs\t1\tfail\tfirst\t\nwarm\twalk_find\trootfs\t2\tfail\tsecond\t\n",
			want: "failed: second",
		},
		{
			name: "every run failed, no reason", w: walk, target: "rootfs",
			rows: "warm\twalk_find\trootfs\t1\tfail\t\t\n",
			want: "failed",
		},
		{
			name: "some runs failed", w: walk, target: "rootfs",
			rows: "warm\twalk_find\tnative\t1\ttime\t1000\tus\n" +
				"warm\twalk_find\trootfs\t1\ttime\t1500\tus\nwarm\twalk_find\trootfs\t2\tfail\tx\t\nwarm\twalk_find\trootfs\t3\tfail\tx\t\n",
			want: "1.5 ms (1.50×) (2 runs failed)", wantRatio: "1.500",
		},
		{
			name: "no native: no ratio", w: walk, target: "rootfs",
			rows: "warm\twalk_find\trootfs\t1\ttime\t2500000\tus\n",
			want: "2.50 s",
		},
		{
			name: "even count", w: walk, target: "native",
			rows: "warm\twalk_find\tnative\t1\ttime\t1000\tus\nwarm\twalk_find\tnative\t2\ttime\t1001\tus\n",
			want: "1.0 ms (1.00×)", wantRatio: "1.000",
		},
		{
			name: "throughput", w: seq, target: "rootfs",
			rows: "warm\tseq_write\tnative\t1\ttime\t10000\tus\nwarm\tseq_write\trootfs\t1\ttime\t40000\tus\n",
			want: "419 MB/s (0.25×)", wantRatio: "0.250",
		},
		{
			name: "warm-ups left out", w: walk, target: "native",
			rows: "warm\twalk_find\tnative\t0\ttime\t9\tus\nwarm\twalk_find\tnative\t1\ttime\t1000\tus\n",
			want: "1.0 ms (1.00×)", wantRatio: "1.000",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := parse(t, sizeRows+tt.rows)
			sz, err := sizes(raw)
			if err != nil {
				t.Fatal(err)
			}
			r := &report{raw: raw, sizes: sz}
			got, ratio := r.cell(tt.w, "warm", tt.target)
			if got != tt.want || ratio != tt.wantRatio {
				t.Errorf("cell = %q, %q; want %q, %q", got, ratio, tt.want, tt.wantRatio)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	walk := warmWorkloads[0]
	tests := []struct {
		name string
		rows string
		want string
	}{
		{
			name: "met after rounding to 3 places; beats bindfs",
			rows: "warm\twalk_find\tnative\t1\ttime\t100000\tus\nwarm\twalk_find\trootfs\t1\ttime\t150040\tus\nwarm\twalk_find\tbindfs\t1\ttime\t200000\tus\n",
			want: "≤1.5× met; beats bindfs",
		},
		{
			name: "missed; a tie with bindfs is not faster",
			rows: "warm\twalk_find\tnative\t1\ttime\t100000\tus\nwarm\twalk_find\trootfs\t1\ttime\t150060\tus\nwarm\twalk_find\tbindfs\t1\ttime\t150060\tus\n",
			want: "≤1.5× **missed**; **not faster than bindfs**",
		},
		{
			name: "failed",
			rows: "warm\twalk_find\tnative\t1\ttime\t100000\tus\nwarm\twalk_find\trootfs\t1\tfail\t\t\n",
			want: "**failed**",
		},
		{
			name: "no goal and no bindfs",
			rows: "warm\twalk_find\tnative\t1\ttime\t100000\tus\n",
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := parse(t, sizeRows+tt.rows)
			sz, _ := sizes(raw)
			r := &report{raw: raw, sizes: sz}
			if got := r.verdict(walk, "rootfs"); got != tt.want {
				t.Errorf("verdict = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRequests(t *testing.T) {
	raw := parse(t, sizeRows+
		"trips\tw\tt\t1\tFUSE_STATFS\t1\trequests\n"+
		"trips\tw\tt\t1\tFUSE_READDIR\t7\trequests\n"+
		"trips\tw\tt\t1\tFUSE_READDIRPLUS\t7\trequests\n"+
		"trips\tw\tt\t1\tFUSE_LOOKUP\t1\trequests\n"+
		"trips\tw\tt\t1\ttotal\t16\trequests\n"+
		"trips\tempty\tt\t1\ttotal\t0\trequests\n"+
		"trips\tlost\tt\t1\ttotal\t0\trequests\n"+
		"trips\tlost\tt\t1\tlost\t1\t\n"+
		"fttrips\tw\tt\t1\tnot_fuse\t1\t\n")
	r := &report{raw: raw}
	for _, tt := range []struct{ step, w, want string }{
		{"trips", "w", "READDIRPLUS 7, READDIR 7, STATFS 1, LOOKUP 1"},
		{"trips", "empty", "none"},
		{"trips", "lost", " (some events lost)"},
		{"trips", "unmeasured", "none"},
		{"fttrips", "w", "not a FUSE mount"},
	} {
		if got := r.requests(tt.step, tt.w, "t"); got != tt.want {
			t.Errorf("requests(%s, %s) = %q, want %q", tt.step, tt.w, got, tt.want)
		}
	}
}

func TestNativeStartUp(t *testing.T) {
	// Native's start-up counts the runs after the last warm-up only.
	raw := parse(t, sizeRows+
		"first\tft_walk\tnative\t0\ttime\t1\tus\n"+
		"first\tft_start\tnative\t0\ttime\t1\tus\n"+
		"first\tft_start\tnative\t1\ttime\t100\tus\n"+
		"first\tft_start\tbindfs\t1\ttime\t200\tus\n"+
		"first\tftn_git\tnative\t0\tfail\t\t\n"+
		"first\tft_start\tnative\t1\ttime\t300\tus\n"+
		"first\tft_start\tbindfs\t1\ttime\t400\tus\n")
	if got := okValues(raw.samples("first", "ft_start", "native")); len(got) != 1 || got[0] != "300" {
		t.Errorf("native start-up samples = %q, want [300]", got)
	}
	if got := okValues(raw.samples("first", "ft_start", "bindfs")); len(got) != 2 {
		t.Errorf("bindfs start-up samples = %q, want both", got)
	}
}

func TestParseRaw(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{name: "empty", in: ""},
		{name: "no header", in: "meta\t\t\t0\tformat\t1\t\n"},
		{name: "short row", in: header + "\nmeta\t\t\t0\tformat\t1\n"},
		{name: "bad repetition", in: header + "\nmeta\t\t\tx\tformat\t1\t\n"},
		{name: "no format", in: header + "\nmeta\t\t\t0\tscale\t1\t\n"},
		{name: "other format", in: header + "\nmeta\t\t\t0\tformat\t2\t\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseRaw(strings.NewReader(tt.in)); !errors.Is(err, ErrFormat) {
				t.Errorf("ParseRaw: err = %v, want ErrFormat", err)
			}
		})
	}
	raw := parse(t, "# a comment\n\nmeta\t\t\t0\tformat\t1\t\n"+
		"meta\t\trootfs\t0\tdown\tfirst\t\nmeta\t\trootfs\t0\tdown\ta\\tb\\\\c\\nd\t\n")
	if got, want := raw.down["rootfs"], "a\tb\\c\nd"; got != want {
		t.Errorf("down reason = %q, want %q (the last, unescaped)", got, want)
	}
	if raw.up("rootfs") || !raw.up("bindfs") {
		t.Errorf("up(rootfs) = %v, up(bindfs) = %v; want false, true", raw.up("rootfs"), raw.up("bindfs"))
	}
}

func TestRenderNeedsSizes(t *testing.T) {
	raw := parse(t, "meta\t\t\t0\tformat\t1\t\n")
	if _, err := Render(raw); !errors.Is(err, ErrFormat) {
		t.Errorf("Render without sizes: err = %v, want ErrFormat", err)
	}
}

func TestAuditCell(t *testing.T) {
	// rows are the audit rows of ft_read on run-audit, by repetition.
	logRow := func(rep int, metric, value string) string {
		return "audit\tft_read\trun-audit\t" + strconv.Itoa(rep) + "\t" + metric + "\t" + value + "\t\n"
	}
	full := func(rep int, lines, lost string) string {
		return logRow(rep, "bytes", "5000000") + logRow(rep, "lines", lines) +
			logRow(rep, "op_read", lines) + logRow(rep, "op_roots", "1") + logRow(rep, "lost", lost)
	}
	tests := []struct {
		name string
		rows string
		want string
	}{
		{
			name: "no audited runs",
			want: "n/a",
		},
		{
			name: "every log missing",
			rows: logRow(1, "fail", "no log file"),
			want: "**no log written**",
		},
		{
			name: "empty logs: the watch recorded nothing",
			rows: logRow(1, "bytes", "0") + logRow(1, "lines", "0") + logRow(1, "lost", "0"),
			want: "**empty (0 lines): nothing recorded**",
		},
		{
			name: "medians, operations by count, zero medians left out",
			rows: full(1, "100", "0") + full(2, "300", "0") + full(3, "200", "0") + logRow(3, "op_write", "1"),
			want: "200 lines, 5.00 MB (read 200, roots 1)",
		},
		{
			name: "a loss in one run is flagged",
			rows: full(1, "100", "0") + full(2, "300", "7") + full(3, "200", "0"),
			want: "200 lines, 5.00 MB (read 200, roots 1); **1 of 3 runs lost records (median 0, most 7)**",
		},
		{
			name: "one empty log and one missing among full ones",
			rows: full(1, "100", "0") + logRow(2, "bytes", "0") + logRow(2, "lines", "0") + full(3, "200", "0") + logRow(4, "fail", "no log file"),
			want: "100 lines, 5.00 MB (read 100, roots 1) (**1 runs wrote an empty log**, **1 runs wrote no log**)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := parse(t, sizeRows+tt.rows)
			r := &report{raw: raw}
			if got := r.auditCell("ft_read", "run-audit"); got != tt.want {
				t.Errorf("auditCell = %q\nwant         %q", got, tt.want)
			}
		})
	}
}

func TestPairVerdict(t *testing.T) {
	read := ftWorkloads[2]
	var col pairCol
	for _, c := range pairCols {
		if c.a == "run-audit" && c.b == "native" {
			col = c
		}
	}
	if col.goal == nil {
		t.Fatal("no goal for run-audit / native")
	}
	tests := []struct {
		name  string
		audit []string // run-audit's first-pass times; native's are 100000 us
		want  string
	}{
		{name: "met at the bound", audit: []string{"110000", "110000", "200000"}, want: "≤1.1× met"},
		{name: "met after rounding to 3 places", audit: []string{"110040"}, want: "≤1.1× met"},
		{name: "missed", audit: []string{"110060", "90000", "130000"}, want: "≤1.1× **missed**"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := ""
			for i, v := range tt.audit {
				rep := strconv.Itoa(i + 1)
				rows += "first\tft_read\tnative\t" + rep + "\ttime\t100000\tus\n" +
					"first\tft_read\trun-audit\t" + rep + "\ttime\t" + v + "\tus\n"
			}
			r := &report{raw: parse(t, sizeRows+rows)}
			if got := r.pairVerdict(read, col); got != tt.want {
				t.Errorf("pairVerdict = %q, want %q", got, tt.want)
			}
		})
	}
}
