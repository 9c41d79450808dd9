package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// The first-touch section: first touch and the second pass, the ratios
// within each repetition, and the audit logs' sizes.

func (r *report) hasTarget(t string) bool {
	for _, x := range r.targets {
		if x == t {
			return true
		}
	}
	return false
}

// firstTouch writes the first-touch tables: first pass, second pass, ratios
// within each repetition, and FUSE requests of one run.
func (r *report) firstTouch() {
	if len(r.raw.samples("first", ftStart.name, "native")) == 0 {
		return
	}
	fts := r.raw.list("ft_targets")
	runStrict := r.raw.Meta("run_strict") == "yes"
	base := r.raw.Meta("base_label")
	reps := r.raw.Meta("ft_reps")
	r.line("")
	r.linef("First touch inside a fresh sandbox (issue 13): each run starts a new `rootfs run` (a new bindfs mount for bindfs), page cache of the host warm, and the command times its own workload, so start-up is its own row; median of %s:", reps)
	r.line("")
	hdr, sep := "| workload |", "|---|"
	for _, t := range fts {
		hdr += " " + ftLabel(t, runStrict, base) + " |"
		sep += "---|"
	}
	r.line(hdr)
	r.line(sep)
	rows := func(step string, ws []workload) {
		for _, w := range ws {
			if len(r.raw.samples(step, w.name, "native")) == 0 {
				continue
			}
			line := "| " + r.label(w) + " |"
			for _, t := range fts {
				text := "n/a"
				if r.raw.up(t) {
					text, _ = r.cell(w, step, t)
				}
				line += " " + text + " |"
			}
			r.line(line)
		}
	}
	rows("first", append([]workload{ftStart}, ftWorkloads...))
	r.line("")
	r.linef("Second pass: the same command runs the workload again in the same sandbox (same bindfs mount) %s s later (page cache warm, kernel entry/attribute caches of 1 s expired), median of %s:", r.raw.Meta("ft_gap"), reps)
	r.line("")
	r.line(hdr)
	r.line(sep)
	rows("again", ftWorkloads)
	r.pairs(base, reps)
	r.auditLogs(runStrict, base, reps)
	r.line("")
	for _, t := range fts {
		if !r.raw.up(t) {
			r.linef("- %s: not measured: %s", ftLabel(t, runStrict, base), r.raw.down[t])
		}
	}
	if !r.raw.has("fttrips", "", "") {
		return
	}
	r.line("")
	r.line("FUSE requests in one first-touch run (bindfs: its mount; rootfs run: the view's connection, which under the kernel path serves only the top level):")
	r.line("")
	var tts []string
	for _, t := range fts {
		if t != "native" && r.raw.up(t) {
			tts = append(tts, t)
		}
	}
	r.ftTable(tts, runStrict, base, func(w, t string) string {
		if r.raw.has("fttrips", w, t) {
			return r.requests("fttrips", w, t)
		}
		return "n/a"
	})
}

// ftTable renders one first-touch table: a row per workload measured
// natively, a column per target in ts, each cell from cell(workload, target).
func (r *report) ftTable(ts []string, runStrict bool, base string, cell func(w, t string) string) {
	hdr := "| workload |"
	for _, t := range ts {
		hdr += " " + ftLabel(t, runStrict, base) + " |"
	}
	r.line(hdr)
	r.line("|---|" + strings.Repeat("---|", len(ts)))
	for _, w := range ftWorkloads {
		if len(r.raw.samples("first", w.name, "native")) == 0 {
			continue
		}
		line := "| " + r.label(w) + " |"
		for _, t := range ts {
			line += " " + cell(w.name, t) + " |"
		}
		r.line(line)
	}
}

// pairs writes the first-touch ratios taken within each repetition.
func (r *report) pairs(base, reps string) {
	if base == "" {
		base = "base"
	}
	fts := r.raw.list("ft_targets")
	var cols []pairCol
	for _, c := range pairCols {
		if c.listed && (!slices.Contains(fts, c.a) || !slices.Contains(fts, c.b)) {
			continue
		}
		if r.raw.up(c.a) && r.raw.up(c.b) {
			cols = append(cols, c)
		}
	}
	if len(cols) == 0 {
		return
	}
	r.line("")
	r.linef("The same runs as ratios taken within each repetition (the targets run interleaved), median [min-max] over the %s repetitions:", reps)
	r.line("")
	line := "| workload | pass |"
	for _, c := range cols {
		line += " " + strings.ReplaceAll(c.head, "{base}", base) + " |"
	}
	r.line(line)
	r.line("|---|---|" + strings.Repeat("---|", len(cols)))
	for _, w := range ftWorkloads {
		if len(r.raw.samples("first", w.name, "native")) == 0 {
			continue
		}
		for _, step := range []string{"first", "again"} {
			line := "| " + r.label(w) + " | " + step + " |"
			for _, c := range cols {
				cell := r.pairCell(w, step, c)
				if c.goal != nil && step == "first" && cell != "" {
					cell += " " + r.pairVerdict(w, c)
				}
				line += " " + cell + " |"
			}
			r.line(line)
		}
	}
}

// pairCell is "median× [min-max]" of c.a's time over c.b's within each
// repetition, or "" when no repetition has both.
func (r *report) pairCell(w workload, step string, c pairCol) string {
	ratios := pairRatios(r.raw.samples(step, w.name, c.a), r.raw.samples(step, w.name, c.b))
	if len(ratios) == 0 {
		return ""
	}
	med, _ := median(ratios)
	return bashFixed(med, 2) + "× [" + bashFixed(ratios[0], 2) + "-" + bashFixed(ratios[len(ratios)-1], 2) + "]"
}

