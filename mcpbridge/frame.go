package mcpbridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// DefaultMaxLine is the default limit on one newline-delimited message, in bytes (newline excluded).
// It matches go-sdk's DefaultMaxLineLength; the TypeScript SDK caps at 10 MiB.
const DefaultMaxLine = 16 << 20

// errLineTooLong is returned by lineReader.next for a line over the limit. The line has been
// consumed (up to its newline or EOF) without being buffered, so the next call reads the next line.
var errLineTooLong = errors.New("line too long")

// lineReader splits a stream into lines with a bounded buffer.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its '\n'. The slice is valid until the next call. Within
// the slice's capacity the line's '\n' follows it, so it can be written as a frame without a copy
// (see peerWriter.forward). A final line without a newline is returned before io.EOF. A line over
// max bytes is discarded and reported as errLineTooLong; reading can go on.
func (lr *lineReader) next() ([]byte, error) {
	chunk, err := lr.r.ReadSlice('\n')
	if err == nil && len(chunk) <= lr.max+1 {
		return chunk[:len(chunk)-1], nil // the common case: the whole line is in the buffer
	}
	if cap(lr.buf) > 1<<20 {
		lr.buf = nil // do not keep a huge buffer after one big message
	}
	lr.buf = lr.buf[:0]
	tooLong := false
	for {
		if !tooLong {
			n := len(chunk)
			if n > 0 && chunk[n-1] == '\n' {
				n--
			}
			if len(lr.buf)+n > lr.max {
				tooLong = true
				lr.buf = lr.buf[:0]
			} else {
				lr.buf = append(lr.buf, chunk...)
			}
		}
		switch {
		case err == nil: // chunk ends in '\n'
			if tooLong {
				return nil, errLineTooLong
			}
			return lr.buf[:len(lr.buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			if tooLong {
				return nil, errLineTooLong
			}
			if len(lr.buf) > 0 {
				return lr.buf, nil
			}
			return nil, io.EOF
		default:
			return nil, err
		}
		chunk, err = lr.r.ReadSlice('\n')
	}
}

// peerWriter serializes writes to one peer, one write(2) per message (frame and '\n' together).
//
// A message rootfs forwards is written by the goroutine that read it (forward), while it holds
// wmu: handing it to a writer goroutine would cost a thread wakeup per message, which on a small
// machine is most of what the bridge adds to a round trip. forward blocks while the peer does not
// read (backpressure toward the sender).
//
// Messages rootfs makes itself (send) never block, so that a reader never waits on the other
// direction's writer (which could deadlock: see the package doc). They are queued and written,
// in order, by whichever gets wmu first: the next forward to that peer (before its own message)
// or a goroutine started for them.
type peerWriter struct {
	w     io.Writer
	onErr func(error) // called once, on the first write error; nil: none

	// wmu is held across each Write to w, so messages never interleave. Lock order: wmu, then mu.
	wmu sync.Mutex
	buf []byte // a forwarded message and its '\n', when they are not contiguous already (wmu)

	// mu guards the fields that follow.
	mu         sync.Mutex
	own        [][]byte // rootfs's own messages not yet written (each ends in '\n'), oldest first
	ownBytes   int      // their total size (bounded by ownBytesLimit)
	flushing   bool     // a goroutine is writing own
	closed     bool     // closeAfterDrain or stopNow was called: new messages are refused
	err        error    // first write error, or errQueueStopped
	ownDropped int      // own messages dropped because over ownLimit (or ownBytesLimit) were waiting
}

var (
	errQueueStopped = errors.New("queue stopped")
	errOwnFull      = errors.New("too many messages queued for a peer that does not read")
)

// ownLimit bounds rootfs's own pending messages toward one peer (they are small and few:
// replies, roots/list requests, notifications), and ownBytesLimit their bytes; beyond either
// they are dropped and logged. They pile up only while that peer does not read.
const ownLimit = 4096

// keepBuf is the largest copy buffer a peerWriter keeps between messages.
const keepBuf = 64 << 10

func newPeerWriter(w io.Writer, onErr func(error)) *peerWriter {
	return &peerWriter{w: w, onErr: onErr}
}

// send queues msg, a message rootfs made (it must end in '\n' and must not be modified
// afterwards). It never blocks.
func (q *peerWriter) send(msg []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.err != nil:
		return q.err
	case q.closed:
		return errQueueStopped
	case len(q.own) >= ownLimit || q.ownBytes+len(msg) > ownBytesLimit:
		q.ownDropped++
		return errOwnFull
	}
	q.own = append(q.own, msg)
	q.ownBytes += len(msg)
	if !q.flushing {
		q.flushing = true
		go q.flush()
	}
	return nil
}

func (q *peerWriter) flush() {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	for {
		q.mu.Lock()
		if len(q.own) == 0 || q.err != nil {
			q.flushing = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.writeOwnLocked()
	}
}

// writeOwnLocked writes the queued own messages; q.wmu is held.
func (q *peerWriter) writeOwnLocked() error {
	q.mu.Lock()
	own, err := q.own, q.err
	q.own, q.ownBytes = nil, 0
	q.mu.Unlock()
	if err != nil {
		return err
	}
	for _, m := range own {
		if err := q.write(m); err != nil {
			return err
		}
	}
	return nil
}

// forward writes msg (without its '\n') to the peer, after any own messages queued before it.
// It blocks until the peer has taken it. msg is not retained.
func (q *peerWriter) forward(msg []byte) error {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return errQueueStopped
	}
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if err := q.writeOwnLocked(); err != nil {
		return err
	}
	var frame []byte
	if n := len(msg); n < cap(msg) && msg[:n+1][n] == '\n' {
		frame = msg[:n+1] // as lineReader returns a line: its '\n' follows it
	} else {
		q.buf = append(append(q.buf[:0], msg...), '\n')
		frame = q.buf
		if cap(q.buf) > keepBuf {
			q.buf = nil
		}
	}
	return q.write(frame)
}

// write writes one frame; q.wmu is held.
func (q *peerWriter) write(frame []byte) error {
	_, err := q.w.Write(frame)
	if err == nil {
		return nil
	}
	q.mu.Lock()
	first := q.err == nil
	if first {
		q.err = err
	}
	q.mu.Unlock()
	if first && q.onErr != nil {
		q.onErr(err)
	}
	return err
}

// closeAfterDrain refuses new messages, then waits at most d for what is queued or being written
// to reach the peer, and reports whether it did.
func (q *peerWriter) closeAfterDrain(d time.Duration) bool {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	done := make(chan struct{})
	go func() {
		// Stays blocked behind a Write the peer never takes, until the caller closes the file.
		q.wmu.Lock()
		defer q.wmu.Unlock()
		_ = q.writeOwnLocked()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// stopNow refuses new messages and drops queued ones. A Write in progress is not interrupted
// (the caller closes the underlying file for that).
func (q *peerWriter) stopNow() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if q.err == nil {
		q.err = errQueueStopped
	}
	q.own, q.ownBytes = nil, 0
}

// ---- JSON-RPC envelope ----

// member is one top-level key of a JSON object: offsets are into the object's bytes.
type member struct {
	key              []byte // the decoded name: usually a slice of the object's bytes
	valStart, valEnd int
	keyStart         int
}

// errDuplicateKey refuses objects whose meaning would depend on the parser (last or first wins).
var (
	errDuplicateKey = errors.New("duplicate member name")
)

// members lists the members of the JSON object b (b must be valid JSON; leading/trailing space
// allowed), appended to ms[:0] (pass nil, or a buffer to spare allocations). Duplicate names are
// refused: a message rootfs reads must mean one thing to every parser.
func members(b []byte, ms []member) ([]member, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, errors.New("not an object")
	}
	i++
	ms = ms[:0]
	for {
		i = skipSpace(b, i)
		if i < len(b) && b[i] == '}' {
			return ms, nil
		}
		if i >= len(b) || b[i] != '"' {
			return nil, errors.New("bad object")
		}
		ks := i
		ke := skipString(b, i)
		key, err := decodeName(b[ks:ke])
		if err != nil {
			return nil, err
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return nil, errors.New("bad object")
		}
		i = skipSpace(b, i+1)
		vs := i
		ve := skipValue(b, i)
		for _, m := range ms {
			if bytes.Equal(m.key, key) {
				return nil, fmt.Errorf("%w %q", errDuplicateKey, key)
			}
		}
		ms = append(ms, member{key: key, keyStart: ks, valStart: vs, valEnd: ve})
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i < len(b) && b[i] == '}' {
			return ms, nil
		}
		return nil, errors.New("bad object")
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the (valid) JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return j
			}
			j++
		}
		return j
	}
}

