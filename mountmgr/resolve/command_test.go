package resolve

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestResolveCommand(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("x"), 0o644)
	tests := []struct {
		name, cmd, path, want string
		wantErr               error
	}{
		{"in path", "tool", "relative:" + dir, exe, nil},
		{"absolute", exe, "", exe, nil},
		{"missing", "nope-rootfs", dir, "", ErrCommandNotFound},
		{"missing absolute", filepath.Join(dir, "nope"), "", "", ErrCommandNotFound},
		{"not executable", plain, "", "", ErrCommandNotExecutable},
		{"not executable in path", "plain", dir, "", ErrCommandNotExecutable},
		{"directory", dir, "", "", ErrCommandNotExecutable},
		{"empty", "", dir, "", ErrCommandNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Command(tt.cmd, tt.path)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}
