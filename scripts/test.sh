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
# Off Linux rootfs only builds (its stubs say it needs Linux); keep it so.
GOOS=darwin go vet ./...
GOOS=freebsd go vet ./...

# Linters at pinned versions, fetched through the Go module proxy on first use
# and cached after (staticcheck keeps its own cache: a second run takes seconds).
# A finding that stays is justified where it is (//lint:ignore CHECK reason).
echo "== staticcheck" >&2
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
echo "== deadcode" >&2 # it prints unreachable functions but exits 0
dead="$(go run golang.org/x/tools/cmd/deadcode@v0.52.0 -test ./...)"
if [ -n "$dead" ]; then
  printf '%s\n' "$dead" >&2
  echo "deadcode: the functions above are unreachable from main and the tests; delete them" >&2
  exit 1
fi

echo "== go test (all packages, one test binary at a time)" >&2
go test -count=1 -p 1 -timeout 30m ./...

echo "== go test: end-to-end and run-level tests again on the --strict data path" >&2
ROOTFS_TEST_MODE=strict ROOTFS_TEST_LAYOUT=flat go test -count=1 -p 1 -timeout 30m ./e2e/ ./cmd/...

echo "== go test -race (unit and bridge tests)" >&2
go test -count=1 -race -short -timeout 15m ./rootset/ ./vfs/ ./mcpbridge/ ./audit/ ./session/ ./instance/ ./netpolicy/... ./internal/seccomp/

fuzztime="${ROOTFS_FUZZTIME:-15s}"
fuzz() { # package target
  if grep -qs "func $2(" "$1"/*_test.go; then
    echo "== fuzz $1 $2 ($fuzztime)" >&2
    go test -run='^$' -fuzz="^$2\$" -fuzztime="$fuzztime" "./$1"
  fi
}
fuzz rootset FuzzParseRoot
fuzz rootset FuzzNames
fuzz mcpbridge FuzzRouter
fuzz netpolicy FuzzParseRule
fuzz netpolicy/netstack FuzzServerName
fuzz netpolicy/netstack FuzzDNSAnswer
fuzz audit FuzzAppendJSON
echo "== all tests passed" >&2
