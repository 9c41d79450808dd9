package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// header is the first line of every raw file: the column names.
const header = "step\tworkload\ttarget\trep\tmetric\tvalue\tunit"

// ErrFormat is wrapped by every error about a raw file's content.
var ErrFormat = errors.New("not a scripts/bench raw file")

// Row is one line of a raw file: one measurement or one fact.
type Row struct {
	Step     string // warm, cold, first, again, oplat, trips, fttrips, mem, bridge or meta
	Workload string
	Target   string
	Rep      int // 1 for the first repetition; 0 for untimed warm-ups and facts
	Metric   string
	Value    string
	Unit     string
}

// Raw is a parsed raw file. Rows keep the file's order, which is the order
// the run measured in: the report's last-failure reasons and its pairing of
// first-touch samples depend on it.
type Raw struct {
	Rows []Row
	// meta holds the value of each fact (step "meta"), the last
	// one given winning.
	meta map[string]string
	// down holds why each target was not measured (meta "down" with a
	// target), the last reason given winning, as bash's DOWN[T] did.
	down map[string]string
}

// ParseRaw reads a raw file as scripts/bench writes it.
func ParseRaw(r io.Reader) (*Raw, error) {
	raw := &Raw{meta: map[string]string{}, down: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if n == 1 {
			if line != header {
				return nil, fmt.Errorf("%w: line 1 is %q, want the header %q", ErrFormat, line, header)
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 7 {
			return nil, fmt.Errorf("%w: line %d has %d fields, want 7", ErrFormat, n, len(f))
		}
		for i := range f {
			f[i] = unescape(f[i])
		}
		rep, err := strconv.Atoi(f[3])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: repetition %q is not a number", ErrFormat, n, f[3])
		}
		row := Row{Step: f[0], Workload: f[1], Target: f[2], Rep: rep, Metric: f[4], Value: f[5], Unit: f[6]}
		switch {
		case row.Step == "meta" && row.Metric == "down":
			raw.down[row.Target] = row.Value
		case row.Step == "meta":
			raw.meta[row.Metric] = row.Value
		}
		raw.Rows = append(raw.Rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: empty", ErrFormat)
	}
	if v := raw.meta["format"]; v != "1" {
		return nil, fmt.Errorf("%w: format %q, want 1", ErrFormat, v)
	}
	return raw, nil
}

// unescape undoes the shell's escaping of a field: \\, \t and \n stand for
// a backslash, a tab and a newline.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// Meta returns the fact KEY, or "" when the run did not record it.
func (r *Raw) Meta(key string) string { return r.meta[key] }

// up reports whether target t was measured: bash's up(), true unless a
// non-empty reason says otherwise.
func (r *Raw) up(t string) bool { return r.down[t] == "" }

// sample is one timed run: its value, or ok false for a failed run.
type sample struct {
	ok    bool
	value string
	why   string // a failed run's reason, possibly empty
}

// samples returns the timed runs of workload w on target t in step (warm,
// cold, first, again), in the order they ran, without the untimed warm-ups.
//
// Native's start-up (first, ft_start, native) counts only the runs after
// the last first-touch warm-up: the shell renderer emptied that list at
// each workload's warm-up, so its figure is over the last workload's runs,
// while the other targets' are over all of them. Kept so that a report
// rebuilds exactly.
func (r *Raw) samples(step, w, t string) []sample {
	var out []sample
	nativeStart := step == "first" && w == ftStart.name && t == "native"
	for _, row := range r.Rows {
		if nativeStart && row.Step == "first" && row.Target == "native" && row.Rep == 0 && row.Workload != w {
			out = nil
			continue
		}
		if row.Step != step || row.Workload != w || row.Target != t || row.Rep < 1 {
			continue
		}
		switch row.Metric {
		case "time":
			out = append(out, sample{ok: true, value: row.Value})
		case "fail":
			out = append(out, sample{why: row.Value})
		}
	}
	return out
}

// values returns the values of metric on workload w and target t in step,
// in file order, repetitions from 1 on.
func (r *Raw) values(step, w, t, metric string) []string {
	var out []string
	for _, row := range r.Rows {
		if row.Step == step && row.Workload == w && row.Target == t && row.Metric == metric && row.Rep >= 1 {
			out = append(out, row.Value)
		}
	}
	return out
}

// has reports whether any row is from step, on workload w (any when "")
// and target t (any when "").
func (r *Raw) has(step, w, t string) bool {
	for _, row := range r.Rows {
		if row.Step == step && (w == "" || row.Workload == w) && (t == "" || row.Target == t) {
			return true
		}
	}
	return false
}

// list splits a space-separated fact such as "targets".
func (r *Raw) list(key string) []string { return strings.Fields(r.meta[key]) }
