package resolve

// An ELF file's loader and libraries (see autobind.go's section comment).

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// elf follows an ELF file's loader and its libraries outside the system's.
func (r *resolver) elf(p string, isExec, taint bool) error {
	f, err := elf.Open(p)
	if err != nil {
		return nil // not ours to judge: exec will say
	}
	defer f.Close()
	if isExec {
		for _, prog := range f.Progs {
			if prog.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err != nil {
				continue
			}
			interp := strings.TrimRight(string(b), "\x00")
			links, err := chain(interp, p)
			if err != nil {
				var me *MissingError
				if errors.As(err, &me) {
					me.What = "ELF loader"
				}
				return err
			}
			for _, l := range links {
				if !r.refuseTainted(l, taint) {
					r.addFile(l, "loader")
				}
			}
		}
	}
	needed, rpath, runpath := dynStrings(f)
	origin := filepath.Dir(p)
	var dirs []string
	split := func(list []string) {
		for _, l := range list {
			for _, d := range strings.Split(l, ":") {
				d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
				if filepath.IsAbs(d) {
					dirs = append(dirs, filepath.Clean(d))
				}
			}
		}
	}
	if len(runpath) == 0 {
		split(rpath)
	}
	split([]string{r.envValue("LD_LIBRARY_PATH")})
	split(runpath)
	for _, name := range needed {
		if strings.Contains(name, "/") || r.libs >= maxLibraries {
			continue
		}
		if name == "." || name == ".." {
			continue // a directory, never a library
		}
		for _, d := range dirs {
			lib := filepath.Join(d, name)
			if fi, err := os.Stat(lib); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			links, err := chain(lib, p)
			if err != nil {
				break
			}
			final := links[len(links)-1]
			if !r.visited[final] {
				r.visited[final] = true
				r.libs++
				// A library in a read-write root (found through
				// LD_LIBRARY_PATH or an RPATH) is the server's to
				// rewrite: what it names is tainted too.
				libTaint := taint
				for _, l := range links {
					libTaint = libTaint || r.untrusted(l)
				}
				for _, l := range links {
					if !r.refuseTainted(l, libTaint) {
						r.addFile(l, "library")
					}
				}
				if err := r.elf(final, false, libTaint); err != nil {
					return err
				}
			}
			break
		}
	}
	return nil
}

// maxDynString bounds one string read from .dynstr.
const maxDynString = 4096

// dynStrings returns an ELF file's DT_NEEDED, DT_RPATH and DT_RUNPATH
// strings, reading each from .dynstr where .dynamic points: elf.File.
// DynString loads the whole string table, 5 MB for node, three times,
// which was most of rootfs run's start-up.
func dynStrings(f *elf.File) (needed, rpath, runpath []string) {
	dyn, str := f.Section(".dynamic"), f.Section(".dynstr")
	if dyn == nil || str == nil || dyn.Type != elf.SHT_DYNAMIC {
		needed, _ = f.DynString(elf.DT_NEEDED)
		rpath, _ = f.DynString(elf.DT_RPATH)
		runpath, _ = f.DynString(elf.DT_RUNPATH)
		return needed, rpath, runpath
	}
	data, err := dyn.Data()
	if err != nil {
		return nil, nil, nil
	}
	read := func(off uint64) (string, bool) {
		if off >= str.Size {
			return "", false
		}
		buf := make([]byte, min(uint64(maxDynString), str.Size-off))
		n, _ := str.ReadAt(buf, int64(off))
		s, _, ok := strings.Cut(string(buf[:n]), "\x00")
		return s, ok
	}
	entry := 16
	if f.Class == elf.ELFCLASS32 {
		entry = 8
	}
	for i := 0; i+entry <= len(data); i += entry {
		var tag, val uint64
		if f.Class == elf.ELFCLASS32 {
			tag, val = uint64(f.ByteOrder.Uint32(data[i:])), uint64(f.ByteOrder.Uint32(data[i+4:]))
		} else {
			tag, val = f.ByteOrder.Uint64(data[i:]), f.ByteOrder.Uint64(data[i+8:])
		}
		var list *[]string
		switch elf.DynTag(tag) {
		case elf.DT_NULL:
			return needed, rpath, runpath
		case elf.DT_NEEDED:
			list = &needed
		case elf.DT_RPATH:
			list = &rpath
		case elf.DT_RUNPATH:
			list = &runpath
		default:
			continue
		}
		if s, ok := read(val); ok {
			*list = append(*list, s)
		}
	}
	return needed, rpath, runpath
}