// decodeName decodes a JSON string token; without escapes it returns a slice of raw.
func decodeName(raw []byte) ([]byte, error) {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], nil
	}
	s, err := decodeString(raw)
	return []byte(s), err
}

// isVersion20 reports whether the JSON token v is a string that decodes to "2.0" (spelled with
// escapes; the plain spelling is checked first).
func isVersion20(v []byte) bool {
	s, err := decodeString(v)
	return err == nil && v[0] == '"' && s == "2.0"
}

// knownMethods are returned without allocating by decodeMethod.
var knownMethods = []string{
	methodInitialize, methodInitialized, methodRootsList, methodRootsChanged, methodCancelled, methodDiscover,
	"ping", "tools/call", "tools/list", "resources/read", "resources/list", "resources/templates/list",
	"prompts/get", "prompts/list", "completion/complete", "logging/setLevel",
	"notifications/progress", "notifications/message",
}

// decodeMethod decodes a method name (a JSON string token), sharing the string of a common one.
func decodeMethod(raw []byte) (string, error) {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		name := raw[1 : len(raw)-1]
		for _, m := range knownMethods {
			if string(name) == m {
				return m, nil
			}
		}
	}
	return decodeString(raw)
}

// decodeString decodes a JSON string token.
func decodeString(raw []byte) (string, error) {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

type kind int

const (
	kindRequest kind = iota + 1
	kindNotification
	kindResponse
)

// envelope is what rootfs decodes of a message to route it. Everything else stays raw bytes.
// Its slices point into the message; routers keep it on the stack and copy what they retain.
type envelope struct {
	raw    []byte // the message exactly as received (no newline)
	kind   kind
	id     json.RawMessage // nil when absent; never "null" for requests
	idStr  string          // decoded id when it is a string
	method string
	params json.RawMessage
	result json.RawMessage
	errRaw json.RawMessage
}

// appendKey appends the canonical form of the id for maps ("s:"+string, "n:"+number) to dst.
func (e *envelope) appendKey(dst []byte) []byte {
	if len(e.id) > 0 && e.id[0] == '"' {
		return append(append(dst, "s:"...), e.idStr...)
	}
	return append(append(dst, "n:"...), e.id...)
}

// idKey returns the canonical form of the id for maps (see appendKey).
func (e *envelope) idKey() string {
	var kb [48]byte
	return string(e.appendKey(kb[:0]))
}

// errInvalid wraps reasons a syntactically valid JSON value is not a JSON-RPC 2.0 message.
var errInvalid = errors.New("invalid request")

// errParse wraps JSON syntax errors.
var errParse = errors.New("parse error")

// parseMessage decodes the routing envelope of one JSON object. b must not be modified while the
// envelope is in use. Errors wrap errParse (not JSON) or errInvalid (JSON, but not JSON-RPC 2.0).
func parseMessage(b []byte) (*envelope, error) {
	if !json.Valid(b) {
		return nil, fmt.Errorf("%w: %v", errParse, syntaxError(b))
	}
	e := new(envelope)
	if err := parseValid(b, e); err != nil {
		return nil, err
	}
	return e, nil
}

func syntaxError(b []byte) error {
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&v); err != nil {
		return err
	}
	return errors.New("trailing data after the message")
}

