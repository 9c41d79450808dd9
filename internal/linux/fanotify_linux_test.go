package linux

import (
	"encoding/binary"
	"testing"
)

// infoRecord lays out one record as the kernel does: header, fsid,
// handle size and type, handle, then the name and its NUL padding.
func infoRecord(typ byte, fsid byte, handle []byte, name string) []byte {
	b := make([]byte, 4, 64)
	b[0] = typ
	b = append(b, fsid, 0, 0, 0, 0, 0, 0, 0)
	b = binary.NativeEndian.AppendUint32(b, uint32(len(handle)))
	b = binary.NativeEndian.AppendUint32(b, 1)
	b = append(b, handle...)
	if name != "" {
		b = append(b, name...)
		b = append(b, 0)
	}
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	binary.NativeEndian.PutUint16(b[2:4], uint16(len(b)))
	return b
}

// TestFanotifyInfos: records are walked in order, with their handles and
// names; a record that lies about its length ends the walk, one too short
// for a handle is skipped.
func TestFanotifyInfos(t *testing.T) {
	ev := append(infoRecord(2, 7, []byte{1, 2, 3, 4, 5, 6, 7, 8}, "a.txt"), infoRecord(1, 7, []byte{9, 9, 9, 9}, "")...)
	short := []byte{3, 0, 8, 0, 1, 2, 3, 4}
	ev = append(ev, short...)
	ev = append(ev, infoRecord(10, 8, []byte{5, 5, 5, 5}, "new")...)
	ev = append(ev, 4, 0, 0xff, 0) // claims more than there is
	ev = append(ev, infoRecord(2, 9, []byte{1, 1, 1, 1}, "never")...)
	var got []string
	FanotifyInfos(ev, func(in FanotifyInfo) bool {
		got = append(got, string(rune('0'+in.Type))+":"+string(in.Name)+":"+string(rune('0'+len(in.Handle))))
		if in.Fsid()[0] == 0 || len(in.Key) != 16+len(in.Handle) {
			t.Errorf("record %d: fsid %v key %d bytes", in.Type, in.Fsid(), len(in.Key))
		}
		return true
	})
	want := []string{"2:a.txt:8", "1::4", string(rune('0'+10)) + ":new:4"}
	if len(got) != len(want) {
		t.Fatalf("records %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: %q, want %q", i, got[i], want[i])
		}
	}
	n := 0
	FanotifyInfos(ev, func(FanotifyInfo) bool { n++; return false })
	if n != 1 {
		t.Errorf("fn returning false: %d calls, want 1", n)
	}
}
