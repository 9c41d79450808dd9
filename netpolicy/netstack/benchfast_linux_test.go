package netstack

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/linux"
	"github.com/rootfs-dev/rootfs/internal/seccomp"
	"github.com/rootfs-dev/rootfs/netpolicy"
)

// The fast path's benchmarks run the client as rootfs's server runs: a
// process of its own in the sandbox's namespace (nsenter), under a
// seccomp filter that refers connect(2) to a listener this process reads
// with the engine's SeccompConnect, as P1 does. The child times its own
// work and prints it; "host" runs the same child in the host's namespace
// without a filter, so both sides pay the same process and runtime.
const (
	envClient  = "ROOTFS_NETTEST_CLIENT" // the child's workload: connect, download, upload, concurrent
	envAddr    = "ROOTFS_NETTEST_ADDR"
	envN       = "ROOTFS_NETTEST_N"
	envFilter  = "ROOTFS_NETTEST_FILTER" // 1: load the connect filter, send its listener on fd 3
	benchBytes = 1 << 30
)

// clientResult is what the child prints.
type clientResult struct {
	Lat     []time.Duration `json:"lat,omitempty"` // connect + first byte, each
	Elapsed time.Duration   `json:"elapsed"`
	Err     string          `json:"err,omitempty"`
	// Steps are an attack workload's results, by step
	// (attack_linux_test.go).
	Steps map[string]string `json:"steps,omitempty"`
}

// clientMain is the child: it never returns.
func clientMain() {
	var r clientResult
	_ = linux.ShortSlice(0) // the sandbox's server does not inherit rootfs's slice
	err := func() error {
		if os.Getenv(envFilter) == "1" {
			lf, _, err := seccomp.InstallNotify(seccomp.Notify{Connect: true})
			if err != nil {
				return err
			}
			if err := unix.Sendmsg(3, []byte("x"), unix.UnixRights(int(lf.Fd())), nil, 0); err != nil {
				return err
			}
			lf.Close()
			unix.Close(3)
		}
		addr := os.Getenv(envAddr)
		n, _ := strconv.Atoi(os.Getenv(envN))
		start := time.Now()
		defer func() { r.Elapsed = time.Since(start) }()
		switch os.Getenv(envClient) {
		case "connect":
			for range n {
				t0 := time.Now()
				if err := connectOnce(addr); err != nil {
					return err
				}
				r.Lat = append(r.Lat, time.Since(t0))
			}
		case "download":
			for range n {
				if err := download(addr, benchBytes); err != nil {
					return err
				}
			}
		case "upload":
			for range n {
				if err := upload(addr, benchBytes); err != nil {
					return err
				}
			}
		case "concurrent":
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for range n {
				c, err := net.Dial("tcp4", addr)
				if err != nil {
					return fmt.Errorf("connection %d of %d: %w", len(conns)+1, n, err)
				}
				conns = append(conns, c)
			}
			readEach(conns, 1<<20)
			// All open and read: the parent measures, then lets go.
			fmt.Println("open")
			_, _ = os.Stdin.Read(make([]byte, 1))
		default:
			f, ok := attacks[os.Getenv(envClient)]
			if !ok {
				return fmt.Errorf("no workload %q", os.Getenv(envClient))
			}
			r.Steps = f(addr)
		}
		return nil
	}()
	if err != nil {
		r.Err = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
	os.Exit(0)
}

func errName(err error) string {
	var en syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &en) && en == 0:
		return "ok"
	case errors.As(err, &en):
		return unix.ErrnoName(en)
	}
	return err.Error()
}

// download reads size bytes from addr.
func download(addr string, size int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = io.CopyN(io.Discard, c, int64(size))
	return err
}

// readEach reads n bytes on each of conns at once, and returns when all
// are done.
func readEach(conns []net.Conn, n int64) {
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.CopyN(io.Discard, c, n)
		}()
	}
	wg.Wait()
}

// upload writes size bytes to addr and waits for the world's close after
// it has read them all.
func upload(addr string, size int) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	buf := make([]byte, 256<<10)
	for left := size; left > 0; left -= len(buf) {
		if _, err := conn.Write(buf[:min(len(buf), left)]); err != nil {
			return err
		}
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	if n, err := conn.Read(buf[:1]); n != 0 || err != io.EOF {
		return fmt.Errorf("world's close: %d bytes, %v", n, err)
	}
	return nil
}

