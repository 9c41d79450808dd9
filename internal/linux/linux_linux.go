package linux

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// retryOnEINTR runs fn until it returns something other than EINTR.
func retryOnEINTR(fn func() error) error {
	for {
		err := fn()
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// retryOnEINTR2 is retryOnEINTR for calls that return a value.
func retryOnEINTR2[T any](fn func() (T, error)) (T, error) {
	for {
		v, err := fn()
		if !errors.Is(err, unix.EINTR) {
			return v, err
		}
	}
}

// MountError is a failed mount(2): the operation, its arguments and the errno.
type MountError struct {
	Op     string // "mount", "bind", "remount", "propagation", "umount"
	Source string
	Target string
	FSType string
	Flags  uintptr
	Data   string
	Err    error
}

func (e *MountError) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Source != "" {
		fmt.Fprintf(&b, " %s", e.Source)
	}
	if e.Target != "" {
		fmt.Fprintf(&b, " on %s", e.Target)
	}
	if e.FSType != "" {
		fmt.Fprintf(&b, " type %s", e.FSType)
	}
	if e.Flags != 0 {
		fmt.Fprintf(&b, " flags %s", MountFlagsString(e.Flags))
	}
	if e.Data != "" {
		fmt.Fprintf(&b, " data %q", e.Data)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *MountError) Unwrap() error { return e.Err }

var mountFlagNames = []struct {
	f    uintptr
	name string
}{
	{unix.MS_RDONLY, "MS_RDONLY"}, {unix.MS_NOSUID, "MS_NOSUID"}, {unix.MS_NODEV, "MS_NODEV"},
	{unix.MS_NOEXEC, "MS_NOEXEC"}, {unix.MS_SYNCHRONOUS, "MS_SYNCHRONOUS"}, {unix.MS_REMOUNT, "MS_REMOUNT"},
	{unix.MS_MANDLOCK, "MS_MANDLOCK"}, {unix.MS_NOATIME, "MS_NOATIME"}, {unix.MS_NODIRATIME, "MS_NODIRATIME"},
	{unix.MS_BIND, "MS_BIND"}, {unix.MS_MOVE, "MS_MOVE"}, {unix.MS_REC, "MS_REC"}, {unix.MS_SILENT, "MS_SILENT"},
	{unix.MS_UNBINDABLE, "MS_UNBINDABLE"}, {unix.MS_PRIVATE, "MS_PRIVATE"}, {unix.MS_SLAVE, "MS_SLAVE"},
	{unix.MS_SHARED, "MS_SHARED"}, {unix.MS_RELATIME, "MS_RELATIME"}, {unix.MS_STRICTATIME, "MS_STRICTATIME"},
}

// MountFlagsString prints mount flags by name ("MS_BIND|MS_REC").
func MountFlagsString(f uintptr) string {
	var parts []string
	for _, n := range mountFlagNames {
		if f&n.f != 0 {
			parts = append(parts, n.name)
			f &^= n.f
		}
	}
	if f != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(uint64(f), 16))
	}
	return strings.Join(parts, "|")
}

func opName(flags uintptr) string {
	switch {
	case flags&unix.MS_REMOUNT != 0:
		return "remount"
	case flags&unix.MS_BIND != 0:
		return "bind"
	case flags&(unix.MS_PRIVATE|unix.MS_SLAVE|unix.MS_SHARED|unix.MS_UNBINDABLE) != 0:
		return "propagation"
	case flags&unix.MS_MOVE != 0:
		return "move"
	}
	return "mount"
}

// Mount is mount(2) with EINTR retry; a failure is a *MountError.
func Mount(source, target, fstype string, flags uintptr, data string) error {
	err := retryOnEINTR(func() error { return unix.Mount(source, target, fstype, flags, data) })
	if err != nil {
		return &MountError{Op: opName(flags), Source: source, Target: target, FSType: fstype, Flags: flags, Data: data, Err: err}
	}
	return nil
}

// Unmount is umount2(2) with EINTR retry.
func Unmount(target string, flags int) error {
	err := retryOnEINTR(func() error { return unix.Unmount(target, flags) })
	if err != nil {
		return &MountError{Op: "umount", Target: target, Err: err}
	}
	return nil
}

