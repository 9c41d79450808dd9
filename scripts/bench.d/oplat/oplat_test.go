// Package oplat holds per-operation latency benchmarks that scripts/bench
// runs against each target (native, bind mount, rootfs view, bindfs) to show
// what one system call costs through it; on a FUSE mount that is mostly the
// number of round trips the kernel makes to the daemon.
//
// They measure the directory named by OPLAT_DIR, which must hold a file of
// at least 4 KiB named by OPLAT_FILE (relative; default "f") and a writable
// directory "wr"; without OPLAT_DIR every benchmark skips, so
// "go test ./..." costs nothing:
//
//	OPLAT_DIR=/mnt/view/tree go test -run '^$' -bench . -benchtime 20000x ./scripts/bench.d/oplat
package oplat

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func dir(b *testing.B) string {
	d := os.Getenv("OPLAT_DIR")
	if d == "" {
		b.Skip("OPLAT_DIR not set; scripts/bench sets it to the tree in each target")
	}
	return d
}

func file(b *testing.B) string {
	f := os.Getenv("OPLAT_FILE")
	if f == "" {
		f = "f"
	}
	return filepath.Join(dir(b), f)
}

// BenchmarkStat is a warm lstat of one file: attributes from the kernel's
// cache, or one GETATTR round trip when the cache has expired.
func BenchmarkStat(b *testing.B) {
	p := file(b)
	var st unix.Stat_t
	for b.Loop() {
		if err := unix.Lstat(p, &st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatMissing is an lstat of a name that does not exist: a cached
// negative dentry, or one LOOKUP round trip.
func BenchmarkStatMissing(b *testing.B) {
	p := filepath.Join(dir(b), "no-such-file")
	var st unix.Stat_t
	for b.Loop() {
		if err := unix.Lstat(p, &st); err != unix.ENOENT {
			b.Fatalf("lstat %s: %v, want ENOENT", p, err)
		}
	}
}

// BenchmarkOpenClose is open(O_RDONLY)+close of one file: OPEN (and FLUSH
// unless the server returns FOPEN_NOFLUSH; RELEASE is asynchronous).
func BenchmarkOpenClose(b *testing.B) {
	p := file(b)
	for b.Loop() {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
}

// BenchmarkPread4K reads the first 4 KiB of an open file: the page cache, a
// passthrough read, or a READ round trip.
func BenchmarkPread4K(b *testing.B) {
	fd, err := unix.Open(file(b), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	b.SetBytes(4096)
	for b.Loop() {
		if n, err := unix.Pread(fd, buf, 0); err != nil || n != len(buf) {
			b.Fatalf("pread: %d, %v", n, err)
		}
	}
}

// BenchmarkPwrite4K overwrites the first 4 KiB of an open file: with
// passthrough and CAP_HANDLE_KILLPRIV_V2 no round trip, otherwise a WRITE
// (and a GETXATTR security.capability) per call.
func BenchmarkPwrite4K(b *testing.B) {
	p := filepath.Join(dir(b), "wr", "oplat-"+filepath.Base(os.Args[0]))
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		unix.Close(fd)
		unix.Unlink(p)
	}()
	buf := make([]byte, 4096)
	b.SetBytes(4096)
	for b.Loop() {
		if n, err := unix.Pwrite(fd, buf, 0); err != nil || n != len(buf) {
			b.Fatalf("pwrite: %d, %v", n, err)
		}
	}
}
