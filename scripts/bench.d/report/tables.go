package main

import (
	"strconv"
	"strings"
)

// workload is what the report knows of one workload: its row label, where
// {key} stands for a size the run recorded (see sizes), the byte count that
// makes it a throughput row, and issue 6's goal for rootfs, warm.
type workload struct {
	name  string
	label string
	bytes string // a key of sizes; "" for a timed workload
	goal  *goal
}

// goal is a target for rootfs's ratio to native: at most ratio for a time
// (lower is better), at least ratio for a throughput.
type goal struct {
	atMost bool
	ratio  float64
}

func atMost(r float64) *goal  { return &goal{atMost: true, ratio: r} }
func atLeast(r float64) *goal { return &goal{ratio: r} }

// met reports whether a ratio, as printed with %.3f, meets g.
func (g *goal) met(ratio float64) bool {
	if g.atMost {
		return ratio <= g.ratio
	}
	return ratio >= g.ratio
}

// String is the goal as the verdict column shows it: "≤1.5" or "≥0.9".
func (g *goal) String() string {
	op := "≥"
	if g.atMost {
		op = "≤"
	}
	return op + strconv.FormatFloat(g.ratio, 'f', -1, 64)
}

// warmWorkloads are the rows of the main table, in order; each has a warm
// row and, where the run measured it, a cold one.
var warmWorkloads = []workload{
	{name: "walk_find", label: "metadata walk: find -type f, {n_walk} files", goal: atMost(1.5)},
	{name: "walk_stat", label: "stat walk: find -type f -size +0, {n_walk} files", goal: atMost(1.5)},
	{name: "bigdir_list", label: "one dir, {n_bigdir} entries: ls -f"},
	{name: "bigdir_stat", label: "one dir, {n_bigdir} entries: ls -l"},
	{name: "small_read", label: "open-read-close {n_small} files of 4 KiB (xargs cat)", goal: atMost(3)},
	{name: "seq_read", label: "sequential read, {seq_mb} MiB, dd bs=1M", bytes: "seq_bytes", goal: atLeast(0.9)},
	{name: "seq_write", label: "sequential write, {seq_mb} MiB, dd bs=1M (page cache)", bytes: "seq_bytes", goal: atLeast(0.8)},
	{name: "seq_write_fsync", label: "sequential write, {seq_mb} MiB, dd bs=1M conv=fsync", bytes: "seq_bytes", goal: atLeast(0.8)},
	{name: "write_4k", label: "4 KiB writes, {w4k_mib} MiB, dd bs=4k", bytes: "w4k_bytes", goal: atLeast(0.7)},
	{name: "git_status", label: "git status, {n_repo}-file repository", goal: atMost(1.5)},
	{name: "nm_walk_find", label: "walk, 7 per dir: find -type f, {n_nm} files", goal: atMost(1.5)},
	{name: "nm_walk_stat", label: "stat walk, 7 per dir: find -type f -size +1k, {n_nm} files", goal: atMost(1.5)},
	{name: "nm_read", label: "open-read-close {n_nm} files of 4 KiB, 7 per dir (xargs cat)", goal: atMost(3)},
	{name: "nm_git_status", label: "git status, {n_nmrepo}-file repository, 7 per dir", goal: atMost(1.5)},
}

// ftStart is the first-touch table's first row: the time from launch to
// the command's first instruction, recorded with every first-touch run.
var ftStart = workload{name: "ft_start", label: "start-up: launch to the command's first instruction"}

// ftWorkloads are the first-touch rows, in order.
var ftWorkloads = []workload{
	{name: "ft_walk", label: "walk: find -type f, {n_walk} files, 100 per dir"},
	{name: "ft_stat", label: "stat walk: find -type f -size +1k, {n_walk} files, 100 per dir"},
	{name: "ft_read", label: "read every file: grep -rl, {n_small} files of 4 KiB, 1000 per dir"},
	{name: "ft_git", label: "git status, {n_repo}-file repository, 50 per dir"},
	{name: "ftn_walk", label: "walk: find -type f, {n_nm} files, 7 per dir"},
	{name: "ftn_stat", label: "stat walk: find -type f -size +1k, {n_nm} files, 7 per dir"},
	{name: "ftn_read", label: "read every file: grep -rl, {n_nm} files of 4 KiB, 7 per dir"},
	{name: "ftn_git", label: "git status, {n_nmrepo}-file repository, 7 per dir"},
}

