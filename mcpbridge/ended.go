package mcpbridge

// This file is what the client is told when there is no server to answer it: a server that
// could not start (Refuse), or one that ended before it answered (the Bridge, through
// ServerExit). Either way the client's initialize gets a JSON-RPC error whose message says
// why in one line, which clients show, where a closed connection shows only "Connection
// closed" and leaves the reason in a log the user must first find.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
)

// ClientWait is how long rootfs waits for the client's initialize when it has only an error to
// answer it with. Clients send initialize as soon as they have started the process, so the wait
// runs out only for something that is not an MCP client (a test, a person at a pipe).
const ClientWait = 2 * time.Second

// maxReason bounds the message of such an error (a path or two and a fix fit easily).
const maxReason = 2048

// ExitInfo is how the server ended, for the errors that answer the requests it left unanswered.
type ExitInfo struct {
	// Status is the server's exit status, 128+N when signal N ended it; -1 when it has not
	// exited (it only closed its stdout, or its stdin) or is unknown.
	Status int
	// LastStderr is the last line the server wrote to stderr that says something, usually why
	// it gave up ("fatal: cannot open db"); "" when none.
	LastStderr string
	// Note is what rootfs knows that may explain it (the server had no network, say), and
	// the fix; "" when nothing.
	Note string
}

// message is the one-line error message for a request the server left unanswered.
func (x ExitInfo) message() string {
	var how string
	switch {
	case x.Status < 0:
		how = "the server closed the connection"
	case x.Status > 128 && x.Status < 128+65:
		sig := syscall.Signal(x.Status - 128)
		how = fmt.Sprintf("the server was killed by signal %d (%s)", int(sig), sig)
	default:
		how = fmt.Sprintf("the server exited with status %d", x.Status)
	}
	msg := "rootfs: " + how + " before answering"
	if x.LastStderr != "" {
		msg += ": " + x.LastStderr
	}
	if x.Note != "" {
		msg += " (" + x.Note + ")"
	}
	return OneLine(msg)
}

// OneLine makes s fit in one line of an error message: control characters (newlines
// included) become spaces, runs of spaces one, and it is cut at a bound.
func OneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxReason {
		s = strings.ToValidUTF8(s[:maxReason], "") + "…"
	}
	return s
}

// Refuse is for a session that cannot start: it answers each request the client sends with a
// JSON-RPC error (code -32603, message reason made one line), until it has answered initialize,
// in ends, or wait has passed, and reports whether it answered initialize. Notifications,
// responses and lines that are not JSON-RPC are read and dropped; lines over maxLine bytes
// (0: DefaultMaxLine) are dropped unbuffered. Each answer is written to out as one line.
//
// The read of in may still be blocked when Refuse returns; the caller is about to exit, and
// must not read in again.
func Refuse(in io.Reader, out io.Writer, reason string, wait time.Duration, maxLine int) bool {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	reason = OneLine(reason)
	lines := make(chan []byte)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(lines)
		lr := newLineReader(in, maxLine)
		for {
			line, err := lr.next()
			if errors.Is(err, errLineTooLong) {
				continue
			}
			if err != nil {
				return
			}
			select {
			case lines <- append([]byte(nil), line...):
			case <-stop:
				return
			}
		}
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return false
			}
			reply, init := refusal(line, reason)
			if reply != nil {
				if _, err := out.Write(reply); err != nil {
					return false
				}
			}
			if init {
				return true
			}
		case <-t.C:
			return false
		}
	}
}

// refusal is the reply to one line under Refuse (nil: none), and whether the line held an
// initialize request.
func refusal(line []byte, reason string) (reply []byte, init bool) {
	t := trimmed(line)
	if len(t) == 0 || !json.Valid(t) {
		return nil, false
	}
	one := func(el []byte) []byte {
		var e envelope
		if el[0] != '{' || parseValid(el, &e) != nil || e.kind != kindRequest {
			return nil
		}
		init = init || e.method == methodInitialize
		return errorReply(e.id, codeInternalError, reason, nil)
	}
	if t[0] != '[' {
		return one(t), init
	}
	els, ok := splitBatch(t, maxBatch)
	if !ok {
		return nil, false
	}
	var replies [][]byte
	for _, el := range els {
		if r := one(el); r != nil {
			replies = append(replies, r)
		}
	}
	if len(replies) == 0 {
		return nil, init
	}
	return withNewline(joinBatch(replies)), init
}

// initState follows the client's initialize for the case where the server ends before
// answering it: Run then waits, at most ClientWait, for an initialize the client has not sent
// yet, and the client loop answers it with the server's end instead of forwarding it.
type initState struct {
	// mu guards the fields that follow.
	mu sync.Mutex
	// seen: an initialize is in the forwarded table (the server's end answers it there).
	seen bool
	// gone is the message requests are answered with once the server has ended ("": it runs).
	gone string
	// settled is closed once, with gone set, an initialize has been seen or answered.
	settled     chan struct{}
	settledOnce sync.Once
}

func newInitState() *initState { return &initState{settled: make(chan struct{})} }

// goneMessage returns the message to answer a client request with, once the server has ended
// ("" while it runs). An initialize answered with it settles the wait (settle), once the answer
// is on its way: Run stops the client's writer when the wait is settled.
func (s *initState) goneMessage() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}

// settle ends Run's wait for the initialize (awaitInitialize), which has been answered.
func (s *initState) settle() { s.settledOnce.Do(func() { close(s.settled) }) }

// forwarded records that an initialize is in the forwarded table.
func (s *initState) forwarded() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = true
	if s.gone != "" {
		s.settledOnce.Do(func() { close(s.settled) })
	}
}

// serverGone sets the message requests are answered with from now on, and reports whether an
// initialize is still to come (none has been forwarded).
func (s *initState) serverGone(msg string) (waiting bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = msg
	return !s.seen
}
