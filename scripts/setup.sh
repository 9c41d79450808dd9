#!/usr/bin/env bash
# Installs what rootfs needs on Debian/Ubuntu, builds ./rootfs, and (unless
# --deps-only) mounts a demo root so you can look at the view.
#
#   sudo scripts/setup.sh             # install, build, mount a demo root at /tmp/rootfs-demo/view
#   sudo scripts/setup.sh --deps-only # install and build only (CI uses this)
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v fusermount3 >/dev/null || need_apt+=(fuse3)
command -v git >/dev/null || need_apt+=(git)
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
command -v go >/dev/null || need_apt+=(golang-go)
command -v gcc >/dev/null || need_apt+=(gcc)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: need root to install ${need_apt[*]}; run: sudo $0 $*" >&2
    exit 1
  fi
  echo "setup: installing ${need_apt[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# go.mod asks for a newer Go than some distributions ship; Go 1.21+ fetches
# the right toolchain from the module proxy by itself.
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
if ! go version >/dev/null 2>&1; then
  echo "setup: go does not run; install Go 1.21 or newer (https://go.dev/dl) and retry" >&2
  exit 1
fi

if [ -f e2e/package-lock.json ] && [ ! -d e2e/node_modules ]; then
  echo "setup: npm ci --prefix e2e" >&2
  npm ci --prefix e2e --no-audit --no-fund --loglevel=error >&2
fi

go build -o rootfs ./cmd/rootfs
echo "setup: built ./rootfs ($(go version | cut -d' ' -f3))" >&2

if [ "${1:-}" = "--deps-only" ]; then
  exit 0
fi

demo=/tmp/rootfs-demo
mkdir -p "$demo/project" "$demo/view"
echo "hello from a root" > "$demo/project/README.txt"
echo "setup: mounting the demo root at $demo/view (Ctrl-C unmounts)" >&2
echo "setup: in another shell: ls -la $demo/view $demo/view/project" >&2
exec ./rootfs mount --root "$demo/project" "$demo/view"