// parseValid is parseMessage for b already known to be valid JSON; it fills *e.
func parseValid(b []byte, e *envelope) error {
	*e = envelope{raw: b}
	var buf [6]member // enough for most messages (jsonrpc, id, method, params, ...)
	ms, err := members(b, buf[:0])
	if err != nil {
		return fmt.Errorf("%w: %v", errInvalid, err)
	}
	var hasMethod, hasResult, hasError, hasVersion bool
	for _, m := range ms {
		v := b[m.valStart:m.valEnd]
		switch string(m.key) {
		case "jsonrpc":
			if string(v) != `"2.0"` && !isVersion20(v) {
				return fmt.Errorf("%w: jsonrpc must be \"2.0\"", errInvalid)
			}
			hasVersion = true
		case "id":
			e.id = v
		case "method":
			if v[0] != '"' {
				return fmt.Errorf("%w: method must be a string", errInvalid)
			}
			s, err := decodeMethod(v)
			if err != nil {
				return fmt.Errorf("%w: method: %v", errInvalid, err)
			}
			e.method, hasMethod = s, true
		case "params":
			if v[0] != '{' && v[0] != '[' {
				return fmt.Errorf("%w: params must be an object or array", errInvalid)
			}
			e.params = v
		case "result":
			e.result, hasResult = v, true
		case "error":
			if v[0] != '{' {
				return fmt.Errorf("%w: error must be an object", errInvalid)
			}
			e.errRaw, hasError = v, true
		}
	}
	if !hasVersion {
		return fmt.Errorf("%w: missing \"jsonrpc\":\"2.0\"", errInvalid)
	}
	if e.id != nil {
		switch c := e.id[0]; {
		case c == '"':
			s, err := decodeString(e.id)
			if err != nil {
				return fmt.Errorf("%w: id: %v", errInvalid, err)
			}
			e.idStr = s
		case c == '-' || (c >= '0' && c <= '9'):
			if !isInteger(e.id) {
				return fmt.Errorf("%w: id must be a string or an integer", errInvalid)
			}
			if !safeInteger(e.id) {
				return fmt.Errorf("%w: integer id %s is beyond ±(2^53-1), which JSON peers (JavaScript, go-sdk) cannot represent exactly; use a smaller integer or a string", errInvalid, e.id)
			}
		case c == 'n' && !hasMethod && hasError:
			// An error response with "id": null (a reply to a message its sender could not parse).
			e.id = nil
		default:
			return fmt.Errorf("%w: id must be a string or an integer", errInvalid)
		}
	}
	switch {
	case hasMethod && (hasResult || hasError):
		return fmt.Errorf("%w: both method and result/error", errInvalid)
	case hasMethod && e.id != nil:
		e.kind = kindRequest
	case hasMethod:
		e.kind = kindNotification
	case hasResult && hasError:
		return fmt.Errorf("%w: both result and error", errInvalid)
	case hasResult || hasError:
		e.kind = kindResponse
	default:
		return fmt.Errorf("%w: neither method nor result/error", errInvalid)
	}
	return nil
}

