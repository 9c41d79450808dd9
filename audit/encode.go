package audit

import (
	"encoding/json"
	"strconv"
	"time"
)

// appendJSON appends r as encoding/json writes it (one line, the newline
// included), without reflection: a busy session writes tens of thousands
// of records a second, and the log must cost the server little. The
// test compares the two on every field and on hostile strings.
func (r *Record) appendJSON(b []byte) []byte {
	b = append(b, `{"time":`...)
	b = appendTime(b, r.Time)
	b = appendField(b, "instance", r.Instance)
	b = append(b, `,"op":`...)
	b = appendString(b, r.Op)
	b = appendField(b, "path", r.Path)
	b = appendField(b, "host", r.Host)
	b = appendField(b, "dest", r.Dest)
	b = appendField(b, "syscall", r.Syscall)
	b = append(b, `,"result":`...)
	b = appendString(b, r.Result)
	if r.PID != 0 {
		b = append(b, `,"pid":`...)
		b = strconv.AppendInt(b, int64(r.PID), 10)
	}
	b = appendField(b, "comm", r.Comm)
	if r.Count != 0 {
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, r.Count, 10)
	}
	b = appendField(b, "allow", r.Allow)
	b = appendField(b, "reason", r.Reason)
	b = appendList(b, "old", r.Old)
	b = appendList(b, "new", r.New)
	b = appendField(b, "source", r.Source)
	return append(b, "}\n"...)
}

// appendField appends `,"name":"s"`, nothing when s is empty (omitempty).
func appendField(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, s)
}

func appendList(b []byte, name string, l []string) []byte {
	if len(l) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":[`...)
	for i, s := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString appends s quoted. Printable ASCII other than what
// encoding/json escapes (the quote, the backslash and, for HTML, <, > and
// &) is copied; anything else, rare in paths, goes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendTime appends t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds, quoted); a year MarshalJSON refuses (beyond 9999) is
// written all the same.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