// PivotRoot is pivot_root(2).
func PivotRoot(newRoot, putOld string) error {
	if err := unix.PivotRoot(newRoot, putOld); err != nil {
		return &os.PathError{Op: "pivot_root", Path: newRoot, Err: err}
	}
	return nil
}

// MountFlagsOf returns the per-mount flags (MS_RDONLY, MS_NOSUID, MS_NODEV,
// MS_NOEXEC and the atime flags) of the mount that holds path. A remount
// in a user namespace must keep the flags the kernel locked, so callers OR
// these into their remount flags (runc does the same).
func MountFlagsOf(path string) (uintptr, error) {
	var st unix.Statfs_t
	err := retryOnEINTR(func() error { return unix.Statfs(path, &st) })
	if err != nil {
		return 0, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	var f uintptr
	for _, m := range []struct{ st, ms uintptr }{
		{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME}, {unix.ST_SYNCHRONOUS, unix.MS_SYNCHRONOUS}, {unix.ST_MANDLOCK, unix.MS_MANDLOCK},
	} {
		if uintptr(st.Flags)&m.st != 0 {
			f |= m.ms
		}
	}
	return f, nil
}

// SetNoNewPrivs sets PR_SET_NO_NEW_PRIVS on the calling thread.
func SetNoNewPrivs() error {
	return os.NewSyscallError("prctl(PR_SET_NO_NEW_PRIVS)", unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
}

// SetDumpable sets PR_SET_DUMPABLE for the process (it is reset by every
// change of uid or gid, so call it after those).
func SetDumpable(on bool) error {
	var v uintptr
	if on {
		v = 1
	}
	return os.NewSyscallError("prctl(PR_SET_DUMPABLE)", unix.Prctl(unix.PR_SET_DUMPABLE, v, 0, 0, 0))
}

// LastCap returns the highest capability number the kernel knows.
func LastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("cap_last_cap: %w", err)
	}
	return n, nil
}

// Secure bits (linux/securebits.h).
const (
	SecbitNoroot              = 1 << 0
	SecbitNorootLocked        = 1 << 1
	SecbitNoSetuidFixup       = 1 << 2
	SecbitNoSetuidFixupLocked = 1 << 3
	SecbitKeepCapsLocked      = 1 << 5
	SecbitNoCapAmbientRaise   = 1 << 6
	SecbitNoCapAmbientLocked  = 1 << 7
)

// DropAllCapabilities empties every capability set of the calling thread:
// it locks the secure bits so uid 0 gains nothing on execve, drops
// 0..lastCap from the bounding set, clears the ambient set, then capset(2)s
// effective, permitted and inheritable to zero. Capabilities are per
// thread: call it on a thread locked with runtime.LockOSThread and start
// children from that same thread.
func DropAllCapabilities(lastCap int) error {
	bits := SecbitNoroot | SecbitNorootLocked | SecbitNoSetuidFixup | SecbitNoSetuidFixupLocked |
		SecbitKeepCapsLocked | SecbitNoCapAmbientRaise | SecbitNoCapAmbientLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_SET_SECUREBITS)", err)
	}
	for c := 0; c <= lastCap; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return os.NewSyscallError(fmt.Sprintf("prctl(PR_CAPBSET_DROP, %d)", c), err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return os.NewSyscallError("capset", err)
	}
	return nil
}

