// Package packaging holds the nfpm configuration that scripts/package uses
// and the tests of what users install: the .deb that scripts/package builds
// and the Dev Container Feature under features/src/rootfs, each installed
// into a fresh Debian root file system (made by mmdebstrap from Debian's
// mirror) where "rootfs doctor" must then find everything it needs.
//
// The tests need root (chroot, mounts, namespaces), mmdebstrap and the
// Debian mirror; without them they skip with the reason, and under
// ROOTFS_REQUIRE_FUSE=1 (CI) they fail instead. The Debian root is built
// once and kept for a day in the system's temporary directory, as a
// tarball and unpacked; each test mounts an overlay over the unpacked
// tree, so it starts from a pristine root without unpacking it again.
package packaging
