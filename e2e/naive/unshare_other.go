//go:build !linux

package main

import "github.com/modelcontextprotocol/go-sdk/mcp"

func addUnshare(*mcp.Server) {}
