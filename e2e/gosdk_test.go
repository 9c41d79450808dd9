package e2e

//lint:file-ignore SA1019 go-sdk deprecates roots (SEP-2577), but rootfs exists to enforce them and every real client still sends them until at least 2027-07-28

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// goClient connects a go-sdk v1.8.0 client with roots to argv. The client
// uses its defaults: it probes with server/discover first and declares roots
// with listChanged.
func goClient(t *testing.T, ctx context.Context, argv []string, roots []mcpRoot) (*mcp.Client, *mcp.ClientSession, *tail, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "rootfs-e2e-go", Version: "0.0.1"}, nil)
	for _, r := range roots {
		c.AddRoots(&mcp.Root{URI: r.URI, Name: r.Name})
	}
	stderr := newTail(64 << 10)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return c, cs, stderr, err
}

// toolText calls a tool and returns its text and whether it is an error
// (a protocol error comes back as err).
func toolText(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, bool, error) {
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError, nil
}

// pollTool calls a tool until ok accepts its text, for at most 15 s.
func pollTool(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, ok func(string) bool) (string, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		text, isErr, err := toolText(ctx, cs, name, args)
		if err == nil && !isErr && ok(text) {
			return text, nil
		}
		if time.Now().After(deadline) {
			switch {
			case err != nil:
				return text, err
			case isErr:
				return text, errTool(text)
			}
			// The tool answered, never as ok wanted: a caller that
			// checks only the error must not take that for success.
			return text, fmt.Errorf("%s answered for 15 s, never as the test waits for: last %q", name, text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type errTool string

func (e errTool) Error() string { return "tool error: " + string(e) }

// TestGoSDKClient is case 4: a go-sdk v1.8.0 client (which probes with
// server/discover) against the go-sdk naive server under rootfs run: roots
// reach the server, translated, and follow a change. The negative control:
// the same pair without rootfs negotiates the 2026-07-28 era, where the
// server cannot send roots/list at all.
func TestGoSDKClient(t *testing.T) {
	naive := buildNaive(t)
	f := newFixture(t, "proj-alpha", "proj-beta")

	t.Run("direct", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, cs, stderr, err := goClient(t, ctx, []string{naive}, f.rootsFor("proj-alpha"))
		if err != nil {
			t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
		}
		version := cs.InitializeResult().ProtocolVersion
		text, isErr, err := toolText(ctx, cs, "get_roots", nil)
		t.Logf("direct go-sdk pair: protocol %q, get_roots: %q isError=%v err=%v", version, text, isErr, err)
		expect(t, kindControl, "go-sdk pair without rootfs: modern era, the server cannot ask for roots",
			version == "2026-07-28" && (err != nil || isErr), "protocol %q, get_roots %q isError=%v err=%v", version, text, isErr, err)
	})

	t.Run("rootfs", func(t *testing.T) {
		rootfs := buildRootfs(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, cs, stderr, err := goClient(t, ctx, wrap(rootfs, nil, naive), f.rootsFor("proj-alpha", "proj-beta"))
		if !expect(t, kindWorks, "go-sdk client connects through rootfs (probe answered, initialize follows)", err == nil,
			"connect: %v\nstderr:\n%s", err, stderr) {
			return
		}
		t.Logf("protocol through rootfs: %s", cs.InitializeResult().ProtocolVersion)
		text, err := pollTool(ctx, cs, "get_roots", nil, func(s string) bool { return strings.Contains(s, f.vuri("proj-beta")) })
		var lr mcp.ListRootsResult
		_ = json.Unmarshal([]byte(text), &lr)
		uris := map[string]bool{}
		for _, r := range lr.Roots {
			uris[r.URI] = true
		}
		expect(t, kindWorks, "go-sdk: roots reach the server translated", err == nil && len(lr.Roots) == 2 &&
			uris[f.vuri("proj-alpha")] && uris[f.vuri("proj-beta")], "get_roots %q err=%v\nstderr:\n%s", text, err, stderr)
		if flatLayout() {
			expect(t, kindContain, "go-sdk: no host path in the server's roots", !strings.Contains(text, f.base), "%q", text)
		}

		text, _, err = toolText(ctx, cs, "read_file", map[string]any{"path": f.v("proj-beta", "proj-beta.txt")})
		expect(t, kindWorks, "go-sdk: the translated root works", err == nil && strings.Contains(text, "content of proj-beta"), "%q %v", text, err)

		// RemoveRoots makes the go-sdk client send notifications/roots/list_changed.
		c.RemoveRoots("file://" + f.roots["proj-beta"])
		text, err = pollTool(ctx, cs, "get_roots", nil, func(s string) bool {
			return strings.Contains(s, f.vuri("proj-alpha")) && !strings.Contains(s, "proj-beta")
		})
		expect(t, kindWorks, "go-sdk: a removed root leaves the server's roots", err == nil, "get_roots %q err=%v\nstderr:\n%s", text, err, stderr)
		text, isErr, err := toolText(ctx, cs, "read_file", map[string]any{"path": f.v("proj-beta", "proj-beta.txt")})
		expect(t, kindContain, "go-sdk: a removed root is gone from the view", err == nil && isErr && !strings.Contains(text, "content of"),
			"%q isError=%v err=%v", text, isErr, err)
	})
}
