// Command mcpbench is the MCP client that scripts/bench measures the bridge
// with. It starts COMMAND (mcpecho directly, or "rootfs run ... -- mcpecho"),
// times sequential tools/call round trips, and optionally times roots changes.
//
// Usage:
//
//	mcpbench [-n N] [-warmup N] [-protocol V] [-root URI]... [-changes N -change-dir DIR] -- COMMAND [ARG...]
//
// Output is one "key value" pair per line on stdout, for the shell to parse:
//
//	protocol                                        (negotiated version)
//	rtt_n, rtt_p50_us, rtt_p90_us, rtt_p99_us, rtt_mean_us
//	change_n, change_p50_ms, change_max_ms          (from the roots/list answer)
//	change_notify_p50_ms, change_notify_max_ms      (from sending list_changed)
//	change_polls_p50                                (stat calls until visible)
//
// A roots change is: add root DIR/cNN (a fresh directory), which makes the
// SDK send notifications/roots/list_changed; the bridge asks roots/list, the
// client answers; then the client calls the server's "stat" tool on the
// root's path in the view until it succeeds: /<entry> in flat layout (the
// directory's base name, as vfs names entries), or the directory's own path
// with -host-paths (host layout, rootfs run's default since issue 14).
package main

//lint:file-ignore SA1019 go-sdk deprecates roots (SEP-2577), but rootfs exists to enforce them and every real client still sends them until at least 2027-07-28

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type rootFlags []string

func (r *rootFlags) String() string     { return fmt.Sprint(*r) }
func (r *rootFlags) Set(s string) error { *r = append(*r, s); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpbench:", err)
		os.Exit(1)
	}
}

func run() error {
	var roots rootFlags
	n := flag.Int("n", 2000, "timed tools/call round trips")
	warmup := flag.Int("warmup", 200, "untimed round trips first")
	changes := flag.Int("changes", 0, "roots changes to time (needs -change-dir)")
	changeDir := flag.String("change-dir", "", "directory in which to create the roots added by changes")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	protocol := flag.String("protocol", "2025-11-25", "protocol version to ask for; the same on both paths so that they compare (roots are deprecated in 2026-07-28)")
	hostPaths := flag.Bool("host-paths", false, "roots appear at their own paths (rootfs run --layout host), not at /<name>")
	flag.Var(&roots, "root", "initial client root (file:// URI or absolute path); repeatable")
	flag.Parse()
	argv := flag.Args()
	if len(argv) == 0 {
		return errors.New("no COMMAND; usage: mcpbench [flags] -- COMMAND [ARG...]")
	}
	if *changes > 0 && *changeDir == "" {
		return errors.New("-changes needs -change-dir")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	// answered receives the time each roots/list answer is handed back to
	// the SDK, which writes it to the peer right after.
	answered := make(chan time.Time, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "1"}, nil)
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "roots/list" {
				select {
				case answered <- time.Now():
				default:
				}
			}
			return res, err
		}
	})
	for _, r := range roots {
		client.AddRoots(&mcp.Root{URI: toURI(r)})
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second},
		&mcp.ClientSessionOptions{ProtocolVersion: *protocol})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()

	echo := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "ping"}}
	call := func(p *mcp.CallToolParams) (bool, error) {
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			return false, err
		}
		return !res.IsError, nil
	}
	for range *warmup {
		if _, err := call(echo); err != nil {
			return fmt.Errorf("warm-up call: %w", err)
		}
	}
	rtt := make([]float64, 0, *n)
	for range *n {
		t0 := time.Now()
		ok, err := call(echo)
		d := time.Since(t0)
		if err != nil {
			return fmt.Errorf("call: %w", err)
		}
		if !ok {
			return errors.New("echo returned a tool error")
		}
		rtt = append(rtt, float64(d.Nanoseconds())/1e3)
	}
	fmt.Printf("protocol %s\n", cs.InitializeResult().ProtocolVersion)
	fmt.Printf("rtt_n %d\n", len(rtt))
	fmt.Printf("rtt_p50_us %.1f\nrtt_p90_us %.1f\nrtt_p99_us %.1f\nrtt_mean_us %.1f\n",
		pct(rtt, 50), pct(rtt, 90), pct(rtt, 99), mean(rtt))

	if *changes == 0 {
		return nil
	}
	// Let the initial roots settle and drain their answers.
	time.Sleep(200 * time.Millisecond)
	drain(answered)
	var fromAnswer, fromNotify, polls []float64
	for i := range *changes {
		dir := filepath.Join(*changeDir, fmt.Sprintf("c%02d-%d", i, os.Getpid()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		defer os.Remove(dir)
		inView := "/" + filepath.Base(dir)
		if *hostPaths {
			inView = dir
		}
		stat := &mcp.CallToolParams{Name: "stat", Arguments: map[string]any{"path": inView}}
		// The entry must not be visible before the change.
		if ok, err := call(stat); err != nil || ok {
			return fmt.Errorf("entry %s visible before its root was added (err %v)", inView, err)
		}
		t0 := time.Now()
		client.AddRoots(&mcp.Root{URI: toURI(dir)})
		var tAns time.Time
		got := func() {
			for {
				select {
				case t := <-answered:
					if tAns.IsZero() {
						tAns = t
					}
				default:
					return
				}
			}
		}
		np := 0
		for {
			np++
			ok, err := call(stat)
			if err != nil {
				return fmt.Errorf("stat call: %w", err)
			}
			if ok {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("entry %s never became visible", inView)
			}
			got()
		}
		t1 := time.Now()
		got()
		if tAns.IsZero() {
			return errors.New("the bridge never asked roots/list after list_changed")
		}
		fromAnswer = append(fromAnswer, float64(t1.Sub(tAns).Microseconds())/1e3)
		fromNotify = append(fromNotify, float64(t1.Sub(t0).Microseconds())/1e3)
		polls = append(polls, float64(np))
		time.Sleep(50 * time.Millisecond)
		drain(answered)
	}
	fmt.Printf("change_n %d\n", len(fromAnswer))
	fmt.Printf("change_p50_ms %.2f\nchange_max_ms %.2f\n", pct(fromAnswer, 50), slices.Max(fromAnswer))
	fmt.Printf("change_notify_p50_ms %.2f\nchange_notify_max_ms %.2f\n", pct(fromNotify, 50), slices.Max(fromNotify))
	fmt.Printf("change_polls_p50 %.0f\n", pct(polls, 50))
	return nil
}

func toURI(s string) string {
	if filepath.IsAbs(s) {
		return (&url.URL{Scheme: "file", Path: s}).String()
	}
	return s
}

func drain(c chan time.Time) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// pct returns the p-th percentile (nearest rank) of xs.
func pct(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return s[i]
}

func mean(xs []float64) float64 {
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}
