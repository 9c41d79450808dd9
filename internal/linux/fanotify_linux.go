package linux

import "encoding/binary"

// FanotifyInfo is one information record of a fanotify event of a group
// that reports file handles (FAN_REPORT_FID, FAN_REPORT_DFID_NAME, ...).
// Its slices point into the event's bytes.
type FanotifyInfo struct {
	// Type is the record's FAN_EVENT_INFO_TYPE_*.
	Type byte
	// Key is the file system id, the handle's size and type and the
	// handle, as the kernel lays them out: equal keys name the same
	// object, so it keys a map of objects (string(Key)).
	Key []byte
	// HandleType and Handle are the handle, for open_by_handle_at.
	HandleType int32
	Handle     []byte
	// Name is the entry's name (the *_NAME types), without its NUL.
	Name []byte
}

// Fsid is the file system id of the record's object.
func (in FanotifyInfo) Fsid() (id [8]byte) {
	copy(id[:], in.Key[:8])
	return id
}

// FanotifyInfos calls fn with each information record of info (an
// event's bytes after its metadata), in order, until fn returns false.
// A malformed record ends the walk; one too short for a handle is
// skipped. It allocates nothing.
func FanotifyInfos(info []byte, fn func(FanotifyInfo) bool) {
	for len(info) >= 4 {
		typ := info[0]
		l := int(binary.NativeEndian.Uint16(info[2:4]))
		if l < 4 || l > len(info) {
			return
		}
		rec := info[4:l]
		info = info[l:]
		if len(rec) < 16 {
			continue
		}
		hb := int(binary.NativeEndian.Uint32(rec[8:12]))
		if hb < 0 || 16+hb > len(rec) {
			continue
		}
		name := rec[16+hb:]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if !fn(FanotifyInfo{Type: typ, Key: rec[:16+hb], HandleType: int32(binary.NativeEndian.Uint32(rec[12:16])), Handle: rec[16 : 16+hb], Name: name}) {
			return
		}
	}
}
