#!/usr/bin/env bash
# Installs what rootfs needs on Debian/Ubuntu, builds ./rootfs, and (unless
# --deps-only) mounts a demo root so you can look at the view.
#
#   sudo scripts/setup.sh             # install, build, mount a demo root at /tmp/rootfs-demo/view
#   sudo scripts/setup.sh --deps-only # install and build only (CI uses this)
# In a root shell (a container without sudo), run it without "sudo".
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v fusermount3 >/dev/null || need_apt+=(fuse3)
command -v git >/dev/null || need_apt+=(git)
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
command -v curl >/dev/null || need_apt+=(curl ca-certificates)
command -v unzip >/dev/null || need_apt+=(unzip)
command -v sqlite3 >/dev/null || need_apt+=(sqlite3) # tests: SQLite locks through the view
# For the tests of completion (bash, zsh, fish), the man page and the
# packages (installed into a fresh Debian root made by mmdebstrap).
command -v zsh >/dev/null || need_apt+=(zsh)
[ -f /usr/share/bash-completion/bash_completion ] || need_apt+=(bash-completion)
command -v fish >/dev/null || need_apt+=(fish)
command -v man >/dev/null || need_apt+=(man-db)
command -v groff >/dev/null || need_apt+=(groff-base)
command -v mmdebstrap >/dev/null || need_apt+=(mmdebstrap)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: need root to install ${need_apt[*]}; run: sudo $0 $*" >&2
    exit 1
  fi
  echo "setup: installing ${need_apt[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# go.mod needs Go 1.26. Go 1.21+ fetches the right toolchain from the module
# proxy by itself; an older or missing go (Debian 12 ships 1.19) gets the
# toolchain the same way, from the proxy's golang.org/toolchain module.
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
want_go=$(sed -n 's/^go \([0-9.]*\).*/\1/p' go.mod)
go_ok() {
  command -v go >/dev/null || return 1
  local v; v=$(go env GOVERSION 2>/dev/null | sed 's/^go//') || return 1
  [ -n "$v" ] || return 1
  [ "$(printf '%s\n1.21\n' "$v" | sort -V | head -1)" = "1.21" ]
}
if ! go_ok; then
  arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
  dest=/usr/local/lib/rootfs-go
  if [ ! -x "$dest/bin/go" ]; then
    proxy=$(printf '%s' "${GOPROXY:-https://proxy.golang.org}" | cut -d, -f1)
    url="$proxy/golang.org/toolchain/@v/v0.0.1-go$want_go.linux-$arch.zip"
    echo "setup: fetching Go $want_go from $url" >&2
    tmp=$(mktemp -d)
    curl -fsSL -o "$tmp/go.zip" "$url"
    unzip -q "$tmp/go.zip" -d "$tmp"
    rm -rf "$dest" && mkdir -p "$(dirname "$dest")"
    mv "$tmp/golang.org/toolchain@v0.0.1-go$want_go.linux-$arch" "$dest"
    chmod +x "$dest"/bin/* "$dest"/pkg/tool/*/* 2>/dev/null || true
    rm -rf "$tmp"
  fi
  export PATH="$dest/bin:$PATH"
  echo "setup: using $dest/bin/go; add it to PATH to build by hand" >&2
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
