// Package control turns protections off, one at a time, for the negative
// controls of the tests that prove them. A negative control runs the same
// attack or workload on a build without the protection and shows that it
// then succeeds (or costs what the protection saves), so that the test
// passing means the protection is what stops it.
//
// # Builds
//
// In a normal build On is constant false: the compiler drops the code it
// guards, and neither the knobs' names nor a reader of the environment
// reach the binary. A control build (go build -tags rootfs_control, or go
// test -c -tags rootfs_control) reads the knobs that are on from one
// place, the environment variable named by EnvVar, once as the process
// starts: a comma-separated list of the names String gives, such as
// "no-prefill,no-kill-priv". A name it does not know stops the process,
// so that a misspelt control cannot pass as the protected build.
//
// The tests build a control binary and set the variable for the processes
// they start (Names). A stage rootfs re-executes with an environment of its
// own passes Environ on, so that the whole session runs the same controls.
package control

import (
	"strconv"
	"strings"
)

// EnvVar names the environment variable a control build reads its knobs
// from. Nothing reads it in a normal build.
const EnvVar = "ROOTFS_CONTROL"

// Knob is one protection a control build can turn off. Each constant is
// named for what it turns off; its doc names the code it bends and the
// tests whose negative control it is.
type Knob int

const (
	_ Knob = iota

	// NoSlaveDaemon makes the daemon's (P1's) mount namespace private
	// instead of a slave of the host's, as before mounts propagated: a
	// mount the host makes below a root after the start never reaches the
	// view (mountmgr daemonSetup; cmd/rootfs/cli TestRunSeesHostMount*).
	NoSlaveDaemon
	// NoPrivateBinds leaves the sandbox's binds of host paths receiving
	// the host's later mounts, without the bind's ro,nosuid,nodev
	// (mountmgr's bind op in P2; cmd/rootfs/cli TestRunSeesHostMount*).
	NoPrivateBinds
	// NoSubmountRemount makes a read-only bind remount its top mount only,
	// leaving the source's submounts as they were (read-write) (mountmgr's
	// bind op; cmd/rootfs/cli TestRunROBindCoversSubmounts).
	NoSubmountRemount
	// NoTmpMountCheck skips the check that a root's mount on the sandbox's
	// /tmp/X landed there, and removes it by that path rather than through
	// its descriptor, although the server may have moved the mount point
	// (mountmgr/kpath tmproots; e2e TestAttackTmpMountRace).
	NoTmpMountCheck
	// NoTmpRefresh keeps the sandbox's /tmp/X when the view's tmp/X
	// becomes something else (mountmgr/kpath tmproots; e2e TestAttackTmpRoot*).
	NoTmpRefresh

	// NoWriteSet drops the session's record of what the server can write:
	// roots and bind sources are then resolved through any symlink, even
	// one the server planted (session Writable: writeSet and
	// checkBindSources; e2e TestNestedRoot*, TestHostLayoutNestedRoot).
	NoWriteSet

	// NoRootsHold lets the client's messages through to the server at
	// once instead of holding them until the server has the roots, so a
	// call can overtake them (mcpbridge rootsState; mcpbridge
	// TestFirstCallAfterServerRoots, TestCallAfterListChangedSeesNewRoots,
	// e2e TestServerFilesystemFirstCalls).
	NoRootsHold

	// NoSwapInvalidate stops the view's swap of roots from notifying the
	// kernel, which then keeps serving what it cached (vfs swap; vfs
	// TestViewSwapControl, the host-layout swap tests).
	NoSwapInvalidate
	// NoOpenDrop makes a swap leave files open outside the new tree alone
	// (vfs swap; vfs TestViewRevokeRenewedOpenFile).
	NoOpenDrop
	// NoFDRelief turns off the relief of descriptors when an open fails
	// with EMFILE or ENFILE (vfs fdrelief; vfs TestViewFDRelief).
	NoFDRelief
	// NoHostEvents makes the host watcher read and drop every event, while
	// the view keeps the long cache the watcher allows (vfs hostwatch; the
	// host-change tests of vfs).
	NoHostEvents
	// NoKillPriv turns off the view's handling of set-ID bits and file
	// capabilities on data changes: no killPriv (the daemon writes with
	// its own CAP_FSETID), passthrough for every file with the daemon's
	// credentials, and security.capability never removed (vfs; the set-ID
	// tests of vfs).
	NoKillPriv
	// NoLockOwners restores per-descriptor locks: each handle locks on its
	// own host descriptor and lock owners are ignored (vfs locks; the lock
	// tests of vfs, cmd/rootfs/cli TestSQLiteTwoConnections).
	NoLockOwners
	// NoCloseUnlock keeps a process's locks when it closes a descriptor
	// opened before the file was first locked: a handle flushes only if
	// its file was locked before it was opened, and RELEASE drops no
	// opener's locks (vfs locks; vfs TestViewLockCloseEarlierDescriptor).
	NoCloseUnlock
	// NoPrefill turns off the push of a small file's data into the page
	// cache at its first open (vfs; vfs TestViewPrefill).
	NoPrefill
	// NoPassthroughWindows makes the host watcher act on the view's own
	// writes through passthrough too (vfs hostwatch; vfs
	// TestViewPassthroughOwnWrites).
	NoPassthroughWindows
	// NoOpendirElision serves OPENDIR as before FUSE_NO_OPENDIR_SUPPORT
	// (vfs; vfs TestViewWarmWalkNoDirRequests).
	NoOpendirElision
	// NoTopListingGen numbers the top directory's entries by position
	// only, so that a listing continues in whatever table is current
	// (vfs toplist; vfs TestViewTopListingOneTable).
	NoTopListingGen

	// NoSpareMainThread lets internal/linux.InMountNamespace run its
	// function on the main thread, which then stays in the namespace it
	// joined (internal/linux TestInMountNamespaceSparesMainThread).
	NoSpareMainThread

	numKnobs
)

// names are the knobs' names in EnvVar.
var names = [numKnobs]string{
	NoSlaveDaemon:        "no-slave-daemon",
	NoPrivateBinds:       "no-private-binds",
	NoSubmountRemount:    "no-submount-remount",
	NoTmpMountCheck:      "no-tmp-mount-check",
	NoTmpRefresh:         "no-tmp-refresh",
	NoWriteSet:           "no-write-set",
	NoRootsHold:          "no-roots-hold",
	NoSwapInvalidate:     "no-swap-invalidate",
	NoOpenDrop:           "no-open-drop",
	NoFDRelief:           "no-fd-relief",
	NoHostEvents:         "no-host-events",
	NoKillPriv:           "no-kill-priv",
	NoLockOwners:         "no-lock-owners",
	NoCloseUnlock:        "no-close-unlock",
	NoPrefill:            "no-prefill",
	NoPassthroughWindows: "no-passthrough-windows",
	NoOpendirElision:     "no-opendir-elision",
	NoTopListingGen:      "no-top-listing-gen",
	NoSpareMainThread:    "no-spare-main-thread",
}

// String returns k's name in EnvVar.
func (k Knob) String() string {
	if k <= 0 || k >= numKnobs {
		return "knob(" + strconv.Itoa(int(k)) + ")"
	}
	return names[k]
}

// Names returns the value of EnvVar that turns ks on in a control build.
func Names(ks ...Knob) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = k.String()
	}
	return strings.Join(s, ",")
}
