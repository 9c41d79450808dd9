package main

import (
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name   string
		vals   []string
		want   string
		wantOK bool
	}{
		{name: "empty", vals: nil, want: "", wantOK: false},
		{name: "one", vals: []string{"42"}, want: "42", wantOK: true},
		{name: "odd count keeps the value's text", vals: []string{"3", "1.50", "2"}, want: "2", wantOK: true},
		{name: "odd count, decimal text", vals: []string{"356.1", "400.0", "12.5"}, want: "356.1", wantOK: true},
		{name: "sorted by value, not text", vals: []string{"9", "10", "100"}, want: "10", wantOK: true},
		{name: "even count, integral mean", vals: []string{"4", "2"}, want: "3", wantOK: true},
		{name: "even count, half", vals: []string{"4", "5", "1", "100"}, want: "4.5", wantOK: true},
		// mawk prints a non-integral number with %.6g: a mean above a
		// second loses its half microsecond and more.
		{name: "even count, %.6g above 1e6", vals: []string{"1234567", "1234568"}, want: "1.23457e+06", wantOK: true},
		{name: "even count, integral above int32", vals: []string{"3000000000", "3000000002"}, want: "3e+09", wantOK: true},
		{name: "even count of ratios", vals: []string{"1.012345", "1.023456"}, want: "1.0179", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := median(tt.vals)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("median(%q) = %q, %v; want %q, %v", tt.vals, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestAwkNum(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{4, "4"},
		{2147483647, "2147483647"},
		{2147483648, "2.14748e+09"},
		{-2147483647, "-2147483647"},
		{-2147483648, "-2.14748e+09"},
		{99999.5, "99999.5"},
		{100000.5, "100000"},
		{1.5, "1.5"},
		{0.0001234, "0.0001234"},
		{0.00001234, "1.234e-05"},
	}
	for _, tt := range tests {
		if got := awkNum(tt.in); got != tt.want {
			t.Errorf("awkNum(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAwkVal(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"", 0},
		{"12", 12},
		{" 12.5", 12.5},
		{"1.23457e+06", 1234570},
		{"12 ms", 12},
		{"fail", 0},
	}
	for _, tt := range tests {
		if got := awkVal(tt.in); got != tt.want {
			t.Errorf("awkVal(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// bash's printf reads a long double: where the decimal lies between two
// doubles, it can round the other way from C's printf on a double (awk).
func TestBashFixed(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"1.015000", "1.01"},
		{"0.045", "0.05"}, // a double rounds this to 0.04
		{"0.055", "0.05"}, // and this to 0.06
		{"0.125", "0.12"}, // an exact tie rounds to even
		{"0.375", "0.38"},
		{"1.0179", "1.02"},
		{"18.390000", "18.39"},
		{"1.23457e+06", "1234570.00"},
	}
	for _, tt := range tests {
		if got := bashFixed(tt.in, 2); got != tt.want {
			t.Errorf("bashFixed(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPairRatios(t *testing.T) {
	ok := func(v string) sample { return sample{ok: true, value: v} }
	fail := sample{}
	tests := []struct {
		name string
		a, b []sample
		want []string
	}{
		{name: "none", a: nil, b: []sample{ok("10")}, want: nil},
		{name: "sorted", a: []sample{ok("30"), ok("10")}, b: []sample{ok("10"), ok("10")}, want: []string{"1.000000", "3.000000"}},
		{name: "failed runs drop their pair", a: []sample{ok("30"), fail, ok("20")}, b: []sample{ok("10"), ok("10"), fail}, want: []string{"3.000000"}},
		{name: "zero denominator", a: []sample{ok("5")}, b: []sample{ok("0")}, want: nil},
		{name: "longer side ignored", a: []sample{ok("2"), ok("9")}, b: []sample{ok("3")}, want: []string{"0.666667"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pairRatios(tt.a, tt.b); !slices.Equal(got, tt.want) {
				t.Errorf("pairRatios = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSortGeneral(t *testing.T) {
	got := sortGeneral([]string{"10", "9.5", "1e1", "2", "0.1"})
	want := []string{"0.1", "2", "9.5", "10", "1e1"}
	if !slices.Equal(got, want) {
		t.Errorf("sortGeneral = %q, want %q", got, want)
	}
}
