#!/usr/bin/env bash
# Runs the kernel data path tests (internal/linux TestKernelPath*) under
# another kernel, in qemu, to check the behaviour docs/kernel-data-path.md
# relies on. Give it a Debian linux-image .deb (apt-get download
# linux-image-6.1.0-47-amd64); it boots the kernel with an initramfs holding
# busybox, the kernel's fuse.ko and the static test binary, runs the tests
# as root, and prints their output. Needs qemu-system-x86 and busybox-static.
#
#   scripts/kernel-vm.sh linux-image-6.1.0-47-amd64_*.deb [TestKernelPathX]
#
# TCG by default (a few minutes; nested KVM hung or failed on the 2-core
# VM); KVM=1 uses KVM with -cpu host.
set -euo pipefail
deb=$(realpath "$1")
run=${2:-TestKernelPath}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work/deb"
kernel=$(ls "$work"/deb/boot/vmlinuz-*)
fuse=$(find "$work/deb" -name 'fuse.ko*' | head -1)
root="$work/root"
mkdir -p "$root"/{bin,proc,sys,dev,tmp}
cp "$(command -v busybox)" "$root/bin/busybox"
case "$fuse" in
*.xz) xz -dc "$fuse" >"$root/fuse.ko" ;;
*.zst) zstd -dcq "$fuse" >"$root/fuse.ko" ;;
*) cp "$fuse" "$root/fuse.ko" ;;
esac
CGO_ENABLED=0 go test -c -o "$root/linux.test" ./internal/linux/
printf '#!/bin/busybox sh\nexit 0\n' >"$root/bin/fusermount3" # only looked up; mounts are direct
chmod +x "$root/bin/fusermount3"
# pivot_root refuses the initramfs as the old root: copy onto a tmpfs first.
cat >"$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox mkdir -p /newroot
/bin/busybox mount -t tmpfs -o size=600m root /newroot
/bin/busybox cp -a /bin /linux.test /fuse.ko /init2 /newroot/
/bin/busybox mkdir -p /newroot/proc /newroot/sys /newroot/dev /newroot/tmp
exec /bin/busybox switch_root /newroot /init2
EOF
cat >"$root/init2" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs -o mode=1777 tmp /tmp
insmod /fuse.ko
echo "KERNEL \$(uname -r)"
cd /tmp
TMPDIR=/tmp /linux.test -test.v -test.count=1 -test.run '$run' 2>&1
echo "TESTEXIT \$?"
poweroff -f
EOF
chmod +x "$root/init" "$root/init2"
(cd "$root" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz"
accel=(-accel tcg -cpu max)
if [ "${KVM:-0}" = 1 ]; then
  accel=(-enable-kvm -cpu host)
fi
timeout 1200 qemu-system-x86_64 "${accel[@]}" -smp 2 -m 1536 -nographic -no-reboot \
  -kernel "$kernel" -initrd "$work/initrd.gz" -append "console=ttyS0 quiet panic=-1" </dev/null |
  tr -d '\r' >"$work/console.log" || true
if ! grep -q 'TESTEXIT ' "$work/console.log"; then
  echo "the VM did not finish the tests; its console:" >&2
  tail -40 "$work/console.log" >&2
  exit 1
fi
grep -aE "KERNEL |^ *kpath_|^(---|PASS|FAIL|ok)|TESTEXIT" "$work/console.log"
grep -q 'TESTEXIT 0' "$work/console.log"
