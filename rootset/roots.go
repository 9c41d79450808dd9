package rootset

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"
)

// Root is one root as it arrives: from MCP (uri, name, _meta) or from a
// command-line flag (an absolute path or a file:// URI).
type Root struct {
	// URI is "file:///abs/path", "file://localhost/abs/path" or, from flags
	// only, an absolute path.
	URI string
	// Name is the MCP root's human-readable name. It is metadata only and
	// never becomes the entry name: a client could otherwise name two roots
	// alike, or name one "..".
	Name string
	// Meta is the MCP root's _meta object, verbatim; nil when absent.
	Meta json.RawMessage
}

// UnionRoots returns a followed by the roots of b whose path is not that
// of a root already in the list (a root that does not parse is kept: the
// table says what is wrong with it).
func UnionRoots(a, b []Root) []Root {
	out := append([]Root(nil), a...)
	seen := map[string]bool{}
	for _, r := range a {
		if p, err := ParseRoot(r.URI); err == nil {
			seen[p] = true
		}
	}
	for _, r := range b {
		p, err := ParseRoot(r.URI)
		if err == nil && seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, r)
	}
	return out
}

// LogField is the root as it was given, for a log line: under "uri" when
// it is a URI, under "path" when it is a path (from a flag), so that the
// field's name says what it holds.
func (r Root) LogField() zap.Field {
	if u, err := url.Parse(r.URI); err == nil && u.Scheme != "" {
		return zap.String("uri", r.URI)
	}
	return zap.String("path", r.URI)
}

// Sentinel errors wrapped by Skipped.Reason; callers branch with errors.Is.
var (
	// ErrBadRoot marks a root whose URI or path is not acceptable.
	ErrBadRoot = errors.New("bad root")
	// ErrNotAllowed marks a root that resolves outside every --allow directory.
	ErrNotAllowed = errors.New("root outside the allowed directories")
	// ErrWritableSymlink marks a root whose path goes through a symlink in a
	// directory the sandboxed side can write, or could earlier (see WriteSet):
	// the server may have planted it to point anywhere.
	ErrWritableSymlink = errors.New("symlink the server could have planted")
	// ErrTooManyWritable marks a writable root refused because its WriteSet
	// is full.
	ErrTooManyWritable = errors.New("too many writable directories served in this session")
)

// EpollHackName is the name go-fuse intercepts at a mount's top level: no
// entry takes it, whatever the options, so that a table built without the
// view names its entries as the view will.
const EpollHackName = ".go-fuse-epoll-hack"

// reservedAlways lists names that no entry may take whatever the options.
var reservedAlways = []string{EpollHackName}

// ParseRoot turns a root URI or absolute path into a lexically cleaned
// absolute host path. It does no I/O.
//
// Accepted forms follow RFC 8089: file:///abs, file://localhost/abs,
// file:/abs, and (for flags) a plain absolute path. Percent-encoding is
// decoded once; dot segments, encoded or not, are then removed lexically, so
// a root always names the path its decoded text spells and never more. An
// encoded separator (%2F) cannot be part of a Linux file name and is refused
// rather than reinterpreted. Every refusal wraps ErrBadRoot.
func ParseRoot(s string) (string, error) {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrBadRoot, s, why) }
	if s == "" {
		return "", bad("empty; give an absolute path or a file:/// URI")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", bad("contains a NUL byte")
	}
	if strings.HasPrefix(s, "/") {
		return path.Clean(s), nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", bad("not a valid URI: " + strings.TrimPrefix(err.Error(), "parse "+strconv.Quote(s)+": "))
	}
	switch {
	case u.Scheme == "":
		return "", bad("relative path or URI; give an absolute path or a file:/// URI")
	case !strings.EqualFold(u.Scheme, "file"):
		return "", bad("scheme " + strconv.Quote(u.Scheme) + " is not supported; only file:// URIs name local folders")
	case u.Opaque != "":
		return "", bad("relative file URI; use file:///absolute/path")
	case u.User != nil:
		return "", bad("file URIs carry no user information")
	case u.Host != "" && !strings.EqualFold(u.Host, "localhost"):
		return "", bad("host " + strconv.Quote(u.Host) + " is not this machine; use file:///path or file://localhost/path")
	case u.RawQuery != "" || u.ForceQuery:
		return "", bad("has a query ('?'); percent-encode it as %3F if it is part of the name")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "", bad("has a fragment ('#'); percent-encode it as %23 if it is part of the name")
	}
	raw := u.EscapedPath()
	if low := strings.ToLower(raw); strings.Contains(low, "%2f") || strings.Contains(low, "%00") {
		return "", bad("an encoded '/' or NUL cannot be part of a file name")
	}
	p := u.Path
	if p == "" {
		return "", bad("empty path; use file:///absolute/path")
	}
	if !strings.HasPrefix(p, "/") {
		return "", bad("path is not absolute")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", bad("contains a NUL byte")
	}
	return path.Clean(p), nil
}

