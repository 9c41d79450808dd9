// Command rootfs turns MCP roots into a boundary the kernel enforces.
// See README.md, or run "rootfs --help".
package main

import (
	"os"

	"github.com/rootfs-dev/rootfs/cmd/rootfs/cli"
	"github.com/rootfs-dev/rootfs/mountmgr"
)

func main() {
	// The sandbox's hidden stages re-execute this binary; they must run
	// before anything else touches the process.
	mountmgr.MaybeRunStage()
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
