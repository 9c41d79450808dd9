package rootset

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxRoots bounds the roots of one roots document (DecodeRoots): each root
// that is admitted holds a descriptor open.
const MaxRoots = 1024

// ErrTooManyRoots is DecodeRoots's error for a document with more roots than
// its limit: the caller tells the user which bound refused the whole document.
var ErrTooManyRoots = errors.New("too many roots")

// DecodeRoots decodes a document shaped like MCP's ListRootsResult,
// {"roots":[{"uri":...,"name":...,"_meta":{...}}]}, from a client's
// roots/list answer or from a --roots-file. It is the one decoder of roots
// JSON, with one set of rules:
//
//   - the document must be an object whose "roots" is an array (not missing,
//     not null) of at most limit elements (no bound when limit <= 0);
//     otherwise err says why (wrapping ErrTooManyRoots past limit) and
//     nothing is returned;
//   - an element is dropped, with a one-line reason in dropped, when it is
//     not an object, its "uri" is missing, not a string, or not valid UTF-8,
//     its "name" is present and not a string, or its "_meta" is present and
//     neither an object nor null.
//
// What a dropped element means is the caller's: the bridge logs it and goes
// on, a roots file is refused whole. DecodeRoots does no I/O; BuildTable
// judges the URIs.
func DecodeRoots(data []byte, limit int) (roots []Root, dropped []error, err error) {
	if d := strings.TrimLeft(string(data), " \t\r\n"); d == "" || d[0] != '{' {
		return nil, nil, errors.New("not an object; expected {\"roots\":[{\"uri\":\"file:///path\"}]}")
	}
	var doc struct {
		Roots *[]json.RawMessage `json:"roots"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("not valid roots JSON (%v); expected {\"roots\":[{\"uri\":\"file:///path\"}]}", err)
	}
	if doc.Roots == nil {
		return nil, nil, errors.New("no \"roots\" array (missing or null); expected {\"roots\":[{\"uri\":\"file:///path\"}]}")
	}
	if limit > 0 && len(*doc.Roots) > limit {
		return nil, nil, fmt.Errorf("%w: %d, rootfs serves at most %d", ErrTooManyRoots, len(*doc.Roots), limit)
	}
	roots = make([]Root, 0, len(*doc.Roots))
	for i, raw := range *doc.Roots {
		drop := func(why string) { dropped = append(dropped, fmt.Errorf("roots[%d]: %s", i, why)) }
		var w struct {
			URI  *string         `json:"uri"`
			Name *string         `json:"name"`
			Meta json.RawMessage `json:"_meta"`
		}
		if len(raw) == 0 || raw[0] != '{' {
			drop("not an object")
			continue
		}
		if err := json.Unmarshal(raw, &w); err != nil {
			drop(err.Error())
			continue
		}
		if w.URI == nil {
			drop("has no \"uri\"")
			continue
		}
		if !utf8.ValidString(*w.URI) || strings.ContainsRune(*w.URI, utf8.RuneError) {
			drop("\"uri\" is not valid UTF-8")
			continue
		}
		root := Root{URI: *w.URI}
		if w.Name != nil {
			root.Name = *w.Name
		}
		switch {
		case len(w.Meta) == 0 || string(w.Meta) == "null":
		case w.Meta[0] == '{':
			root.Meta = append(json.RawMessage(nil), w.Meta...)
		default:
			drop("\"_meta\" is not an object")
			continue
		}
		roots = append(roots, root)
	}
	return roots, dropped, nil
}
