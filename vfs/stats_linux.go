package vfs

import "sync/atomic"

// stats counts what the tests measure through the serve harness's
// commands ("notified", "dirrequests", "flushes", "reads"); nothing else
// reads it. Each counted event costs one atomic add.
type stats struct {
	notified    atomic.Int64 // the host watcher's notifications
	dirRequests atomic.Int64 // OPENDIR, READDIR(PLUS) and RELEASEDIR requests
	flushes     atomic.Int64 // FLUSH requests
	reads       atomic.Int64 // READ requests
}

// testStats is the process's: the tests serve one view per process.
var testStats stats
