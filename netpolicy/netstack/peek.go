package netstack

import (
	"bytes"
	"encoding/binary"
	"net"
	"strings"
)

// serverName finds the name a connection's first bytes ask for: the SNI of
// a TLS ClientHello or the host an HTTP/1 request names. more says the
// bytes may still become one of those (read on, within the bounds); name
// "" with more false is neither, or one without a name. It reads them as
// the server would: a ClientHello over several TLS records, an HTTP
// request after empty lines, with lines ended by LF alone, and with an
// absolute-form target, which the server takes over Host.
func serverName(b []byte) (name string, more bool) {
	if len(b) == 0 {
		return "", true
	}
	if b[0] == 0x16 { // TLS handshake record
		return tlsSNI(b)
	}
	return httpHost(b)
}

// httpHost finds the host an HTTP/1 request's head names: the host of
// an absolute-form target ("GET http://name/ HTTP/1.1", which a server
// takes over the Host header, RFC 9112 3.2.2), of CONNECT's authority,
// or the Host header.
func httpHost(b []byte) (string, bool) {
	b = bytes.TrimLeft(b, "\r\n") // empty lines before the request line are skipped (RFC 9112 2.2)
	if len(b) == 0 {
		return "", true
	}
	if !looksHTTP(b) {
		return "", false
	}
	for first := true; ; first = false {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			return "", true
		}
		line := strings.TrimSuffix(string(b[:nl]), "\r")
		b = b[nl+1:]
		if first {
			f := strings.Fields(line)
			if len(f) != 3 || !strings.HasPrefix(f[2], "HTTP/") {
				return "", false // not a request line
			}
			if _, auth, ok := strings.Cut(f[1], "://"); ok {
				// The authority as a server reads it, whether or not a
				// URL parser would take it.
				if i := strings.IndexAny(auth, "/?#"); i >= 0 {
					auth = auth[:i]
				}
				if i := strings.LastIndexByte(auth, '@'); i >= 0 {
					auth = auth[i+1:]
				}
				return hostOnly(auth), false
			}
			if f[0] == "CONNECT" {
				return hostOnly(f[1]), false
			}
			continue
		}
		if line == "" {
			return "", false // the end of the head, no Host
		}
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), "host") {
			return hostOnly(strings.TrimSpace(v)), false
		}
	}
}

// hostOnly is the host of HOST[:PORT], without the brackets of an IPv6
// address.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.Trim(h, "[]")
}

// looksHTTP reports whether b is, or may become, an HTTP/1 request line:
// a method (a token of capitals, as every registered method is; servers
// pass methods they do not know on by Host) and a space.
func looksHTTP(b []byte) bool {
	for i, c := range b {
		switch {
		case c == ' ':
			return i > 0
		case i >= maxMethod:
			return false
		case c >= 'A' && c <= 'Z' || c == '-' || c == '_':
		default:
			return false
		}
	}
	return true
}

// maxMethod bounds an HTTP method's length.
const maxMethod = 24

// tlsSNI finds the SNI of a ClientHello: a handshake message that may
// span any number of handshake records (RFC 8446 5.1), as servers put
// it together.
func tlsSNI(b []byte) (string, bool) {
	var hs []byte
	for {
		if len(b) < 5 {
			return "", true
		}
		if b[0] != 0x16 {
			return "", false // anything but a handshake record before the ClientHello's end
		}
		rl := int(binary.BigEndian.Uint16(b[3:5]))
		if len(b) < 5+rl {
			return "", true
		}
		hs = append(hs, b[5:5+rl]...)
		b = b[5+rl:]
		if len(hs) < 4 {
			continue
		}
		if hs[0] != 1 { // not a ClientHello
			return "", false
		}
		if hl := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]); len(hs) >= 4+hl {
			return helloSNI(hs[:4+hl]), false
		}
	}
}

// helloSNI is the SNI of ClientHello p (its handshake header included),
// "" if it has none or cannot be parsed.
func helloSNI(p []byte) string {
	// handshake: type(1)=1 len(3) version(2) random(32)
	if len(p) < 38 || p[0] != 1 {
		return ""
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
		return ""
	}
	if len(p) < 2 {
		return ""
	}
	ext := p[2:min(len(p), 2+int(binary.BigEndian.Uint16(p)))]
	for len(ext) >= 4 {
		typ, l := binary.BigEndian.Uint16(ext), int(binary.BigEndian.Uint16(ext[2:]))
		if len(ext) < 4+l {
			return ""
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
				return ""
			}
			if nt == 0 {
				return string(list[3 : 3+nl])
			}
			list = list[3+nl:]
		}
	}
	return ""
}
