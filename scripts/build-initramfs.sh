#!/bin/bash
# Build a busybox-static based initramfs for a guest kernel fetched by
# scripts/fetch-kernels.sh.
#
# Usage: scripts/build-initramfs.sh KVER OUT.cpio.gz [EXTRA.ko ...]
#
# The image's /init (POSIX sh):
#   * mounts proc, sysfs, devtmpfs, devpts, debugfs (/sys/kernel/debug), tmpfs /tmp
#   * loads the virtio PCI transport (virtio_pci; built in on 6.12, modules on
#     6.1) with its dependencies, resolved on the host from the kernel's own
#     modules.dep; extra modules named in $HUGEROOM_INITRAMFS_MODULES are
#     loaded too (default: virtio_pci). virtio_balloon is always included
#     (not loaded): `modprobe virtio_balloon` works in the guest.
#   * loads EXTRA.ko files in the order given (after their dependencies)
#   * runs /test.sh if present (normally added by a second, concatenated cpio
#     archive from scripts/make-overlay.sh), prints
#     "HUGEROOM-TEST-EXIT=<rc>" and powers off (poweroff -f);
#     without /test.sh, or with "hr.shell" on the kernel command line, it
#     starts a shell on the console (setsid cttyhack sh) and powers off when
#     the shell exits.
# Kernel command line expected: console=ttyS0 panic=-1 (plus QEMU -no-reboot,
# so a panic ends QEMU instead of rebooting). Messages from /init start with
# "hr-init:".
# Prints OUT.cpio.gz's path on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -ge 2 ] || die "usage: $0 KVER OUT.cpio.gz [EXTRA.ko ...]"
KVER=$1; OUT=$2; shift 2
ROOT=$HUGEROOM_CACHE/kernels/$KVER
[ -d "$ROOT/lib/modules/$KVER" ] ||
    die "kernel $KVER not in $HUGEROOM_CACHE/kernels; run scripts/fetch-kernels.sh (it prints the available versions)"
BUSYBOX=/bin/busybox
{ [ -x "$BUSYBOX" ] && ! ldd "$BUSYBOX" >/dev/null 2>&1; } ||
    die "$BUSYBOX is missing or not static; apt-get install busybox-static (scripts/install-deps.sh)"
command -v cpio >/dev/null || die "cpio not found; run scripts/install-deps.sh"
for ko in "$@"; do
    [ -f "$ko" ] || die "extra module $ko not found"
done

LOAD_MODS=${HUGEROOM_INITRAMFS_MODULES:-virtio_pci}
CARRY_MODS="virtio_balloon"

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/hr-initramfs.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
MDIR=lib/modules/$KVER

# Copy a module (path inside $ROOT) into the stage, decompressed; print its
# stage-relative path (.ko).
copy_mod() {
    local src=$1 rel dst
    rel=${src#"$ROOT"/}
    case $rel in
        *.ko.xz)  dst=${rel%.xz};  mkdir -p "$STAGE/$(dirname "$dst")"; [ -f "$STAGE/$dst" ] || xz -dc "$src" >"$STAGE/$dst" ;;
        *.ko.zst) dst=${rel%.zst}; mkdir -p "$STAGE/$(dirname "$dst")"; [ -f "$STAGE/$dst" ] || zstd -qdc "$src" >"$STAGE/$dst" ;;
        *.ko.gz)  dst=${rel%.gz};  mkdir -p "$STAGE/$(dirname "$dst")"; [ -f "$STAGE/$dst" ] || gzip -dc "$src" >"$STAGE/$dst" ;;
        *.ko)     dst=$rel;        mkdir -p "$STAGE/$(dirname "$dst")"; [ -f "$STAGE/$dst" ] || cp "$src" "$STAGE/$dst" ;;
        *) die "unexpected module file $src" ;;
    esac
    printf '/%s\n' "$dst"
}

# Resolve NAME with its dependencies (deps first); print stage paths of the
# loadable modules (builtins print nothing).
resolve() {
    local name=$1 out line
    out=$(modprobe -d "$ROOT" -S "$KVER" --show-depends "$name" 2>&1) ||
        die "module $name not found for $KVER: $out"
    while read -r line; do
        case $line in
            insmod\ *) line=${line#insmod }; copy_mod "${line%% *}" ;;
            builtin\ *) ;;
            *) ;;
        esac
    done <<<"$out"
}

