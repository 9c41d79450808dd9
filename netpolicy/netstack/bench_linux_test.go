package netstack

import (
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/internal/linux"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// World services for the benchmarks: a line on accept (:7000), an
// endless stream of zeros (:7001) and a sink that closes at EOF (:7002),
// on the world's IPv4 and IPv6 addresses.
var benchOnce sync.Once

func setupBench(b *testing.B) *sandbox {
	w := setupWorld(b)
	// The engine's threads get short scheduler slices, as in rootfs
	// run's P1 (session.startNetwork); ROOTFS_BENCH_DEFAULT_SLICE=1
	// leaves the kernel's default, to compare.
	if os.Getenv("ROOTFS_BENCH_DEFAULT_SLICE") == "" {
		if err := linux.ShortSlice(100 * time.Microsecond); err != nil {
			b.Fatal(err)
		}
	}
	benchOnce.Do(func() {
		inNS(b, w.pid, func() error {
			l, err := net.Listen("tcp", ":7000")
			if err != nil {
				b.Fatal(err)
			}
			go serveLine(l, "hello")
			z, err := net.Listen("tcp", ":7001")
			if err != nil {
				b.Fatal(err)
			}
			serveEach(z, writeForever)
			sink, err := net.Listen("tcp", ":7002")
			if err != nil {
				b.Fatal(err)
			}
			serveEach(sink, func(c net.Conn) {
				_, _ = io.Copy(io.Discard, c)
				c.Close()
			})
			return nil
		})
	})
	return newSandbox(b, netpolicy.Options{})
}

func connectOnce(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	b := make([]byte, 16)
	_, err = c.Read(b)
	return err
}

// benchFamilies are the world's address in each family, by the suffix of
// the benchmarks' names ("" for IPv4, which keeps the names of before).
var benchFamilies = []struct{ suffix, addr string }{{"", "203.0.113.1"}, {"6", "[2001:db8:113::1]"}}

// BenchmarkConnect: dial and first byte, from the sandbox through the
// engine and, as the baseline, from the host's namespace; over IPv4 and
// IPv6 (which always goes through the stack).
func BenchmarkConnect(b *testing.B) {
	sb := setupBench(b)
	for _, f := range benchFamilies {
		for _, c := range []struct {
			name string
			pid  int
		}{{"host", hostPID}, {"sandbox", sb.pid}} {
			b.Run(c.name+f.suffix, func(b *testing.B) { benchConnect(b, c.pid, f.addr+":7000") })
		}
	}
}

func benchConnect(b *testing.B, pid int, addr string) {
	lat := make([]time.Duration, 0, b.N)
	err := inNS(b, pid, func() error {
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			if err := connectOnce(addr); err != nil {
				return err
			}
			lat = append(lat, time.Since(start))
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkThroughput: 1 GiB from the world per op.
func BenchmarkThroughput(b *testing.B) {
	throughput(b, func(addr string) error { return download(addr+":7001", benchBytes) })
}

// BenchmarkThroughputUpload: 1 GiB to the world per op, done when the
// world has read it all (it closes after EOF).
func BenchmarkThroughputUpload(b *testing.B) {
	throughput(b, func(addr string) error { return upload(addr+":7002", benchBytes) })
}

// throughput runs op (one transfer of benchBytes to the world's address
// addr) b.N times from the host's namespace and from the sandbox's,
// through the engine's stack, over IPv4 and IPv6.
func throughput(b *testing.B, transfer func(addr string) error) {
	sb := setupBench(b)
	for _, f := range benchFamilies {
		op := func() error { return transfer(f.addr) }
		for _, c := range []struct {
			name string
			pid  int
		}{{"host", hostPID}, {"sandbox", sb.pid}} {
			b.Run(c.name+f.suffix, func(b *testing.B) { benchTransfer(b, c.pid, op) })
		}
	}
}

func benchTransfer(b *testing.B, pid int, op func() error) {
	b.SetBytes(benchBytes)
	err := inNS(b, pid, func() error {
		for range b.N {
			if err := op(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkConcurrent200: 200 connections open at once through the
// engine, each reading its first line; reports the heap the process
// holds with them open.
func BenchmarkConcurrent200(b *testing.B) {
	sb := setupBench(b)
	const n = 200
	for range b.N {
		var before, during runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		type dialed struct {
			conns []net.Conn
			err   error
		}
		d := inNS(b, sb.pid, func() (d dialed) {
			for range n {
				c, err := net.Dial("tcp4", "203.0.113.1:7001")
				if err != nil {
					d.err = err
					return d
				}
				d.conns = append(d.conns, c)
			}
			return d
		})
		conns := d.conns
		if d.err != nil { // b.Fatal on inNS's goroutine would hang the benchmark
			for _, c := range conns {
				c.Close()
			}
			b.Fatalf("connection %d of %d: %v (engine: %+v)", len(conns)+1, n, d.err, sb.eng.Stats())
		}
		readEach(conns, 1<<20)
		runtime.ReadMemStats(&during)
		b.ReportMetric(float64(during.HeapInuse-before.HeapInuse)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
		for _, c := range conns {
			c.Close()
		}
	}
}
