package mcpbridge

// This file is the wire format as rootfs reads it, apart from the peers: a JSON scanner that reads
// only what routing needs (offsets into the message, names decoded as every parser decodes them),
// the routing envelope of a JSON-RPC 2.0 message, its typed id, the one batch split used in both
// directions, and the few params rootfs reads. What rootfs writes is in compose.go. Nothing here
// does I/O or holds state.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ---- ids ----

type idKind uint8

const (
	idNull idKind = iota // absent or null
	idString
	idNumber
)

// msgID is a JSON-RPC id as its value, not its spelling: "a" and "\u0061" are one id, and so
// are 0 and -0, as every peer's parser reads them. It is comparable (a map key) and holds an
// integer id without allocating. The zero msgID is the null id.
type msgID struct {
	kind idKind
	num  int64
	str  string
}

func stringID(s string) msgID { return msgID{kind: idString, str: s} }

func (id msgID) isNull() bool { return id.kind == idNull }

// hasPrefix reports whether id is a string that starts with prefix.
func (id msgID) hasPrefix(prefix string) bool {
	return id.kind == idString && len(id.str) >= len(prefix) && id.str[:len(prefix)] == prefix
}

// carries reports whether id is a string that contains prefix anywhere.
func (id msgID) carries(prefix string) bool {
	return id.kind == idString && strings.Contains(id.str, prefix)
}

// String is the id as JSON, for logs.
func (id msgID) String() string { return string(id.appendJSON(nil)) }

// appendJSON appends id as JSON (null, a number, or a string with encoding/json's escaping).
func (id msgID) appendJSON(dst []byte) []byte {
	switch id.kind {
	case idNumber:
		return strconv.AppendInt(dst, id.num, 10)
	case idString:
		s, _ := json.Marshal(id.str)
		return append(dst, s...)
	}
	return append(dst, "null"...)
}

// parseID decodes an id token: a string, an integer within ±(2^53-1), or null.
func parseID(raw []byte) (msgID, error) {
	switch c := raw[0]; {
	case c == '"':
		s, err := decodeString(raw)
		if err != nil {
			return msgID{}, fmt.Errorf("id: %v", err)
		}
		return stringID(s), nil
	case c == '-' || (c >= '0' && c <= '9'):
		if !isInteger(raw) {
			return msgID{}, errors.New("id must be a string or an integer")
		}
		// A larger id would reach a peer that decodes numbers as float64 and come back
		// altered, so its answer could never be matched to the request.
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || v > 1<<53-1 || v < -(1<<53-1) {
			return msgID{}, fmt.Errorf("integer id %s is beyond ±(2^53-1), which JSON peers (JavaScript, go-sdk) cannot represent exactly; use a smaller integer or a string", raw)
		}
		return msgID{kind: idNumber, num: v}, nil
	case string(raw) == "null":
		return msgID{}, nil
	}
	return msgID{}, errors.New("id must be a string or an integer")
}

// ---- scanner and envelope ----

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
	// The fast path only for valid UTF-8: a parser replaces each invalid
	// byte with U+FFFD (encoding/json does, and so does a JavaScript peer
	// reading UTF-8), and rootfs must name an id as its peer does, or its
	// own answer to that id would carry another.
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
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
	id     msgID  // the zero msgID (null) when absent or null
	rawID  []byte // the id as sent (nil when absent): its length is what keeping it costs
	method string
	params json.RawMessage
	result json.RawMessage
	errRaw json.RawMessage
}

// errInvalid wraps reasons a syntactically valid JSON value is not a JSON-RPC 2.0 message.
var errInvalid = errors.New("invalid request")

func syntaxError(b []byte) error {
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&v); err != nil {
		return err
	}
	return errors.New("trailing data after the message")
}

// parseValid decodes the routing envelope of one JSON object, b, already known to be valid JSON,
// into *e. b must not be modified while the envelope is in use. Errors wrap errInvalid (JSON,
// but not JSON-RPC 2.0).
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
			e.rawID = v
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
	if e.rawID != nil {
		id, err := parseID(e.rawID)
		switch {
		case err != nil:
			return fmt.Errorf("%w: %v", errInvalid, err)
		case id.isNull() && (hasMethod || !hasError):
			return fmt.Errorf("%w: id must be a string or an integer", errInvalid)
		case id.isNull():
			// An error response with "id": null (a reply to a message its sender could not parse).
			e.rawID = nil
		}
		e.id = id
	}
	switch {
	case hasMethod && (hasResult || hasError):
		return fmt.Errorf("%w: both method and result/error", errInvalid)
	case hasMethod && e.rawID != nil:
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

// ---- batches ----

// splitBatch splits a valid JSON array into its element values; ok is false when it has more
// than max (nothing is kept for them).
func splitBatch(b []byte, max int) (out [][]byte, ok bool) {
	i := skipSpace(b, 0) + 1
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] == ']' {
			return out, true
		}
		if len(out) == max {
			return nil, false
		}
		j := skipValue(b, i)
		out = append(out, b[i:j])
		i = skipSpace(b, j)
		if i < len(b) && b[i] == ',' {
			i++
		}
	}
}

// trimmed returns b without leading and trailing JSON whitespace.
func trimmed(b []byte) []byte {
	i := skipSpace(b, 0)
	j := len(b)
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\r' || b[j-1] == '\n') {
		j--
	}
	return b[i:j]
}

// sameBytes reports whether a and b are the same slice (not merely equal bytes).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// lineSnippet is a log-safe prefix of a line.
func lineSnippet(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// ---- reading params ----

// metaProtocolVersion is the 2026-07-28 per-request version key.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// modernVersion reports the params._meta protocol version when it names the modern era. It
// decides on decoded names and values, as the server will read them: any spelling of the key
// (escapes included) counts, and so does any of duplicate _meta objects or keys, since parsers
// disagree on which duplicate wins.
func modernVersion(params json.RawMessage) (string, bool) {
	it := newMemberIter(params)
	for {
		k, v, ok := it.next()
		if !ok {
			return "", false
		}
		if string(k) != "_meta" {
			continue
		}
		mit := newMemberIter(v)
		for {
			mk, mv, ok := mit.next()
			if !ok {
				break
			}
			if string(mk) != metaProtocolVersion || mv[0] != '"' {
				continue
			}
			if s, err := decodeString(mv); err == nil && s >= "2026-07-28" {
				return s, true
			}
		}
	}
}

// cancelledIDs reads params.requestId of a notifications/cancelled: every member whose decoded
// name is exactly requestId (a duplicate is read by some peers and not others, so each counts).
func cancelledIDs(params json.RawMessage) []msgID {
	var out []msgID
	it := newMemberIter(params)
	for {
		k, v, ok := it.next()
		if !ok {
			return out
		}
		if string(k) != "requestId" {
			continue
		}
		if id, err := parseID(v); err == nil && !id.isNull() {
			out = append(out, id)
		}
	}
}

// wireError is the code and message of a JSON-RPC error object.
type wireError struct {
	Code    int64
	Message string
}

// readError reads a JSON-RPC error object by exact, decoded member names (encoding/json would
// also match "CODE"); of duplicates the last counts, as in JavaScript's JSON.parse.
func readError(raw json.RawMessage) wireError {
	var we wireError
	it := newMemberIter(raw)
	for {
		k, v, ok := it.next()
		if !ok {
			return we
		}
		switch string(k) {
		case "code":
			if isInteger(v) {
				we.Code, _ = strconv.ParseInt(string(v), 10, 64)
			}
		case "message":
			if v[0] == '"' {
				we.Message, _ = decodeString(v)
			}
		}
	}
}
