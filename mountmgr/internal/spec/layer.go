package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// # Persistent layers
//
// A launcher cache is the read-only lower layer of an overlay
// (Bind.Overlay): the server may write there, the cache the user runs
// unsandboxed never changes. What a server writes there is its own data
// as often as a launcher's bookkeeping: @modelcontextprotocol/server-memory
// keeps its knowledge graph beside its own code, in the npx cache. So the
// writable layer is kept, per server, below the user's state directory
// (LayerBase), and the server finds its writes at its next start:
//
//	BASE/LABEL-H/         one per server: the host user, COMMAND and its
//	                      arguments as given (H hashes them); mode 0700;
//	                      locked (flock) by the session that uses it
//	BASE/LABEL-H/C-L/upper what the server wrote to one cache (C names the
//	                      cache's kind, L hashes its path): the overlay's
//	                      upper layer, with the cache's mode and owner
//	BASE/LABEL-H/C-L/work overlayfs's work directory
//
// LABEL is for people ("npx-server-memory"); the hash decides. A
// different command line is a different server, which never sees this
// one's layer (it is not in its sandbox; the directory is not a root).
// The same command line in two projects shares its layer, as the same
// server unwrapped shares its files in the cache. The host user is part
// of the key because a layer made as root (trusted.overlay.* attributes,
// files owned by root) does not work for the user's own sessions (a user
// namespace, user.overlay.* attributes) and the other way round.
//
// The cache may change between sessions (npm updates the package). The
// overlay allows it, and a file the server wrote or changed shadows the
// cache's new one; a package that npx installed into the layer because the
// cache lacked it stays at its version. "rm -r BASE/LABEL-H" starts the
// server afresh: the note printed when the layer is made says so, and
// "rootfs run --dry-run" names the directory.
//
// Nothing bounds the layer's size but the disk: at each start a large
// layer is named in a warning (mountmgr.PrepareLayers). A second session
// of the same server while one runs (two clients) cannot share the layer
// (the kernel leaves two overlays on one upper layer undefined): it gets a
// layer in its /tmp and a warning that its writes vanish. So does a session whose
// layer cannot be made or mounted: no write is lost without a line on
// stderr saying so. "rootfs run --cache-writes discard" puts every
// cache's writes in /tmp, as before layers were kept.

// LayerBase is the directory below which the layers are kept: rootfs/overlay
// in the user's state directory, $XDG_STATE_HOME or, when that is unset
// or relative (as the XDG base directory specification says),
// home/.local/state. It is "" when neither is known.
func LayerBase(home, xdgStateHome string) string {
	state := xdgStateHome
	if !filepath.IsAbs(state) {
		if !filepath.IsAbs(home) {
			return ""
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(filepath.Clean(state), "rootfs", "overlay")
}

// LayerDir is the layer of the server argv (COMMAND as given, then its
// arguments), run for the host user uid, for the cache lower of the kind
// reason ("npm cache"), below base.
func LayerDir(base string, uid int, argv []string, reason, lower string) string {
	h := sha256.New()
	h.Write([]byte("rootfs layer 1\x00" + strconv.Itoa(uid)))
	for _, a := range argv {
		h.Write([]byte("\x00" + a))
	}
	server := layerLabel(argv) + "-" + hex.EncodeToString(h.Sum(nil))[:16]
	l := sha256.Sum256([]byte(lower))
	return filepath.Join(base, server, slug(reason)+"-"+hex.EncodeToString(l[:])[:8])
}

// layerLabel names a server for people: the command's base name and the
// base name of its first operand ("npx -y @scope/server-x" is
// "npx-server-x"), in characters safe in a file name.
func layerLabel(argv []string) string {
	if len(argv) == 0 {
		return "server"
	}
	parts := []string{path.Base(argv[0])}
	for _, a := range argv[1:] {
		if a != "" && !strings.HasPrefix(a, "-") {
			parts = append(parts, path.Base(a))
			break
		}
	}
	s := strings.TrimLeft(slug(strings.Join(parts, "-")), ".-")
	if len(s) > 48 {
		s = s[:48]
	}
	if s == "" {
		return "server"
	}
	return s
}

// slug keeps letters, digits, '.', '_' and '-', and turns anything else
// into '-'.
func slug(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '-'
	}, s)
}

// LayerServerDir is the directory that holds every layer of the server
// that layer (a Bind.Layer) belongs to: removing it starts the server
// afresh.
func LayerServerDir(layer string) string { return filepath.Dir(layer) }