// TableOptions control how BuildTable admits and names roots. The zero value
// admits every root that resolves.
type TableOptions struct {
	// Allow, when non-empty, admits only roots that resolve (after symlinks)
	// to one of these directories or to something beneath one of them.
	// Containment is decided on the resolved inodes, never on path strings.
	// The directories are resolved for each table like roots; one reached
	// through a symlink Written refuses is left out, and the restriction
	// stays on even when none is left.
	Allow []string
	// Reserved lists entry names that the view itself uses, such as the
	// sandbox's runtime placeholders ("usr", "etc", "proc"). A root whose
	// name would collide is renamed like any other collision.
	Reserved []string
	// Written, when set, is the session's record of every directory the
	// sandboxed side can write or could write earlier. A root whose path
	// goes through a symlink lying in one of those directories (or beneath
	// one) is refused with ErrWritableSymlink; the directory entries of the
	// table, and of the table's other roots while it is built, count as
	// written unless ReadOnly. Nil follows every symlink (no sandboxed side
	// writes anything).
	Written *WriteSet
	// ReadOnly says the table's roots will be served read-only, so they do
	// not add to Written.
	ReadOnly bool
	// Layout says where each root appears: LayoutFlat (the zero value) at
	// /<Name>, LayoutHost at its own path. In host layout Reserved holds
	// paths relative to / ("usr", "home/me/.nvm/v20"), and a root at, above
	// or below one of them appears under its flat name instead (see
	// Entry.Displaced), except below those named in Beneath.
	Layout Layout
	// Beneath lists the reserved paths under which a root may still appear
	// at its own path in host layout ("tmp": the sandbox's private /tmp
	// shows roots below it).
	Beneath []string
}

// Layout says where a root appears in the view.
type Layout int

const (
	// LayoutFlat puts each root at /<name>, its last path element made
	// unique: short paths that say nothing of the host.
	LayoutFlat Layout = iota
	// LayoutHost puts each root at its own host path, below synthetic
	// read-only directories that list only what leads to a root, so that
	// the paths a client names work unchanged.
	LayoutHost
)

// String is the flag value: "flat" or "host".
func (l Layout) String() string {
	if l == LayoutHost {
		return "host"
	}
	return "flat"
}

// ParseLayout reads a --layout value.
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "host":
		return LayoutHost, nil
	case "flat":
		return LayoutFlat, nil
	}
	return LayoutFlat, fmt.Errorf("layout %q: want host (each root at its own path) or flat (each root at /NAME)", s)
}

// DefaultWriteLimit is the number of distinct writable directories a WriteSet
// from NewWriteSet remembers.
const DefaultWriteLimit = 1024

// WriteSet remembers, for one session, every directory the sandboxed side
// can write or could write at some point: the writable roots of every table
// built with it, and what AddPath adds (read-write binds). Anything the
// server planted there (a symlink, a renamed directory) stays on the host
// after the root is gone, so the set never forgets. Each member is held by an
// O_PATH descriptor, so its device and inode numbers cannot be reused by
// another directory while the session lasts. The set is bounded: once full,
// a writable root that would add a directory is refused (ErrTooManyWritable)
// rather than admitted unrecorded. It is safe for concurrent use.
type WriteSet struct {
	mu    sync.Mutex
	limit int
	fds   map[fileID]int
}

type fileID struct{ dev, ino uint64 }

// NewWriteSet returns an empty set that holds at most limit directories
// (DefaultWriteLimit when limit <= 0).
func NewWriteSet(limit int) *WriteSet {
	if limit <= 0 {
		limit = DefaultWriteLimit
	}
	return &WriteSet{limit: limit, fds: map[fileID]int{}}
}

