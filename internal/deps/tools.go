//go:build tools

// Package deps pins the project's dependencies until code imports them.
package deps

import (
	_ "github.com/elastic/go-seccomp-bpf"
	_ "github.com/hanwen/go-fuse/v2/fs"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/spf13/pflag"
	_ "go.uber.org/zap"
	_ "golang.org/x/sys/unix"
)
