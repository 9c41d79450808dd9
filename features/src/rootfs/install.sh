#!/bin/sh
# Dev Container Feature "rootfs": installs rootfs and fuse3 (Debian/Ubuntu).
# Runs as root at image build time. Options arrive as environment variables:
#   VERSION  a release of rootfs-dev/rootfs (1.2.0) or "latest" (default)
#   DEBPATH  a rootfs .deb already in the image: install it, fetch nothing
# ROOTFS_DEB, when set, is used like DEBPATH (for tests and offline builds).
# What the container must still be given (a Feature cannot add devices) is in
# README.md: --device=/dev/fuse.
set -eu

REPO=rootfs-dev/rootfs
VERSION="${VERSION:-latest}"
DEB="${ROOTFS_DEB:-${DEBPATH:-}}"

say() { echo "rootfs feature: $*" >&2; }

if ! command -v apt-get >/dev/null 2>&1; then
  say "needs a Debian or Ubuntu based image (apt-get); install rootfs and fuse3 by hand on others"
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  say "must run as root (dev container tools run Features as root)"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive

apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then
    apt-get update -qq
    apt_updated=1
  fi
  apt-get install -y -qq --no-install-recommends "$@"
}

tmp=""
if [ -z "$DEB" ]; then
  command -v curl >/dev/null 2>&1 || apt_install curl ca-certificates
  arch=$(dpkg --print-architecture)
  if [ "$VERSION" = "latest" ]; then
    # /releases/latest redirects to /releases/tag/vX.Y.Z.
    url=$(curl -fsSLI -o /dev/null -w '%{url_effective}' "https://github.com/$REPO/releases/latest")
    VERSION=${url##*/}
  fi
  VERSION=${VERSION#v}
  case "$VERSION" in
    [0-9]*) ;;
    *) say "no rootfs release found at https://github.com/$REPO/releases; set the \"version\" option or \"debPath\""; exit 1 ;;
  esac
  tmp=$(mktemp -d)
  DEB="$tmp/rootfs_${VERSION}_${arch}.deb"
  say "downloading rootfs $VERSION ($arch)"
  curl -fsSL -o "$DEB" "https://github.com/$REPO/releases/download/v$VERSION/rootfs_${VERSION}_${arch}.deb"
fi
if [ ! -f "$DEB" ]; then
  say "no such .deb: $DEB"
  exit 1
fi
case "$DEB" in /*) ;; *) DEB="$PWD/$DEB" ;; esac

# apt resolves the package's dependency on fuse3 from the image's sources.
say "installing $DEB"
apt_install "$DEB"
if [ -n "$tmp" ]; then rm -rf "$tmp"; fi
if [ -n "$apt_updated" ]; then
  rm -rf /var/lib/apt/lists/*
fi

rootfs --version
say "installed. The container also needs /dev/fuse (\"runArgs\": [\"--device=/dev/fuse\"]); run \"rootfs doctor\" in it to check."