// AddPath records the directory at p (symlinks followed: it comes from the
// person's command line, before the sandbox starts). A regular file holds no
// names and is not recorded.
func (w *WriteSet) AddPath(p string) error {
	fd, id, isDir, err := pinPath(p)
	if err != nil {
		return err
	}
	if !isDir {
		closeFD(fd)
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.addLocked(id, fd)
}

// addLocked takes ownership of fd.
func (w *WriteSet) addLocked(id fileID, fd int) error {
	if _, ok := w.fds[id]; ok {
		closeFD(fd)
		return nil
	}
	if len(w.fds) >= w.limit {
		closeFD(fd)
		return fmt.Errorf("%w (limit %d); restart rootfs to serve others", ErrTooManyWritable, w.limit)
	}
	w.fds[id] = fd
	return nil
}

// Len returns the number of directories recorded (0 for a nil set).
func (w *WriteSet) Len() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.fds)
}

// Close releases the descriptors; the set is empty afterwards. A nil set
// may be closed.
func (w *WriteSet) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, fd := range w.fds {
		closeFD(fd)
		delete(w.fds, id)
	}
	return nil
}

// matchLocked reports whether (dev, ino) is recorded or is in extra.
func (w *WriteSet) matchLocked(extra map[fileID]bool) func(dev, ino uint64) bool {
	return func(dev, ino uint64) bool {
		id := fileID{dev, ino}
		_, ok := w.fds[id]
		return ok || extra[id]
	}
}

// Entry is one top-level entry of the view. An Entry belongs to its Table and
// is immutable.
type Entry struct {
	// Name is the entry's flat name: the last element of the resolved
	// host path ("root" for "/"), with "-2", "-3"... appended in list order
	// when names collide. It is where the entry appears in flat layout, and
	// in host layout when Displaced.
	Name string
	// ViewPath is where the entry appears in the view, relative to its /
	// without a leading slash: Name in flat layout; in host layout the
	// root's own path as the client spelled it (lexically cleaned, symlinks
	// not resolved), or Name when Displaced.
	ViewPath string
	// Displaced, in host layout, says why the root is not at its own path
	// (it is /, holds or lies in a directory the sandbox provides itself);
	// nil otherwise.
	Displaced error
	// Covered, in host layout, says the root lies inside another entry of
	// the table: it is reached through that one (same path, same files)
	// and is not an entry of its own in the view.
	Covered bool
	// HostPath is the resolved host path at the time the table was built.
	// It is for messages and logs only; the view never accesses it by name.
	HostPath string
	// Root is the root this entry came from, verbatim.
	Root Root
	// IsDir is false for a single-file root.
	IsDir bool

	fd       int // pinned O_PATH descriptor, owned by the table
	dev, ino uint64
	mode     uint32
	lexical  string // the root's cleaned path before resolution
	host     bool   // placed at its own path (host layout, not displaced)
}

// FD returns the entry's pinned O_PATH descriptor. It is owned by the table
// and valid until the table is closed.
func (e *Entry) FD() int { return e.fd }

// Ident returns the device and inode numbers of the pinned root: two entries
// with the same Ident are the same host directory or file.
func (e *Entry) Ident() (dev, ino uint64) { return e.dev, e.ino }

// ViewURI returns the file:// URI under which the entry appears inside the
// sandbox, whose / is the view: the client's own URI, verbatim, for a root
// at its own path (a path from a flag becomes a file:// URI).
func (e *Entry) ViewURI() string {
	if e.host {
		if strings.HasPrefix(e.Root.URI, "/") {
			return (&url.URL{Scheme: "file", Path: e.lexical}).String()
		}
		return e.Root.URI
	}
	return (&url.URL{Scheme: "file", Path: "/" + e.ViewPath}).String()
}

// InView returns the entry's absolute path inside the view ("/" + ViewPath).
func (e *Entry) InView() string { return "/" + e.ViewPath }

// Skipped records a root that BuildTable left out.
type Skipped struct {
	Root Root
	// Reason wraps ErrBadRoot, ErrNotAllowed, fs.ErrNotExist, fs.ErrPermission
	// or another cause; its text is one line that names the root.
	Reason error
}

// Table is an immutable set of entries: once built it never changes, so
// readers may use it without locks. Replace it as a whole (vfs.View.Install).
type Table struct {
	entries []*Entry
	byName  map[string]*Entry
	skipped []Skipped

	closeOnce sync.Once
}

// Entries returns the entries in the order of the roots they came from. The
// slice and its entries must not be modified.
func (t *Table) Entries() []*Entry { return t.entries }

