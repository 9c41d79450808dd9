package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// addUnshare adds the unshare tool: unshare(CLONE_NEWUSER), a call the
// sandbox's seccomp filter refuses with EPERM; it returns the errno's
// name ("ok" when it ran) and the server's pid as it sees it.
func addUnshare(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "unshare", Description: "call unshare(CLONE_NEWUSER)"},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			res := "ok"
			var e unix.Errno
			if err := unix.Unshare(unix.CLONE_NEWUSER); errors.As(err, &e) {
				res = unix.ErrnoName(e)
			} else if err != nil {
				res = err.Error()
			}
			return text(fmt.Sprintf("%s pid %d", res, os.Getpid())), nil, nil
		})
}
