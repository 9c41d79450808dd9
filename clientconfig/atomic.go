package clientconfig

import (
	"io/fs"
	"os"
)

// fill writes data to f, a new temporary file, gives it the mode (and, as
// root, the owner) that st describes, syncs and closes it: everything the
// atomic write does before its rename, on every platform.
func fill(f *os.File, data []byte, st fs.FileInfo) error {
	err := func() error {
		if _, err := f.Write(data); err != nil {
			return err
		}
		if err := f.Chmod(st.Mode().Perm()); err != nil {
			return err
		}
		if err := keepOwner(f, st); err != nil {
			return err
		}
		return f.Sync()
	}()
	if err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
