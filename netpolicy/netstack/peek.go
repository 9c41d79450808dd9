package netstack

import (
	"bytes"
	"encoding/binary"
	"net"
	"strings"
)

// serverName finds the name a connection's first bytes ask for: the SNI of
// a TLS ClientHello or the Host of an HTTP/1 request. more says the bytes
// may still become one of those (read on, within the bounds); name "" with
// more false is neither, or one without a name.
func serverName(b []byte) (name string, more bool) {
	if len(b) == 0 {
		return "", true
	}
	if b[0] == 0x16 { // TLS handshake record
		return tlsSNI(b)
	}
	if len(b) < 8 {
		return "", looksHTTP(b)
	}
	if !looksHTTP(b) {
		return "", false
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return "", true
	}
	for _, l := range strings.Split(string(b[:end]), "\r\n")[1:] {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), "host") {
			h := strings.TrimSpace(v)
			if host, _, err := net.SplitHostPort(h); err == nil {
				h = host
			}
			return strings.Trim(h, "[]"), false
		}
	}
	return "", false
}

var methods = []string{"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE "}

// looksHTTP reports whether b is, or may become, an HTTP/1 request line.
func looksHTTP(b []byte) bool {
	for _, m := range methods {
		n := min(len(b), len(m))
		if string(b[:n]) == m[:n] {
			return true
		}
	}
	return false
}

// tlsSNI parses a ClientHello in one TLS record.
func tlsSNI(b []byte) (string, bool) {
	if len(b) < 5 {
		return "", true
	}
	rl := int(binary.BigEndian.Uint16(b[3:5]))
	if len(b) < 5+rl {
		return "", true
	}
	p := b[5 : 5+rl]
	// handshake: type(1)=1 len(3) version(2) random(32)
	if len(p) < 38 || p[0] != 1 {
		return "", false
	}
	p = p[38:]
	skip := func(lenBytes int) bool {
		if len(p) < lenBytes {
			return false
		}
		n := 0
		for i := range lenBytes {
			n = n<<8 | int(p[i])
		}
		if len(p) < lenBytes+n {
			return false
		}
		p = p[lenBytes+n:]
		return true
	}
	if !skip(1) || !skip(2) || !skip(1) { // session id, cipher suites, compression
		return "", false
	}
	if len(p) < 2 {
		return "", false
	}
	ext := p[2:min(len(p), 2+int(binary.BigEndian.Uint16(p)))]
	for len(ext) >= 4 {
		typ, l := binary.BigEndian.Uint16(ext), int(binary.BigEndian.Uint16(ext[2:]))
		if len(ext) < 4+l {
			return "", false
		}
		data := ext[4 : 4+l]
		ext = ext[4+l:]
		if typ != 0 || len(data) < 5 { // server_name
			continue
		}
		// list len(2), then entries: type(1) len(2) name
		list := data[2:]
		for len(list) >= 3 {
			nt, nl := list[0], int(binary.BigEndian.Uint16(list[1:]))
			if len(list) < 3+nl {
				return "", false
			}
			if nt == 0 {
				return string(list[3 : 3+nl]), false
			}
			list = list[3+nl:]
		}
	}
	return "", false
}
