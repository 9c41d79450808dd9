package spec

import (
	"os"
	"strconv"
	"strings"
)

// HostUID is the uid that this process's effective uid is in the parent
// user namespace: the invoking user's in rootfs's own user namespace (P1
// without root), the effective uid itself elsewhere. P0 and P1 agree on
// it, so --dry-run names the layer the session uses.
func HostUID() int {
	euid := os.Geteuid()
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return euid
	}
	return mappedUID(string(b), euid)
}

// mappedUID is uid as the parent user namespace knows it, by uidMap (the
// text of /proc/PID/uid_map); uid itself when no line maps it.
func mappedUID(uidMap string, uid int) int {
	for _, line := range strings.Split(uidMap, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		in, err1 := strconv.ParseUint(f[0], 10, 32)
		out, err2 := strconv.ParseUint(f[1], 10, 32)
		n, err3 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if u := uint64(uid); u >= in && u < in+n {
			return int(out + u - in)
		}
	}
	return uid
}
