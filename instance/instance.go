// Package instance makes a running rootfs session visible to its user:
// each session serves its state (Info) on a unix socket in the user's
// runtime directory, and `rootfs status` and `rootfs why` list the sockets
// there and ask each.
//
// # Who may ask
//
// The directory is the user's own, mode 0700 (made so when rootfs makes
// it, refused when someone else owns it or others may enter it), and each
// connection is checked again by the kernel's credentials of the peer
// (SO_PEERCRED): only the user the session runs as, or root, gets an
// answer. A session's state names the user's files and the server's
// refusals, which another user must not read.
//
// # Info
//
// [Info] has more than fifteen fields on purpose: it is the document
// `rootfs status --json` prints, flat so that a tool reads each fact with
// one lookup, and every field is one fact a user asks about.
//
// # Protocol
//
// One JSON request line, one JSON answer line, then the session closes the
// connection: {"op":"status"} answers an Info. Requests are bounded
// (RequestMax) and the session serves at most ConnsMax at a time.
package instance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/audit"
)

// Root is one root as status shows it.
type Root struct {
	Host     string `json:"host"`
	Path     string `json:"path"` // inside the sandbox
	ReadOnly bool   `json:"readOnly,omitempty"`
	Source   string `json:"source,omitempty"` // client, --root, argument, cwd
}

// Bind is one host path shown in the sandbox besides the roots.
type Bind struct {
	Host     string `json:"host"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// Reason is auto-bind's ("interpreter", "npm cache"); empty for a
	// flag's bind (Flag says which).
	Reason string `json:"reason,omitempty"`
	Flag   string `json:"flag,omitempty"`
}

// Info is what a session tells status and why.
type Info struct {
	ID      string    `json:"id"`
	PID     int       `json:"pid"`
	UID     int       `json:"uid"`
	Started time.Time `json:"started"`
	Command []string  `json:"command"`
	Cwd     string    `json:"cwd,omitempty"`
	// Client is the MCP client's name and version from initialize.
	Client   string `json:"client,omitempty"`
	Roots    []Root `json:"roots"`
	DataPath string `json:"dataPath"` // "kernel" or "strict"
	Layout   string `json:"layout"`   // "host" or "flat"
	Network  string `json:"network"`
	// Runtime are the read-only runtime directories and files (/usr,
	// /etc/ssl/certs, ...); Private, the sandbox's own (/tmp, /dev, /proc).
	Runtime  []string        `json:"runtime,omitempty"`
	Private  []string        `json:"private,omitempty"`
	Binds    []Bind          `json:"binds,omitempty"`
	Stats    audit.Stats     `json:"stats"`
	Refusals []audit.Record  `json:"refusals,omitempty"`
	AuditLog string          `json:"auditLog,omitempty"`
	Extra    json.RawMessage `json:"extra,omitempty"`
}

// RequestMax bounds a request line; ConnsMax, the connections a session
// serves at once.
const (
	RequestMax = 4 << 10
	ConnsMax   = 8
)

// ErrNotYours is the refusal of a runtime directory another user owns or
// others may enter.
var ErrNotYours = errors.New("not a private directory of this user")

// Dir returns the directory of the sockets of the host user uid:
// $XDG_RUNTIME_DIR/rootfs when XDG_RUNTIME_DIR is set, else
// /run/user/UID/rootfs when that exists, else /tmp/rootfs-UID. It makes it
// (0700) when make is set, and checks it is this process's user's (who in
// a user namespace of uid's is another number) and no one else's.
func Dir(getenv func(string) string, uid int, make bool) (string, error) {
	var dir string
	switch rt := getenv("XDG_RUNTIME_DIR"); {
	case rt != "" && filepath.IsAbs(rt):
		dir = filepath.Join(rt, "rootfs")
	default:
		run := "/run/user/" + strconv.Itoa(uid)
		if fi, err := os.Stat(run); err == nil && fi.IsDir() {
			dir = filepath.Join(run, "rootfs")
		} else {
			dir = filepath.Join(os.TempDir(), "rootfs-"+strconv.Itoa(uid))
		}
	}
	if make {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("runtime directory: %w", err)
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("runtime directory: %w", err)
	}
	st, ok := statOwner(fi)
	if me := os.Getuid(); !fi.IsDir() || !ok || st != me || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%w: %s (owner %d, mode %v; want uid %d, 0700)", ErrNotYours, dir, st, fi.Mode(), me)
	}
	return dir, nil
}

// Server serves one session's Info. Close it.
type Server struct {
	ln     *net.UnixListener
	path   string
	info   func() Info
	log    *zap.Logger
	sem    chan struct{}
	wg     sync.WaitGroup
	closed sync.Once
}

// Serve listens on dir/ID.sock and answers with what info returns, for
// the connections whose peer is this user or root. A nil log logs nothing.
func Serve(dir, id string, info func() Info, log *zap.Logger) (*Server, error) {
	if log == nil {
		log = zap.NewNop()
	}
	p := filepath.Join(dir, id+".sock")
	_ = os.Remove(p) // a session of the same id that died
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("status socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(p, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("status socket: %w", err)
	}
	s := &Server{ln: ln, path: p, info: info, log: log, sem: make(chan struct{}, ConnsMax)}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		select {
		case s.sem <- struct{}{}:
		default:
			c.Close() // busy: a peer holding ConnsMax connections gets no more
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.sem }()
			s.serve(c)
		}()
	}
}

func (s *Server) serve(c *net.UnixConn) {
	defer c.Close()
	uid, err := peerUID(c)
	if err != nil || (uid != os.Getuid() && uid != 0) {
		s.log.Warn("status socket: refused a connection from another user", zap.Int("uid", uid), zap.Error(err))
		return
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReaderSize(c, RequestMax)
	line, err := r.ReadSlice('\n')
	if err != nil {
		return
	}
	var req struct {
		Op string `json:"op"`
	}
	resp := map[string]any{}
	if err := json.Unmarshal(line, &req); err != nil {
		resp["error"] = "bad request: " + err.Error()
	} else if req.Op != "status" {
		resp["error"] = fmt.Sprintf("unknown op %q; want status", req.Op)
	}
	w := json.NewEncoder(c)
	if resp["error"] != nil {
		_ = w.Encode(resp)
		return
	}
	_ = w.Encode(s.info())
}

// Close stops serving and removes the socket. It may be called more than once.
func (s *Server) Close() error {
	s.closed.Do(func() {
		s.ln.Close()
		s.wg.Wait()
	})
	return nil
}

// Ask returns the Info of the session on socket p.
func Ask(ctx context.Context, p string) (Info, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", p)
	if err != nil {
		return Info{}, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	}
	if _, err := c.Write([]byte(`{"op":"status"}` + "\n")); err != nil {
		return Info{}, err
	}
	dec := json.NewDecoder(c)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return Info{}, fmt.Errorf("%s: %w", p, err)
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return Info{}, fmt.Errorf("%s: %s", p, e.Error)
	}
	var info Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return Info{}, fmt.Errorf("%s: %w", p, err)
	}
	return info, nil
}

// List asks every session whose socket is in dir, and returns their Infos
// by start time. A socket nobody listens on (a session that was killed)
// is removed.
func List(ctx context.Context, dir string) ([]Info, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []Info
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sock") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		info, err := Ask(ctx, p)
		if err != nil {
			if errors.Is(err, errConnRefused) {
				_ = os.Remove(p)
			}
			continue
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out, nil
}
