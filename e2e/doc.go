// Package e2e holds the end-to-end suite of rootfs: real MCP clients and
// servers, run through the built "rootfs run" binary, each containment case
// beside a negative control that runs the same server without rootfs.
//
// The peers:
//
//   - client.mjs: the official TypeScript SDK client (legacy era, roots with
//     listChanged) driven by a JSON scenario; it prints a transcript.
//   - naive/: a go-sdk v1.8.0 server that reads, lists, writes and runs
//     whatever it is told, checking nothing; built static by the tests.
//   - @modelcontextprotocol/server-filesystem and server-everything from npm,
//     pinned by package-lock.json.
//   - go-sdk v1.8.0 clients in-process, and a raw JSON-RPC client for faults.
//   - firstcall.mjs: the TypeScript SDK client again, running the first calls of many fresh
//     sessions a few at a time (firstcall_test.go); tap/tap.mjs, preloaded into the server,
//     records what it reads and when it takes its roots in.
//
// # Running
//
//	npm ci --prefix e2e
//	go test -count=1 ./e2e/
//
// Without node_modules, node, /dev/fuse or a buildable cmd/rootfs the tests
// skip with the reason; with ROOTFS_REQUIRE_FUSE=1 (CI) a missing
// prerequisite fails instead. TestMain prints the count of cases and negative
// controls at the end. ROOTFS_E2E_BIN runs the suite against another
// rootfs binary, ROOTFS_E2E_CONTROL_BIN names the matching control build
// (-tags rootfs_control, see internal/control) for the negative controls.
//
// # Soak
//
// TestSoak (soak_linux_test.go) runs only with ROOTFS_SOAK=N, from
// scripts/soak: N sessions, each ended one of five ways (the client
// closes stdin or dies, the server crashes or exits 0, SIGTERM to
// rootfs), each checked for its exit status, leftover processes, mount
// namespaces and host mounts; it ends with "soak: N passed, M failed".
//
// # Host layout
//
// hostlayout_test.go holds issue 14's cases: roots under /tmp at their own
// paths, through server-filesystem, the naive server (every ancestor of a
// root, roots/list verbatim), swaps under load, the naive attacks and
// testcmd/probe's battery run inside "rootfs run", and nested roots.
//
// # Examples
//
// The client configurations in ../examples are the single source of truth
// for the README: TestExamples reads each file, takes its command line and
// runs exactly that (with the paths a test machine needs substituted).
package e2e
