package main

import (
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// The statistics below reproduce what the shell renderer computed with
// sort -g, mawk and bash's printf, down to the text of each number, so that
// a report rebuilt from a raw file is the report the run printed:
//
//   - a median of an odd count is the middle value's own text; of an even
//     count, the mean of the two middle values as mawk prints a number
//     (awkNum), which a later step reads back;
//   - arithmetic is float64, as in mawk, and printf verbs are the C ones,
//     which Go's fmt matches for %f and %e on the same double;
//   - the per-repetition ratios were printed by bash's printf, which reads
//     its argument as a C long double (64-bit mantissa) before rounding, so
//     bashFixed rounds through a 64-bit big.Float.

// median returns the median of vals as the shell printed it, and false when
// vals is empty.
func median(vals []string) (string, bool) {
	if len(vals) == 0 {
		return "", false
	}
	s := sortGeneral(vals)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return awkNum((awkVal(s[n/2-1]) + awkVal(s[n/2])) / 2), true
}

// sortGeneral returns vals sorted as sort -g does: by numeric value, then
// (for equal values) by their text.
func sortGeneral(vals []string) []string {
	s := slices.Clone(vals)
	slices.SortStableFunc(s, func(a, b string) int {
		x, y := awkVal(a), awkVal(b)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return strings.Compare(a, b)
	})
	return s
}

// awkNum formats f as mawk's print does: an integral value that fits in a
// 32-bit int as an integer, anything else with OFMT, "%.6g".
func awkNum(f float64) string {
	if f == math.Trunc(f) && f >= -math.MaxInt32 && f <= math.MaxInt32 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 6, 64)
}

// awkVal is the number awk reads from s: its longest numeric prefix, 0 when
// there is none (so "" is 0, as an unset awk -v variable is).
func awkVal(s string) float64 {
	s = strings.TrimLeft(s, " \t")
	for end := len(s); end > 0; end-- {
		if f, err := strconv.ParseFloat(s[:end], 64); err == nil {
			return f
		}
	}
	return 0
}

// bashFixed formats the decimal text s with prec digits after the point, as
// bash's printf %.Nf does: through a long double, rounding half to even.
func bashFixed(s string, prec int) string {
	f, _, err := big.ParseFloat(strings.TrimSpace(s), 10, 64, big.ToNearestEven)
	if err != nil {
		f = big.NewFloat(awkVal(s))
	}
	return f.Text('f', prec)
}

// isDigits reports whether s is a non-empty run of ASCII digits: awk's
// /^[0-9]+$/, a successful timed run.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// pairRatios returns a's time over b's time for each position both have a
// successful run with b's above zero, each as "%.6f", sorted. Positions are
// the order the runs were recorded in, failed runs included, as the shell
// split its sample lists: a repetition whose first pass failed has no
// second-pass sample, so later second-pass samples pair with the next
// repetition's.
func pairRatios(a, b []sample) []string {
	var out []string
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := token(a[i]), token(b[i])
		if !isDigits(x) || !isDigits(y) || awkVal(y) <= 0 {
			continue
		}
		out = append(out, strconv.FormatFloat(awkVal(x)/awkVal(y), 'f', 6, 64))
	}
	return sortGeneral(out)
}

// token is a sample as the shell listed it: its value, or "fail".
func token(s sample) string {
	if s.ok {
		return s.value
	}
	return "fail"
}

// okValues returns the values of the successful runs among ss.
func okValues(ss []sample) []string {
	var out []string
	for _, s := range ss {
		if s.ok {
			out = append(out, s.value)
		}
	}
	return out
}
