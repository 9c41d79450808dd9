// Command mcpecho is the trivial stdio MCP server that scripts/bench measures
// the bridge with. It is built statically so that it runs unchanged inside the
// rootfs sandbox, whose / is the view plus read-only runtime directories.
//
// Tools:
//
//	echo {"text": s}  returns s; the round-trip workload
//	stat {"path": p}  returns p's size, or a tool error if p cannot be
//	                  stat'ed; the bench polls it to see when a new root
//	                  becomes visible inside the sandbox
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text"`
}

type echoOut struct {
	Text string `json:"text"`
}

type statIn struct {
	Path string `json:"path"`
}

type statOut struct {
	Size int64 `json:"size"`
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpecho", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "return text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut(in), nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "stat", Description: "stat a path"},
		func(_ context.Context, _ *mcp.CallToolRequest, in statIn) (*mcp.CallToolResult, statOut, error) {
			fi, err := os.Stat(in.Path)
			if err != nil {
				return nil, statOut{}, fmt.Errorf("stat: %w", err)
			}
			return nil, statOut{Size: fi.Size()}, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatalf("mcpecho: %v", err)
	}
}