// CloseExecFrom marks every fd >= from close-on-exec (close_range(2),
// Linux 5.11), falling back to walking /proc/self/fd.
func CloseExecFrom(from int) error {
	err := unix.CloseRange(uint(from), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return os.NewSyscallError("close_range", err)
	}
	for _, e := range ents {
		fd, _ := strconv.Atoi(e.Name())
		if fd >= from {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// LandlockABI returns the Landlock ABI version, or 0 when Landlock is absent
// (a kernel before 5.13, or landlock missing from the lsm= list).
func LandlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// LandlockRuleset is one Landlock layer. A handled file-system access
// right is refused everywhere except beneath a rule that allows it; an
// access right that is not handled stays as it was. The caller picks
// rights and scopes the running ABI has (LandlockABI): the kernel refuses
// a ruleset naming one it does not know (EINVAL).
type LandlockRuleset struct {
	// HandledFS are LANDLOCK_ACCESS_FS_* rights; 0 handles none, and then
	// Rules must be empty.
	HandledFS uint64
	// Scoped are LANDLOCK_SCOPE_* bits (ABI 6): abstract unix sockets and
	// signals of processes outside the domain.
	Scoped uint64
	// Rules allow handled rights beneath directories, or on files.
	Rules []LandlockRule
}

// LandlockRule allows Access beneath Path (a directory) or on it (any
// other file; only the rights that apply to files are kept there, and a
// rule left with none is dropped, as the kernel would refuse it).
// Path is opened without following a final symlink.
type LandlockRule struct {
	Path   string
	Access uint64
}

// landlockFileAccess are the rights a rule on a file that is not a
// directory may carry (the kernel's ACCESS_FILE; RESOLVE_UNIX, ABI 9, is
// one, so a rule may name one socket).
const landlockFileAccess = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
	unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
	unix.LANDLOCK_ACCESS_FS_IOCTL_DEV | unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX

// LandlockRestrict enforces r on the calling thread and its future
// children; it cannot be undone. It needs no_new_privs (or CAP_SYS_ADMIN
// in the user namespace). Landlock is per thread: call it on a thread
// locked with runtime.LockOSThread and start children from that thread.
// A ruleset that handles nothing and scopes nothing restricts nothing: it
// returns nil without a call.
func LandlockRestrict(r LandlockRuleset) error {
	if r.HandledFS == 0 && r.Scoped == 0 {
		return nil
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: r.HandledFS, Scoped: r.Scoped}
	size := unsafe.Offsetof(attr.Quiet_access_fs)
	if r.Scoped == 0 {
		size = unsafe.Offsetof(attr.Scoped) // all that kernels before ABI 6 know
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return os.NewSyscallError("landlock_create_ruleset", e)
	}
	defer unix.Close(int(fd))
	for _, rule := range r.Rules {
		if err := landlockAddRule(int(fd), rule); err != nil {
			return err
		}
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return os.NewSyscallError("landlock_restrict_self", e)
	}
	return nil
}

func landlockAddRule(ruleset int, rule LandlockRule) error {
	pfd, err := retryOnEINTR2(func() (int, error) {
		return unix.Open(rule.Path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return &os.PathError{Op: "landlock rule: open", Path: rule.Path, Err: err}
	}
	defer unix.Close(pfd)
	access := rule.Access
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return &os.PathError{Op: "landlock rule: fstat", Path: rule.Path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= landlockFileAccess
	}
	if access == 0 {
		return nil
	}
	// The kernel reads the 12 bytes of its packed struct; Go's padding
	// after Parent_fd is not read.
	a := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&a)), 0, 0, 0); e != 0 {
		return &os.PathError{Op: "landlock_add_rule", Path: rule.Path, Err: e}
	}
	return nil
}

// LoopbackUp brings the "lo" interface up (in a fresh network namespace it
// starts down).
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return os.NewSyscallError("ioctl(SIOCGIFFLAGS)", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return os.NewSyscallError("ioctl(SIOCSIFFLAGS)", err)
	}
	return nil
}

// RaiseNoFile lifts RLIMIT_NOFILE as far as this process may: to
// fs.nr_open when it can raise the hard limit (root, or root of its user
// namespace), else the soft limit to the hard one. The view holds one
// O_PATH descriptor per inode the kernel knows, so a walk of a large tree
// needs many; running out would fail every operation of every root.
func RaiseNoFile() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, os.NewSyscallError("getrlimit", err)
	}
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > lim.Max {
			want := unix.Rlimit{Cur: n, Max: n}
			if unix.Setrlimit(unix.RLIMIT_NOFILE, &want) == nil {
				return n, nil
			}
		}
	}
	lim.Cur = lim.Max
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, os.NewSyscallError("setrlimit", err)
	}
	return lim.Cur, nil
}

// MountPoints returns the mount points (field 5, unescaped) of the lines of
// a mountinfo file, in order.
func MountPoints(mountinfo []byte) []string {
	var out []string
	for _, l := range strings.Split(string(mountinfo), "\n") {
		if f := strings.Fields(l); len(f) >= 5 {
			out = append(out, UnescapeMountinfo(f[4]))
		}
	}
	return out
}

// UnescapeMountinfo undoes the octal escapes (\040 for space) of mountinfo.
func UnescapeMountinfo(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
