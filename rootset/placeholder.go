package rootset

// Placeholder is a name the view provides itself, for the sandbox to mount
// its runtime directories and binds on: an empty read-only directory, an
// empty read-only file when File is set (a single-file bind), or a symlink
// when Symlink is set ("bin" -> "usr/bin"). In flat layout Name is a
// top-level name; in host layout it may be a path relative to /
// ("home/me/.nvm/versions/node/v20"), below synthetic directories.
type Placeholder struct {
	Name    string
	Symlink string // empty: a directory (or a file, with File)
	File    bool
}
