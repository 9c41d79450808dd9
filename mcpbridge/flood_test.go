package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// The flood test runs the bridge in a child process (this test binary, re-executed) so that its
// peak RSS (VmHWM) is the bridge's alone.
const (
	floodChildEnv     = "MCPBRIDGE_FLOOD_CHILD"     // set: run as the bridge
	floodUnboundedEnv = "MCPBRIDGE_FLOOD_UNBOUNDED" // set: lift maxWaiters (the negative control)
)

func TestMain(m *testing.M) {
	if os.Getenv(floodChildEnv) != "" {
		os.Exit(floodChild())
	}
	code := m.Run()
	testutil.RemoveControlTestBinary()
	os.Exit(code)
}

// floodChild runs a bridge between stdin/stdout (the client) and fds 3/4 (the server), as
// `rootfs run` does, logging to stderr.
func floodChild() int {
	if os.Getenv(floodUnboundedEnv) != "" {
		maxWaiters = math.MaxInt
	}
	b, err := New(Options{
		ClientIn: os.Stdin, ClientOut: os.Stdout,
		ServerIn: os.NewFile(3, "server-stdin"), ServerOut: os.NewFile(4, "server-stdout"),
		Installer:    newEmptyTestView(),
		RootsTimeout: time.Hour,
		Logger:       zap.Must(zap.NewProduction()),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = b.Run(context.Background())
	return 0
}

// TestRootsListFloodBounded: a server that never answers initialize sends 1M roots/list (55 MB);
// the bridge's peak RSS stays under 64 MiB, and the server is answered (refused) at once. The
// negative control lifts maxWaiters in a second child and shows the peak far above the bound.
func TestRootsListFloodBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 1M messages through a child process")
	}
	const n = 1_000_000
	const bound = 64 << 20
	peak, refused := floodPeak(t, n, false)
	t.Logf("bounded: %d roots/list, peak RSS %.1f MiB, %d refused with -32000", n, float64(peak)/(1<<20), refused)
	if peak >= bound {
		t.Errorf("peak RSS %d bytes, want < %d", peak, bound)
	}
	if refused < n/2 {
		t.Errorf("only %d of %d roots/list refused", refused, n)
	}
	cpeak, crefused := floodPeak(t, n, true)
	t.Logf("control (maxWaiters lifted): peak RSS %.1f MiB, %d refused", float64(cpeak)/(1<<20), crefused)
	if cpeak < bound {
		t.Errorf("control: peak RSS %d bytes without the bound; the flood does not show what the bound prevents", cpeak)
	}
}

// floodPeak runs the flood against a child bridge and returns its VmHWM in bytes and how many
// roots/list the server saw refused.
func floodPeak(t *testing.T, n int, unbounded bool) (peak int64, refused int) {
	t.Helper()
	pipe := func() (*os.File, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		return r, w
	}
	cinR, cinW := pipe()   // client → bridge
	coutR, coutW := pipe() // bridge → client
	sinR, sinW := pipe()   // bridge → server
	soutR, soutW := pipe() // server → bridge
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), floodChildEnv+"=1")
	if unbounded {
		cmd.Env = append(cmd.Env, floodUnboundedEnv+"=1")
	}
	cmd.Stdin, cmd.Stdout = cinR, coutW
	cmd.ExtraFiles = []*os.File{sinW, soutR}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cinR.Close()
	coutW.Close()
	sinW.Close()
	soutR.Close()
	defer func() {
		cinW.Close()
		soutW.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("bridge child: %v\n%s", err, stderr.String())
		}
		t.Logf("child stderr: %d lines", strings.Count(stderr.String(), "\n"))
	}()

	// The server reads what the bridge sends it: the initialize, then refusals.
	serverDone := make(chan int, 1)
	go func() {
		s := bufio.NewScanner(sinR)
		s.Buffer(nil, 1<<20)
		count := 0
		for s.Scan() {
			if bytes.Contains(s.Bytes(), []byte(`"code":-32000`)) {
				count++
			}
		}
		serverDone <- count
	}()
	if _, err := io.WriteString(cinW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"c","version":"1"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(soutW, 1<<16)
	for i := range n {
		bw.WriteString(`{"jsonrpc":"2.0","id":`)
		bw.WriteString(strconv.Itoa(i + 1))
		bw.WriteString(`,"method":"roots/list"}` + "\n")
	}
	// The server loop handles lines in order: once this ping reaches the client, every
	// roots/list before it has been handled.
	bw.WriteString(`{"jsonrpc":"2.0","id":"sync","method":"ping"}` + "\n")
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	cs := bufio.NewScanner(coutR)
	for cs.Scan() && !strings.Contains(cs.Text(), `"sync"`) {
	}
	peak = vmHWM(t, cmd.Process.Pid)
	cinW.Close() // the client leaves: the bridge closes the server's stdin and exits
	refused = <-serverDone
	return peak, refused
}

// vmHWM reads a process's peak resident set size from /proc/PID/status.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}
