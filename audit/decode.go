package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// maxLine bounds one line that Decode reads (a record with long paths or
// a long root list stays far below it).
const maxLine = 1 << 20

// Decode reads an audit log, one JSON record a line, as Log writes it.
// A line that is not a record is an error naming its number; what was
// read before it is returned with the error.
func Decode(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return out, fmt.Errorf("audit log line %d: %w", n, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}
