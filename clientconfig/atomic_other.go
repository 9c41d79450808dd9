//go:build !linux

package clientconfig

import (
	"io/fs"
	"os"
	"path/filepath"
)

func readFile(name string) ([]byte, error) { return os.ReadFile(name) }

func writeAtomic(name string, data []byte, st fs.FileInfo) error {
	dir, base := filepath.Split(name)
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename this finds nothing
	if err := fill(f, data, st); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

func writeBackup(dir, file string, data []byte, st fs.FileInfo) error {
	name := BackupPath(dir, file)
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return err
	}
	return writeAtomic(name, data, st)
}