// runClient runs the child with workload on addr n times: from the host's
// namespace when sb is nil, else from sb's under the connect filter,
// answered by sb's engine. During, when not nil, is called once the
// child says its connections are open.
func runClient(b testing.TB, sb *sandbox, workload, addr string, n int, during func()) clientResult {
	b.Helper()
	var cmd *exec.Cmd
	env := append(os.Environ(), envClient+"="+workload, envAddr+"="+addr, envN+"="+strconv.Itoa(n))
	var parentSock, child *os.File
	if sb == nil {
		cmd = exec.Command(os.Args[0], "-test.run=^$")
	} else {
		cmd = exec.Command("nsenter", "--net="+nsPath(sb.pid), os.Args[0], "-test.run=^$")
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		parentSock = os.NewFile(uintptr(fds[0]), "parent")
		defer parentSock.Close()
		child = os.NewFile(uintptr(fds[1]), "child")
		defer child.Close()
		cmd.ExtraFiles = []*os.File{child}
		env = append(env, envFilter+"=1")
	}
	cmd.Env = env
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	if child != nil {
		child.Close() // a child that dies before sending is EOF, not a hang
	}
	if parentSock != nil {
		oob := make([]byte, unix.CmsgSpace(4))
		_, oobn, _, _, err := unix.Recvmsg(int(parentSock.Fd()), make([]byte, 8), oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			cmd.Process.Kill()
			b.Fatalf("no listener from the client: %v", err)
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			cmd.Process.Kill()
			b.Fatalf("no listener from the client: %v", err)
		}
		l, err := seccomp.Listen(os.NewFile(uintptr(fds[0]), "listener"), seccomp.ListenOptions{Connect: sb.eng.SeccompConnect, Busy: sb.busy()})
		if err != nil {
			cmd.Process.Kill()
			b.Fatal(err)
		}
		defer l.Close()
	}
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err == nil && line == "open\n" {
		if during != nil {
			during()
		}
		stdin.Write([]byte{1})
		line, err = out.ReadString('\n')
	}
	var r clientResult
	if jerr := json.Unmarshal([]byte(line), &r); jerr != nil {
		b.Fatalf("client said %q (%v): %v", line, err, jerr)
	}
	if r.Err != "" {
		b.Fatalf("client: %s", r.Err)
	}
	return r
}

// BenchmarkFast: the fast path against the host's namespace, each op one
// child doing the work b.N times over, to the world's IPv4 address and
// (the names ending in 6) its IPv6 one: "fast" under the default policy,
// "fast-names" under one with a name rule, where the relay also waits
// for the first bytes to read a server name (the world speaks first
// here, which ends the wait); "notun" in a sandbox without a TUN device,
// whose only way out is the fast path.
func BenchmarkFast(b *testing.B) {
	sb := setupBench(b)
	named := newSandbox(b, netpolicy.Options{Deny: []string{"denied.internet.test"}})
	notun := newSandboxMode(b, netpolicy.Options{}, viaNoTUN)
	for _, c := range []struct {
		name string
		sb   *sandbox
	}{{"host", nil}, {"fast", sb}, {"fast-names", named}, {"notun", notun}} {
		for _, f := range benchFamilies {
			name := c.name + f.suffix
			b.Run("Connect/"+name, func(b *testing.B) {
				before := fastCount(c.sb)
				r := runClient(b, c.sb, "connect", f.addr+":7000", b.N, nil)
				lat := r.Lat
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				checkFast(b, c.sb, before, b.N)
			})
			b.Run("Download/"+name, func(b *testing.B) {
				benchTransferFast(b, c.sb, "download", f.addr+":7001")
			})
			b.Run("Upload/"+name, func(b *testing.B) {
				benchTransferFast(b, c.sb, "upload", f.addr+":7002")
			})
		}
	}
	// "host-relay": the host's client through a plain splice relay in
	// the host's namespace, not rootfs's: what any design costs whose
	// relayed bytes cross a second TCP connection.
	for _, op := range []struct{ name, port string }{{"Download", "7001"}, {"Upload", "7002"}} {
		b.Run(op.name+"/host-relay", func(b *testing.B) {
			benchTransferFast(b, nil, strings.ToLower(op.name), spliceRelay(b, "203.0.113.1:"+op.port))
		})
	}
	for _, c := range []struct {
		name string
		sb   *sandbox
	}{{"fast", sb}, {"fast-names", named}} {
		b.Run("Concurrent200/"+c.name, func(b *testing.B) {
			concurrent200(b, c.sb)
		})
	}
}

// benchTransferFast runs b.N transfers of benchBytes (workload download
// or upload) to addr from sb (the host's namespace when nil) and reports
// their rate, and the CPU time the whole machine spent per GiB meanwhile
// (busy time of /proc/stat, all cores: the world, the engine, the client
// and the kernel's network processing of all of them).
func benchTransferFast(b *testing.B, sb *sandbox, workload, addr string) {
	before := fastCount(sb)
	busy := busyCPU(b)
	r := runClient(b, sb, workload, addr, b.N, nil)
	spent := busyCPU(b) - busy
	gib := float64(benchBytes) * float64(b.N) / (1 << 30)
	b.ReportMetric(float64(benchBytes)*float64(b.N)/r.Elapsed.Seconds()/1e6, "MB/s")
	b.ReportMetric(spent.Seconds()/gib, "cpu-s/GiB")
	checkFast(b, sb, before, b.N)
}

// spliceRelay listens on the host's loopback until b ends and relays
// each connection to target with io.Copy both ways (splice(2) between
// the two TCP sockets, as rootfs's relay does); it returns its address.
func spliceRelay(b *testing.B, target string) string {
	l, err := listenPlainTCP(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	serveEach(l, func(c net.Conn) {
		defer c.Close()
		up, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer up.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			io.Copy(up, c)
			up.(*net.TCPConn).CloseWrite()
		}()
		io.Copy(c, up)
		c.(*net.TCPConn).CloseWrite()
		<-done
	})
	return l.Addr().String()
}

