#!/usr/bin/env bash
# Runs the whole test suite. Run it as root: the FUSE, sandbox and end-to-end
# tests mount real filesystems and create namespaces.
#
#   sudo scripts/test.sh                  # everything
#   ROOTFS_REQUIRE_FUSE=1 scripts/test.sh # as CI: a test that would skip for lack of FUSE/root fails
#   ROOTFS_FUZZTIME=1m scripts/test.sh    # fuzz longer (default 15s per target)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
# The toolchain scripts/setup.sh fetched when the system had no recent Go.
if [ -x /usr/local/lib/rootfs-go/bin/go ] && ! command -v go >/dev/null; then
  export PATH="/usr/local/lib/rootfs-go/bin:$PATH"
fi

if [ -f e2e/package-lock.json ] && [ ! -d e2e/node_modules ]; then
  npm ci --prefix e2e --no-audit --no-fund --loglevel=error >&2
fi

echo "== go vet" >&2
go vet ./...

echo "== go test (all packages, one test binary at a time)" >&2
go test -count=1 -p 1 -timeout 30m ./...

echo "== go test: end-to-end and run-level tests again on the --strict data path" >&2
ROOTFS_TEST_MODE=strict go test -count=1 -p 1 -timeout 30m ./e2e/ ./cmd/...

echo "== go test -race (unit and bridge tests)" >&2
go test -count=1 -race -short -timeout 15m ./vfs/ ./mcpbridge/

fuzztime="${ROOTFS_FUZZTIME:-15s}"
fuzz() { # package target
  if grep -qs "func $2(" "$1"/*_test.go; then
    echo "== fuzz $1 $2 ($fuzztime)" >&2
    go test -run='^$' -fuzz="^$2\$" -fuzztime="$fuzztime" "./$1"
  fi
}
fuzz vfs FuzzParseRoot
fuzz vfs FuzzNames
fuzz mcpbridge FuzzRouter
echo "== all tests passed" >&2
