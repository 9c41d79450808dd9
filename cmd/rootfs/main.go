// Command rootfs turns MCP roots into a boundary the kernel enforces.
// See README.md, or run "rootfs --help".
package main

import (
	"os"

	"github.com/rootfs-dev/rootfs/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stderr))
}