// pairVerdict is c's goal against the median of its ratios on the first
// pass of w, as printed with %.3f: "≤1.1× met" or "≤1.1× **missed**".
func (r *report) pairVerdict(w workload, c pairCol) string {
	med, _ := median(pairRatios(r.raw.samples("first", w.name, c.a), r.raw.samples("first", w.name, c.b)))
	if c.goal.met(awkVal(bashFixed(med, 3))) {
		return c.goal.String() + "× met"
	}
	return c.goal.String() + "× **missed**"
}

// auditLogs writes what each audited first-touch run wrote to its log,
// median over the repetitions; an empty log (the watch recorded nothing)
// and records the log says it lost are flagged.
func (r *report) auditLogs(runStrict bool, base, reps string) {
	if !r.raw.has("audit", "", "") {
		return
	}
	fts := r.raw.list("ft_targets")
	var ats []string
	for _, t := range auditTargets {
		if slices.Contains(fts, t) && r.raw.up(t) {
			ats = append(ats, t)
		}
	}
	if len(ats) == 0 {
		return
	}
	r.line("")
	r.linef("The audit log each audited run wrote (start-up and both passes), median over the %s repetitions: lines, size, lines per operation, and the records its \"dropped\" lines say were lost. roots and lookup are the session's own records; read, write, create, delete, rename and attr come from the fanotify watch (kernel path) or the daemon (--strict), and a walk opens no file, so it has none of them. An empty log means nothing at all was recorded:", reps)
	r.line("")
	r.ftTable(ats, runStrict, base, r.auditCell)
}

// auditCell is the audit log of the runs of w on t: "29244 lines, 7.08 MB
// (read 29240, dropped 2); **3 of 5 runs lost records (median 9800, most
// 10760)**", medians of the repetitions whose log exists (an operation
// absent from one counts 0 there; one whose median is 0 is left out).
func (r *report) auditCell(w, t string) string {
	type logRun struct {
		bytes, lines, lost string
		ops                map[string]string
	}
	var runs []*logRun
	byRep := map[int]*logRun{}
	missing := 0
	for _, row := range r.raw.Rows {
		if row.Step != "audit" || row.Workload != w || row.Target != t || row.Rep < 1 {
			continue
		}
		if row.Metric == "fail" {
			missing++
			continue
		}
		lr := byRep[row.Rep]
		if lr == nil {
			lr = &logRun{ops: map[string]string{}}
			byRep[row.Rep] = lr
			runs = append(runs, lr)
		}
		switch {
		case row.Metric == "bytes":
			lr.bytes = row.Value
		case row.Metric == "lines":
			lr.lines = row.Value
		case row.Metric == "lost":
			lr.lost = row.Value
		case strings.HasPrefix(row.Metric, "op_"):
			lr.ops[strings.TrimPrefix(row.Metric, "op_")] = row.Value
		}
	}
	if len(runs) == 0 {
		if missing > 0 {
			return "**no log written**"
		}
		return "n/a"
	}
	col := func(f func(*logRun) string) string {
		vs := make([]string, len(runs))
		for i, lr := range runs {
			vs[i] = f(lr)
		}
		m, _ := median(vs)
		return m
	}
	var notes []string
	empty := 0
	for _, lr := range runs {
		if awkVal(lr.lines) == 0 {
			empty++
		}
	}
	lines := col(func(lr *logRun) string { return lr.lines })
	var text string
	if awkVal(lines) == 0 {
		text = "**empty (0 lines): nothing recorded**"
	} else {
		type opCount struct {
			op string
			n  float64
		}
		var ops []opCount
		seen := map[string]bool{}
		for _, lr := range runs {
			for op := range lr.ops {
				if !seen[op] {
					seen[op] = true
					m := col(func(lr *logRun) string { return lr.ops[op] })
					if awkVal(m) > 0 {
						ops = append(ops, opCount{op, awkVal(m)})
					}
				}
			}
		}
		slices.SortFunc(ops, func(a, b opCount) int {
			if c := cmp.Compare(b.n, a.n); c != 0 {
				return c
			}
			return strings.Compare(a.op, b.op)
		})
		parts := make([]string, len(ops))
		for i, o := range ops {
			parts[i] = o.op + " " + awkNum(o.n)
		}
		text = fmt.Sprintf("%s lines, %s (%s)", awkNum(awkVal(lines)), byteSize(awkVal(col(func(lr *logRun) string { return lr.bytes }))), strings.Join(parts, ", "))
	}
	// Any loss is flagged, not only a median one: a log that lost records
	// in one run in five is incomplete there.
	lossy, most := 0, 0.0
	for _, lr := range runs {
		if n := awkVal(lr.lost); n > 0 {
			lossy++
			most = max(most, n)
		}
	}
	if lossy > 0 {
		text += fmt.Sprintf("; **%d of %d runs lost records (median %s, most %s)**", lossy, len(runs),
			awkNum(awkVal(col(func(lr *logRun) string { return lr.lost }))), awkNum(most))
	}
	if empty > 0 && awkVal(lines) != 0 {
		notes = append(notes, fmt.Sprintf("**%d runs wrote an empty log**", empty))
	}
	if missing > 0 {
		notes = append(notes, fmt.Sprintf("**%d runs wrote no log**", missing))
	}
	if len(notes) > 0 {
		text += " (" + strings.Join(notes, ", ") + ")"
	}
	return text
}