// safeInteger reports whether an integer token is within ±(2^53-1). A larger id would reach a
// peer that decodes numbers as float64 and come back altered, so its answer could never be
// matched to the request (the sender would wait forever).
func safeInteger(n []byte) bool {
	v, err := strconv.ParseInt(string(n), 10, 64)
	return err == nil && v <= 1<<53-1 && v >= -(1<<53-1)
}

// isInteger reports whether a JSON number token has no fraction or exponent. Ids must be
// integers (MCP); forwarding 1.5 would let a go-sdk peer truncate it to 1 and confuse ids.
func isInteger(n []byte) bool {
	i := 0
	if i < len(n) && n[i] == '-' {
		i++
	}
	if i >= len(n) {
		return false
	}
	for ; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}

// find returns the member named key, or nil.
func find(ms []member, key string) *member {
	for i := range ms {
		if string(ms[i].key) == key {
			return &ms[i]
		}
	}
	return nil
}

// splice returns b with b[start:end] replaced by repl (a new slice).
func splice(b []byte, start, end int, repl []byte) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(repl)+1)
	out = append(out, b[:start]...)
	out = append(out, repl...)
	out = append(out, b[end:]...)
	return out
}

// setMember sets key to val in the JSON object obj (valid JSON), keeping every other byte.
// An existing member's value is replaced in place; a new member is inserted first.
func setMember(obj []byte, ms []member, key string, val []byte) []byte {
	if m := find(ms, key); m != nil {
		return splice(obj, m.valStart, m.valEnd, val)
	}
	open := skipSpace(obj, 0) + 1 // just after '{'
	kv, _ := json.Marshal(key)
	ins := append(append(kv, ':'), val...)
	if len(ms) > 0 {
		ins = append(ins, ',')
	}
	return splice(obj, open, open, ins)
}

// withNewline returns a fresh copy of b followed by '\n', ready for peerWriter.send.
func withNewline(b []byte) []byte {
	out := make([]byte, len(b)+1)
	copy(out, b)
	out[len(b)] = '\n'
	return out
}

// memberIter walks the members of a valid JSON object in order, duplicates included, decoding
// each name as every JSON parser does (escapes included). Lookups on message bytes go through it
// (or members), never through a search of the raw bytes: `"_\u006deta"` is `_meta` to the peer.
type memberIter struct {
	b []byte
	i int
}

// newMemberIter returns an iterator over obj; next reports false at once if obj is not an object.
func newMemberIter(obj []byte) memberIter {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return memberIter{i: len(obj)}
	}
	return memberIter{b: obj, i: i + 1}
}

// next returns the next member's decoded name and raw value.
func (it *memberIter) next() (key, val []byte, ok bool) {
	b := it.b
	i := skipSpace(b, it.i)
	if i >= len(b) || b[i] != '"' {
		it.i = len(b)
		return nil, nil, false
	}
	ke := skipString(b, i)
	key, err := decodeName(b[i:ke])
	if err != nil {
		it.i = len(b)
		return nil, nil, false
	}
	i = skipSpace(b, ke)
	if i >= len(b) || b[i] != ':' {
		it.i = len(b)
		return nil, nil, false
	}
	vs := skipSpace(b, i+1)
	ve := skipValue(b, vs)
	i = skipSpace(b, ve)
	if i < len(b) && b[i] == ',' {
		i++
	}
	it.i = i
	return key, b[vs:ve], true
}