// busyCPU is the time all cores have spent busy since boot (user, nice,
// system, irq and softirq of /proc/stat), at its resolution of USER_HZ.
func busyCPU(b testing.TB) time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq ...
	if len(f) < 8 || f[0] != "cpu" {
		b.Fatalf("/proc/stat begins %q", line)
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %v", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// concurrent200 opens 200 connections from a child in sb and reads 1 MiB
// on each; it reports the heap and goroutines this process (the engine)
// holds with them open, and the child's time.
func concurrent200(b *testing.B, sb *sandbox) {
	{
		for range b.N {
			var before, during runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var goroutines int
			r := runClient(b, sb, "concurrent", "203.0.113.1:7001", 200, func() {
				runtime.ReadMemStats(&during)
				goroutines = runtime.NumGoroutine()
			})
			b.ReportMetric(float64(during.HeapInuse-before.HeapInuse)/(1<<20), "heap-MiB")
			b.ReportMetric(float64(goroutines), "goroutines")
			b.ReportMetric(r.Elapsed.Seconds(), "s")
		}
	}
}

// fastCount is sb's fast path count so far (0 for the host).
func fastCount(sb *sandbox) int64 {
	if sb == nil {
		return 0
	}
	return sb.eng.Stats().TCPFast
}

// checkFast fails the benchmark when sb's engine did not carry n
// connections on the fast path since before.
func checkFast(b *testing.B, sb *sandbox, before int64, n int) {
	if sb == nil {
		return
	}
	if got := sb.eng.Stats().TCPFast - before; got != int64(n) {
		b.Fatalf("%d of %d connections took the fast path", got, n)
	}
}

// BenchmarkFastLink: the 1 GiB transfers of BenchmarkFast over a link of
// a given rate (ROOTFS_BENCH_LINK, comma-separated tc rates; default
// 1gbit and 10gbit), a token bucket on both ends of the veth between
// the host and the world, host against fast path in the same run. It
// says at which link speeds the fast path's CPU-bound ceiling (the
// unshaped rows of BenchmarkFast) stops mattering.
func BenchmarkFastLink(b *testing.B) {
	sb := setupBench(b)
	w := setupWorld(b)
	rates := strings.Split(cmp.Or(os.Getenv("ROOTFS_BENCH_LINK"), "1gbit,10gbit"), ",")
	for _, rate := range rates {
		b.Run(rate, func(b *testing.B) {
			shapeLink(b, w, rate)
			for _, c := range []struct {
				name string
				sb   *sandbox
			}{{"host", nil}, {"fast", sb}} {
				for _, op := range []struct{ name, port string }{{"Download", "7001"}, {"Upload", "7002"}} {
					b.Run(op.name+"/"+c.name, func(b *testing.B) {
						benchTransferFast(b, c.sb, strings.ToLower(op.name), "203.0.113.1:"+op.port)
					})
				}
			}
		})
	}
}

// shapeLink limits both directions of the host's veth to the world to
// rate (a tc rate, as "1gbit") until b ends: a token bucket on each
// end's egress, with a burst of 4 ms at that rate (at least 64 KiB, one
// GSO packet) and 20 ms of queue.
func shapeLink(b *testing.B, w *world, rate string) {
	bits, err := parseTCRate(rate)
	if err != nil {
		b.Fatal(err)
	}
	burst := strconv.FormatUint(max(bits/8/250, 64<<10), 10)
	tbf := []string{"qdisc", "replace", "dev", "", "root", "tbf", "rate", rate, "burst", burst, "latency", "20ms"}
	for _, dev := range []struct {
		name string
		ns   []string
	}{{"h0", nil}, {"w0", []string{"nsenter", "-t", strconv.Itoa(w.pid), "-n"}}} {
		args := slices.Clone(tbf)
		args[3] = dev.name
		cmd := append(slices.Clone(dev.ns), append([]string{"tc"}, args...)...)
		run(b, cmd[0], cmd[1:]...)
		b.Cleanup(func() {
			del := append(slices.Clone(dev.ns), "tc", "qdisc", "del", "dev", dev.name, "root")
			run(b, del[0], del[1:]...)
		})
	}
}

// parseTCRate reads a tc rate of bits per second: a number with an
// optional k, m or g before "bit".
func parseTCRate(s string) (uint64, error) {
	num, ok := strings.CutSuffix(s, "bit")
	if !ok || num == "" {
		return 0, fmt.Errorf("link rate %q: want a tc rate such as 1gbit", s)
	}
	mul := uint64(1)
	switch num[len(num)-1:] {
	case "k":
		mul = 1e3
	case "m":
		mul = 1e6
	case "g":
		mul = 1e9
	}
	if mul > 1 {
		num = num[:len(num)-1]
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("link rate %q: want a tc rate such as 1gbit", s)
	}
	return n * mul, nil
}
