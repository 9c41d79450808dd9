package linux

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLandlockRestrict restricts one locked thread, which exits with its
// goroutine and takes the domain along: a socket file may be made beneath
// the rule's directory only; REFER allowed beneath / keeps renames across
// directories working (handling MAKE_SOCK alone refuses them with EXDEV,
// the control); a rule on a file keeps only the rights that apply to files
// (MAKE_SOCK does not, so the rule is dropped, not an EINVAL).
func TestLandlockRestrict(t *testing.T) {
	if abi := LandlockABI(); abi < 2 {
		t.Skipf("landlock abi %d: needs 2 (Linux 5.19)", abi)
	}
	base := t.TempDir()
	allowed, other := filepath.Join(base, "allowed"), filepath.Join(base, "other")
	for _, d := range []string{allowed, other, filepath.Join(other, "a"), filepath.Join(other, "b")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(base, "file")
	for _, f := range []string{file, filepath.Join(other, "a", "f"), filepath.Join(other, "a", "g")} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bindErr := func(dir string) error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(dir, "s")})
	}
	restricted := func(r LandlockRuleset, fn func() error) error {
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				errc <- err
				return
			}
			if err := LandlockRestrict(r); err != nil {
				errc <- err
				return
			}
			errc <- fn()
		}()
		return <-errc
	}
	mk, refer := uint64(unix.LANDLOCK_ACCESS_FS_MAKE_SOCK), uint64(unix.LANDLOCK_ACCESS_FS_REFER)
	err := restricted(LandlockRuleset{HandledFS: mk | refer, Rules: []LandlockRule{
		{Path: "/", Access: refer}, {Path: allowed, Access: mk}, {Path: file, Access: mk},
	}}, func() error {
		if err := bindErr(allowed); err != nil {
			return errors.New("bind beneath the rule: " + err.Error())
		}
		if err := bindErr(other); !errors.Is(err, unix.EACCES) {
			return errors.New("bind elsewhere: want EACCES, got " + errText(err))
		}
		if err := os.Rename(filepath.Join(other, "a", "f"), filepath.Join(other, "b", "f")); err != nil {
			return errors.New("rename across directories with REFER allowed: " + err.Error())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = restricted(LandlockRuleset{HandledFS: mk, Rules: []LandlockRule{{Path: allowed, Access: mk}}}, func() error {
		return os.Rename(filepath.Join(other, "a", "g"), filepath.Join(other, "b", "g"))
	})
	if !errors.Is(err, unix.EXDEV) {
		t.Errorf("control: rename across directories with MAKE_SOCK handled and REFER not: want EXDEV, got %v", err)
	}
	// Nothing handled, nothing scoped: no call, no error, and the bind
	// refused above works (so it was Landlock that refused it).
	if err := restricted(LandlockRuleset{}, func() error { return bindErr(other) }); err != nil {
		t.Errorf("empty ruleset: %v", err)
	}
}

func errText(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