// verdictTargets are the targets that get an "vs issue 6" column, in order,
// when the run has them and they were measured.
var verdictTargets = []string{"rootfs", "rootfs-strict", "rootfs-pt", "rootfs-wb"}

// opNames are the oplat benchmarks the latency table shows, in order.
var opNames = []string{"Stat", "StatMissing", "OpenClose", "Pread4K", "Pwrite4K"}

// memTargets are the daemons the memory table shows, in order.
var memTargets = []string{"rootfs", "rootfs-strict", "rootfs-pt", "bindfs"}

// ftLabel is the column heading of first-touch target t. runStrict says
// whether the binary's "rootfs run" offers --strict, which decides what its
// default data path is; base is ROOTFS_BASE_LABEL.
func ftLabel(t string, runStrict bool, base string) string {
	switch {
	case t == "run" && runStrict:
		return "rootfs run (kernel path)"
	case t == "run":
		return "rootfs run (FUSE path: no --strict yet)"
	case t == "run-strict" && runStrict:
		return "rootfs run --strict"
	case t == "run-audit":
		return "rootfs run --audit-log (kernel path)"
	case t == "run-strict-audit":
		return "rootfs run --strict --audit-log"
	case t == "run-bind":
		return "rootfs run --bind"
	case t == "run-base":
		if base == "" {
			base = "ROOTFS_BASE_BIN"
		}
		return "rootfs run, " + base
	}
	return t
}

// pairCol is a column of the per-repetition ratio table: a's time over b's.
type pairCol struct {
	a, b string
	head string // {base} is ROOTFS_BASE_LABEL, or "base"
	// listed columns show only when the run lists both targets in
	// ft_targets; the others show unless a target is down, as the shell
	// renderer had them, so that the reports of older raw files stay the
	// same.
	listed bool
	// goal, when set, is the bound on the median ratio of the
	// first pass (first touch), and the cell says whether it was met.
	goal *goal
}

// pairCols are the per-repetition ratio columns, in order; a column shows
// when both of its targets were measured (and, if listed, were in the run).
var pairCols = []pairCol{
	{a: "run", b: "native", head: "kernel path / native"},
	{a: "run-bind", b: "native", head: "--bind / native"},
	{a: "run-strict", b: "native", head: "--strict / native"},
	{a: "run-base", b: "run-strict", head: "{base} / --strict (times faster)"},
	// The audit log (issue: "the kernel path with the log on stays within
	// 1.1x of native on first touch"; "the log never slows the view
	// measurably"): against native, and the log's own cost on each path.
	{a: "run-audit", b: "native", head: "audit log / native", listed: true, goal: atMost(1.1)},
	{a: "run-audit", b: "run", head: "audit / kernel path (run)", listed: true},
	{a: "run-strict-audit", b: "run-strict", head: "strict+audit / --strict", listed: true},
}

// auditTargets are the first-touch targets that write an audit log, in the
// order of the audit log table's columns.
var auditTargets = []string{"run-audit", "run-strict-audit"}

// sizeKeys are the facts that label templates and byte counts use.
var sizeKeys = []string{"n_walk", "n_bigdir", "n_small", "seq_mb", "n_4k", "n_repo", "n_nm", "n_nmrepo"}

// sizes returns the tree sizes of a run, by key, with the derived ones:
// seq_bytes and w4k_bytes (bytes a throughput workload moves) and w4k_mib.
func sizes(r *Raw) (map[string]int64, error) {
	m := map[string]int64{}
	for _, k := range sizeKeys {
		v, err := strconv.ParseInt(r.Meta(k), 10, 64)
		if err != nil {
			return nil, missingFact(k, r.Meta(k))
		}
		m[k] = v
	}
	m["seq_bytes"] = m["seq_mb"] << 20
	m["w4k_bytes"] = m["n_4k"] * 4096
	m["w4k_mib"] = m["n_4k"] * 4 / 1024
	return m, nil
}

// expand replaces each {key} in s with its value in vals.
func expand(s string, vals map[string]int64) string {
	for k, v := range vals {
		s = strings.ReplaceAll(s, "{"+k+"}", strconv.FormatInt(v, 10))
	}
	return s
}