// Lookup returns the entry at ViewPath name ("app", or in host layout
// "home/me/src/app"), or nil.
func (t *Table) Lookup(name string) *Entry { return t.byName[name] }

// Skipped returns the roots that were left out, each with its reason.
func (t *Table) Skipped() []Skipped { return t.skipped }

// Close releases the pinned descriptors. It is idempotent. After Close the
// entries' FD values must not be used.
func (t *Table) Close() error {
	var err error
	t.closeOnce.Do(func() {
		for _, e := range t.entries {
			if cerr := closeFD(e.fd); cerr != nil && err == nil {
				err = cerr
			}
		}
	})
	return err
}

// EmptyTable returns a table with no entries.
func EmptyTable() *Table { return &Table{byName: map[string]*Entry{}} }

// BuildTable resolves every root once and pins what it finds as an O_PATH
// descriptor; from then on the view reaches the root only through that
// descriptor, so renaming or replacing the host path later cannot redirect
// it. Symlinks are followed, except (with opts.Written) those lying in a
// directory the sandboxed side can write or could earlier, including the
// other writable roots of this same table: a root reached through one is
// refused. A root that cannot be parsed, resolved or admitted is left out and
// listed by Skipped without stopping the others. Roots that resolve to the
// same host inode collapse into the first; nested roots are kept. The result
// is never nil.
func BuildTable(roots []Root, opts TableOptions) *Table {
	w := opts.Written
	if w == nil {
		return build(roots, opts, nil, nil)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// The first pass finds this table's own writable directories, so that
	// the second refuses a root reached through a symlink inside another
	// root of the same table, as it would once that root had been served:
	// whether a root is admitted does not depend on the order of fetches.
	extra := map[fileID]bool{}
	if !opts.ReadOnly {
		first := build(roots, opts, w.matchLocked(nil), nil)
		for _, e := range first.entries {
			if e.IsDir {
				extra[fileID{e.dev, e.ino}] = true
			}
		}
		first.Close()
	}
	var admit func(*Entry) error
	if !opts.ReadOnly {
		admit = func(e *Entry) error {
			if !e.IsDir {
				return nil
			}
			fd, err := dupFD(e.fd)
			if err != nil {
				return err
			}
			return w.addLocked(fileID{e.dev, e.ino}, fd)
		}
	}
	return build(roots, opts, w.matchLocked(extra), admit)
}

// build makes the table; taint (may be nil) matches the directories whose
// symlinks are not followed, and admit (may be nil) is called for each entry
// before it is added: an error leaves the root out.
func build(roots []Root, opts TableOptions, taint func(dev, ino uint64) bool, admit func(*Entry) error) *Table {
	t := EmptyTable()
	allow, dropped, allowErr := openAllowed(opts.Allow, taint)
	defer closeAll(allow)
	taken := map[string]bool{}
	for _, n := range reservedAlways {
		taken[n] = true
	}
	for _, n := range opts.Reserved {
		taken[n] = true
		if opts.Layout == LayoutHost { // a path: its first element is a top-level name
			first, _, _ := strings.Cut(strings.Trim(n, "/"), "/")
			taken[first] = true
		}
	}
	seen := map[fileID]bool{}
	seenPath := map[string]bool{}
	for _, r := range roots {
		skip := func(err error) { t.skipped = append(t.skipped, Skipped{Root: r, Reason: err}) }
		p, err := ParseRoot(r.URI)
		if err != nil {
			skip(err)
			continue
		}
		if allowErr != nil {
			skip(allowErr)
			continue
		}
		e, err := resolve(p, taint)
		if err != nil {
			skip(fmt.Errorf("root %q: %w", r.URI, err))
			continue
		}
		e.Root = r
		e.lexical = p
		// Flat layout collapses roots that are one host inode; host
		// layout keeps two paths to one directory, two places a client
		// names, and collapses only the same path.
		id := fileID{e.dev, e.ino}
		if opts.Layout == LayoutHost && seenPath[p] || opts.Layout != LayoutHost && seen[id] {
			closeFD(e.fd)
			continue
		}
		if len(opts.Allow) > 0 { // even when every --allow directory was dropped
			ok, err := beneathAny(e, allow)
			if err != nil || !ok {
				closeFD(e.fd)
				if err == nil {
					err = fmt.Errorf("%w: root %q resolves to %s, which is not within %s", ErrNotAllowed, r.URI, e.HostPath, strings.Join(opts.Allow, ", "))
					if len(dropped) > 0 {
						err = fmt.Errorf("%w (%s)", err, strings.Join(dropped, "; "))
					}
				} else {
					err = fmt.Errorf("root %q: checking --allow: %w", r.URI, err)
				}
				skip(err)
				continue
			}
		}
		if admit != nil {
			if err := admit(e); err != nil {
				closeFD(e.fd)
				skip(fmt.Errorf("root %q: %w", r.URI, err))
				continue
			}
		}
		seen[id], seenPath[p] = true, true
		t.entries = append(t.entries, e)
	}
	if opts.Layout == LayoutHost {
		place(t.entries, opts)
		for _, e := range t.entries {
			if e.host {
				first, _, _ := strings.Cut(e.ViewPath, "/")
				taken[first] = true
			}
		}
	}
	for _, e := range t.entries {
		e.Name = uniqueName(baseName(e.HostPath), taken)
		taken[e.Name] = true
		if !e.host {
			e.ViewPath = e.Name
		}
		t.byName[e.ViewPath] = e
	}
	return t
}

// place decides, in host layout, which entries appear at their own path:
// not /, not at, above or below a reserved path (below one of Beneath is
// fine), and marks those inside another placed directory entry Covered.
func place(entries []*Entry, opts TableOptions) {
	beneath := map[string]bool{}
	for _, b := range opts.Beneath {
		beneath[strings.Trim(b, "/")] = true
	}
	for _, e := range entries {
		vp := strings.TrimPrefix(e.lexical, "/")
		if vp == "" {
			e.Displaced = fmt.Errorf("root %q is /, which would cover the sandbox's own directories: it appears as /%s", e.Root.URI, baseName(e.HostPath))
			continue
		}
		for _, r := range opts.Reserved {
			r = strings.Trim(r, "/")
			switch {
			case r == "" || r == vp:
				e.Displaced = fmt.Errorf("root %q is the sandbox's own /%s", e.Root.URI, r)
			case strings.HasPrefix(r, vp+"/"):
				e.Displaced = fmt.Errorf("root %q would cover the sandbox's own /%s", e.Root.URI, r)
			case strings.HasPrefix(vp, r+"/") && !beneath[r]:
				e.Displaced = fmt.Errorf("root %q lies in the sandbox's own /%s", e.Root.URI, r)
			default:
				continue
			}
			break
		}
		if e.Displaced == nil {
			e.ViewPath, e.host = vp, true
		}
	}
	// A root inside another is reached through it, by the view's own path
	// resolution: only when it lies there on the host too (no symlink on
	// the way leads elsewhere) does that reach the same files; otherwise
	// it appears under its flat name. Each is checked against the
	// outermost root it lies in, so the outcome does not depend on order.
	var outer []*Entry
	for _, e := range entries {
		var o *Entry
		for _, d := range entries {
			if d != e && d.host && d.IsDir && strings.HasPrefix(e.ViewPath, d.ViewPath+"/") && (o == nil || len(d.ViewPath) < len(o.ViewPath)) {
				o = d
			}
		}
		outer = append(outer, o)
	}
	for i, e := range entries {
		if o := outer[i]; e.host && o != nil && e.HostPath != path.Join(o.HostPath, strings.TrimPrefix(e.ViewPath, o.ViewPath)) {
			e.Displaced = fmt.Errorf("root %q lies in root %q, but a symlink on the way leads to %s, which the view cannot show at that path: it appears under its own name", e.Root.URI, o.Root.URI, e.HostPath)
			e.ViewPath, e.host = "", false
		}
	}
	for _, e := range entries {
		if !e.host {
			continue
		}
		for _, d := range entries {
			if d != e && d.host && d.IsDir && strings.HasPrefix(e.ViewPath, d.ViewPath+"/") {
				e.Covered = true
				break
			}
		}
	}
}

func baseName(p string) string {
	if p == "/" {
		return "root"
	}
	return path.Base(p)
}

func uniqueName(base string, taken map[string]bool) string {
	if !taken[base] {
		return base
	}
	for i := 2; ; i++ {
		n := base + "-" + strconv.Itoa(i)
		if !taken[n] {
			return n
		}
	}
}

// describe gives a one-line reason for a resolve failure.
func describe(op, p string, err error) error {
	return &fs.PathError{Op: op, Path: p, Err: err}
}
