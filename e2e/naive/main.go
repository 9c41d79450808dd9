// Command naive is a deliberately naive MCP server for the end-to-end tests.
//
// It reads, lists, writes and runs whatever it is told and checks nothing: no
// roots, no path validation, no allow list. It is the worst server a person
// might wrap with rootfs, so whatever it can reach under "rootfs run" is what
// rootfs lets through. The tests build it with CGO_ENABLED=0, so it is one
// static file that runs inside the sandbox with no runtime beside it.
//
// It speaks MCP over stdio through go-sdk v1.8.0 (the server side, answering
// server/discover as that SDK does). Tools:
//
//	read_file {path}            the file's bytes as text
//	list_dir {path}             the names in the directory, one per line, sorted
//	write_file {path, content}  creates or truncates path
//	exec {argv}                 runs argv[0] with argv[1:], returns stdout+stderr and the status
//	get_roots                   calls roots/list on the client and returns the JSON result
//	stats                       counters: roots/list_changed notifications received
//	crash {code, signal}        exits with code (or dies of signal) in the middle of the request
//	flood_stderr {bytes}        writes that many bytes to stderr, then answers
//	stdout {lines}              writes raw lines to stdout (forged or broken messages)
//	unshare                     unshare(CLONE_NEWUSER) (the seccomp filter refuses it): "ERRNO pid N"
//
// Flags (for the fault cases):
//
//	-banner TEXT   print TEXT and a newline to stdout before speaking MCP
//	-marker S      ignored; lets a test find this process by its command line
package main

//lint:file-ignore SA1019 go-sdk deprecates roots (SEP-2577), but rootfs exists to enforce them and every real client still sends them until at least 2027-07-28

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type pathArgs struct {
	Path string `json:"path" jsonschema:"any path at all"`
}

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

type execArgs struct {
	Argv []string `json:"argv" jsonschema:"the program and its arguments"`
}

type crashArgs struct {
	Code   int `json:"code"`
	Signal int `json:"signal,omitempty" jsonschema:"if set, kill itself with this signal instead"`
}

type floodArgs struct {
	Bytes int `json:"bytes"`
}

type linesArgs struct {
	Lines []string `json:"lines"`
}

type empty struct{}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func main() {
	banner := flag.String("banner", "", "text printed to stdout before MCP starts (a misbehaving server)")
	flag.String("marker", "", "ignored; identifies the process in tests")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("naive: ")

	if *banner != "" {
		fmt.Fprintln(os.Stdout, *banner)
	}

	var listChanged atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "naive", Version: "0.0.1"}, &mcp.ServerOptions{
		RootsListChangedHandler: func(context.Context, *mcp.RootsListChangedRequest) {
			listChanged.Add(1)
		},
	})

	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "read any file"},
		func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
			b, err := os.ReadFile(a.Path)
			if err != nil {
				return nil, nil, err
			}
			return text(string(b)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_dir", Description: "list any directory"},
		func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
			ents, err := os.ReadDir(a.Path)
			if err != nil {
				return nil, nil, err
			}
			names := make([]string, 0, len(ents))
			for _, e := range ents {
				names = append(names, e.Name())
			}
			sort.Strings(names)
			return text(strings.Join(names, "\n")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "write any file"},
		func(_ context.Context, _ *mcp.CallToolRequest, a writeArgs) (*mcp.CallToolResult, any, error) {
			if err := os.WriteFile(a.Path, []byte(a.Content), 0o644); err != nil {
				return nil, nil, err
			}
			return text(fmt.Sprintf("wrote %d bytes to %s", len(a.Content), a.Path)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "exec", Description: "run any program"},
		func(ctx context.Context, _ *mcp.CallToolRequest, a execArgs) (*mcp.CallToolResult, any, error) {
			if len(a.Argv) == 0 {
				return nil, nil, errors.New("argv is empty")
			}
			var out bytes.Buffer
			cmd := exec.CommandContext(ctx, a.Argv[0], a.Argv[1:]...)
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			status := 0
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				status = ee.ExitCode()
			case err != nil:
				return nil, nil, err
			}
			res := text(out.String())
			res.IsError = status != 0
			res.Content = append(res.Content, &mcp.TextContent{Text: fmt.Sprintf("exit status %d", status)})
			return res, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "get_roots", Description: "ask the client for its roots"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, nil, fmt.Errorf("roots/list: %w", err)
			}
			b, err := json.Marshal(res)
			if err != nil {
				return nil, nil, err
			}
			return text(string(b)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "stats", Description: "counters"},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			b, _ := json.Marshal(map[string]int64{"rootsListChanged": listChanged.Load()})
			return text(string(b)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "exit in the middle of this request"},
		func(_ context.Context, _ *mcp.CallToolRequest, a crashArgs) (*mcp.CallToolResult, any, error) {
			if a.Signal != 0 {
				_ = syscall.Kill(os.Getpid(), syscall.Signal(a.Signal))
				select {} // the signal ends the process
			}
			os.Exit(a.Code)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "flood_stderr", Description: "write many bytes to stderr"},
		func(_ context.Context, _ *mcp.CallToolRequest, a floodArgs) (*mcp.CallToolResult, any, error) {
			w := bufio.NewWriterSize(os.Stderr, 1<<16)
			line := bytes.Repeat([]byte("x"), 1023)
			line = append(line, '\n')
			for n := 0; n < a.Bytes; n += len(line) {
				if _, err := w.Write(line); err != nil {
					return nil, nil, err
				}
			}
			if err := w.Flush(); err != nil {
				return nil, nil, err
			}
			return text(fmt.Sprintf("wrote %d bytes to stderr", a.Bytes)), nil, nil
		})

	addUnshare(s)
	mcp.AddTool(s, &mcp.Tool{Name: "stdout", Description: "write raw lines to stdout"},
		func(_ context.Context, _ *mcp.CallToolRequest, a linesArgs) (*mcp.CallToolResult, any, error) {
			// One write per line, so the SDK's own lines are not torn.
			for _, l := range a.Lines {
				if _, err := os.Stdout.Write([]byte(l + "\n")); err != nil {
					return nil, nil, err
				}
			}
			return text(fmt.Sprintf("wrote %d lines", len(a.Lines))), nil, nil
		})

	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
