package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSplice(t *testing.T) {
	block := beginMarker + "\n\nnew\n\n" + endMarker + "\n"
	tests := []struct {
		name   string
		doc    string
		want   string
		wantOK bool
	}{
		{
			name:   "notes before and after are kept",
			doc:    "# head\n\n" + beginMarker + "\nold\n" + endMarker + "\n\n## Notes\nby hand\n",
			want:   "# head\n\n" + block + "\n## Notes\nby hand\n",
			wantOK: true,
		},
		{
			name:   "no newline at the end",
			doc:    beginMarker + "\nold\n" + endMarker + "\ntail",
			want:   block + "tail\n",
			wantOK: true,
		},
		{name: "no markers", doc: "# just notes\n", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := splice(tt.doc, block)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("splice = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRunSplicesFile(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "BENCHMARKS.md")
	notes := "\n## Notes\n\nwritten by hand\n"
	if err := os.WriteFile(md, []byte("# rootfs benchmarks\n\n"+beginMarker+"\nstale\n"+endMarker+"\n"+notes), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-o", md, "testdata/golden.raw.tsv"}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("testdata/golden.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# rootfs benchmarks\n\n" + string(golden) + notes; string(got) != want {
		t.Errorf("spliced file:\n%s\nwant:\n%s", got, want)
	}

	var stdout strings.Builder
	if err := run([]string{"testdata/golden.raw.tsv"}, &stdout); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != string(golden) {
		t.Errorf("stdout differs from testdata/golden.md")
	}
	if err := run(nil, nil); err == nil {
		t.Errorf("run without a raw file: no error")
	}
}
