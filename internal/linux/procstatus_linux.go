package linux

import (
	"bytes"
	"strconv"

	"golang.org/x/sys/unix"
)

// statusMax bounds what ReadProcStatus reads of a status file (65,536
// supplementary groups of 7 digits fit).
const statusMax = 1 << 20

// ReadProcStatus reads /proc/ID/status (ID a process or a thread) until
// its NSpid line is whole: a process with many supplementary groups
// (Groups comes first) pushes it far down the file. false when the file
// cannot be read.
func ReadProcStatus(id int) (ProcStatus, bool) {
	var st ProcStatus
	fd, err := unix.Open("/proc/"+strconv.Itoa(id)+"/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, false
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 4096)
	read := false
	for done := false; !done && len(buf) < statusMax; {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, len(buf))...)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err != nil || n <= 0 {
			break
		}
		read = true
		buf = buf[:len(buf)+n]
		st = ProcStatus{}
		for line := range bytes.Lines(buf) {
			if !bytes.HasSuffix(line, []byte("\n")) {
				break // read on: the last line is not whole yet
			}
			line = line[:len(line)-1]
			if rest, ok := bytes.CutPrefix(line, []byte("Name:\t")); ok {
				st.Name = unescapeStatus(rest)
			} else if rest, ok := bytes.CutPrefix(line, []byte("NStgid:")); ok {
				st.NStgid = numbers(rest)
			} else if rest, ok := bytes.CutPrefix(line, []byte("NSpid:")); ok {
				st.NSpid = numbers(rest)
				done = true
				break
			}
		}
	}
	return st, read
}

// numbers parses a line of PID numbers; nil if one is not a number.
func numbers(b []byte) []int {
	var out []int
	for _, f := range bytes.Fields(b) {
		n, err := strconv.Atoi(string(f))
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// unescapeStatus undoes status's escaping of Name (a newline as \n, a
// backslash as \\; nothing else is escaped).
func unescapeStatus(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+1 < len(b) {
			switch b[i+1] {
			case 'n':
				out = append(out, '\n')
				i++
				continue
			case '\\':
				out = append(out, '\\')
				i++
				continue
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}