info "building initramfs for $KVER -> $OUT"
mkdir -p "$STAGE"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,root,etc,mnt,"$MDIR"}
cp "$BUSYBOX" "$STAGE/bin/busybox"
# The kernel opens /dev/console on the initramfs before devtmpfs is mounted.
mknod -m 600 "$STAGE/dev/console" c 5 1
mknod -m 666 "$STAGE/dev/null" c 1 3
# Links for every applet, so /init does not depend on --install at run time.
for app in $("$BUSYBOX" --list-full); do
    [ -e "$STAGE/$app" ] || { mkdir -p "$STAGE/$(dirname "$app")"; ln -s /bin/busybox "$STAGE/$app"; }
done

: >"$STAGE/etc/hr-modules.load"
for m in $LOAD_MODS; do
    resolve "$m" >>"$STAGE/etc/hr-modules.load"
done
for m in $CARRY_MODS; do
    resolve "$m" >/dev/null
done
for ko in "$@"; do
    deps=$(modinfo -F depends "$ko" 2>/dev/null | tr ',' ' ')
    for d in $deps; do
        resolve "$d" >>"$STAGE/etc/hr-modules.load"
    done
    mkdir -p "$STAGE/$MDIR/extra"
    cp "$ko" "$STAGE/$MDIR/extra/"
    echo "/$MDIR/extra/$(basename "$ko")" >>"$STAGE/etc/hr-modules.load"
done
# Drop duplicates, keep first occurrence (dependency order).
awk '!seen[$0]++' "$STAGE/etc/hr-modules.load" >"$STAGE/etc/hr-modules.load.u"
mv "$STAGE/etc/hr-modules.load.u" "$STAGE/etc/hr-modules.load"
# modules.dep etc. for the copied modules, so `modprobe NAME` works in the guest.
for f in modules.builtin modules.builtin.modinfo modules.order; do
    [ -f "$ROOT/$MDIR/$f" ] && cp "$ROOT/$MDIR/$f" "$STAGE/$MDIR/"
done
depmod -b "$STAGE" "$KVER" 2>/dev/null || warn "depmod in the initramfs stage failed; in-guest modprobe may not work"

printf '%s\n' "$KVER" >"$STAGE/etc/hr-kver"
cat >"$STAGE/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
EOF
cat >"$STAGE/etc/group" <<'EOF'
root:x:0:
EOF

cat >"$STAGE/init" <<'EOF'
#!/bin/sh
# hugeroom test initramfs /init (generated by scripts/build-initramfs.sh)
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
say() { echo "hr-init: $*" >/dev/console 2>/dev/null || echo "hr-init: $*"; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null || true
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null || say "debugfs mount failed"
exec </dev/console >/dev/console 2>&1
hostname hugeroom-guest

while read -r ko; do
    [ -n "$ko" ] || continue
    name=${ko##*/}; name=${name%.ko}
    if grep -q "^$(echo "$name" | tr - _) " /proc/modules; then continue; fi
    insmod "$ko" || say "insmod $ko failed"
done </etc/hr-modules.load
say "kernel $(uname -r), modules loaded"

case " $(cat /proc/cmdline) " in
    *" hr.shell "*) shell=1 ;;
    *) shell= ;;
esac
if [ -z "$shell" ] && [ -f /test.sh ]; then
    say "running /test.sh"
    if [ -x /test.sh ]; then /test.sh; rc=$?; else sh /test.sh; rc=$?; fi
    echo "HUGEROOM-TEST-EXIT=$rc"
else
    say "no /test.sh: starting a shell on the console; exit it to power off"
    setsid cttyhack sh
fi
sync
poweroff -f
EOF
chmod 755 "$STAGE/init"

mkdir -p "$(dirname "$OUT")"
(cd "$STAGE" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) |
    gzip -9n >"$OUT.tmp.$$"
mv "$OUT.tmp.$$" "$OUT"
info "initramfs $OUT: $(du -h "$OUT" | cut -f1), modules: $(sed 's|.*/||' "$STAGE/etc/hr-modules.load" | tr '\n' ' ')"
printf '%s\n' "$OUT"
