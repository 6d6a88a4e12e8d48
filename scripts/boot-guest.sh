#!/bin/bash
# Boot a test guest in the background and print QEMU's pid on stdout.
#
# Usage: scripts/boot-guest.sh -k KVER -i INITRD [-i INITRD2 ...] -l SERIAL_LOG
#            [-m MEM] [-c CPUS] [-n NAME] [-a "EXTRA CMDLINE"] [-S SERIAL_SOCK]
#            [-Q QMP_SOCK] [-q QEMU] [-A auto|kvm|tcg] [-w] [-- EXTRA QEMU ARGS...]
#   -k KVER    kernel release as printed by scripts/fetch-kernels.sh, or a
#              series prefix: "6.12", "6.1"
#   -i INITRD  initramfs; several are concatenated in order (base image from
#              build-initramfs.sh, then overlays from make-overlay.sh)
#   -l LOG     serial console log file (QEMU's own stderr goes to LOG.qemu)
#   -m MEM     guest memory (default 1G)     -c CPUS  vCPUs (default 2)
#   -n NAME    QEMU -name (default hr-guest), its threads named (vCPUs "CPU n/TCG")
#   -a ARGS    appended to the kernel command line
#   -S SOCK    also expose the serial console on a unix socket (server,
#              wait=off); the log file still records everything
#   -Q SOCK    QMP unix socket (server, wait=off)
#   -q QEMU    QEMU binary (default: output of scripts/build-qemu.sh)
#   -A ACCEL   auto (default, or $HUGEROOM_ACCEL): KVM if a probe boot under
#              KVM works on this host, else TCG
#   -w         wait for QEMU to exit; exit with its status (a guest that
#              runs /test.sh powers off by itself)
# Extra QEMU args after "--", e.g.
#   -- -chardev socket,id=hr0,path=/run/hugeroom/vm.sock,reconnect-ms=1000 \
#      -device virtio-hugeroom-pci,chardev=hr0
# Kernel command line: console=ttyS0 panic=-1 loglevel=4 (+ -a ARGS); QEMU
# runs with -nodefaults (no CD-ROM: its AHCI probe costs SeaBIOS ~30 s under
# TCG; no NIC: no iPXE ROMs needed) and -no-reboot (a panic ends QEMU).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KVER='' MEM=1G CPUS=2 NAME=hr-guest APPEND='' LOG='' SSOCK='' QMP='' QEMU='' WAIT=''
ACCEL=${HUGEROOM_ACCEL:-auto}
INITRDS=()
while getopts 'k:i:l:m:c:n:a:S:Q:q:A:wh' opt; do
    case $opt in
        k) KVER=$OPTARG ;;
        i) INITRDS+=("$OPTARG") ;;
        l) LOG=$OPTARG ;;
        m) MEM=$OPTARG ;;
        c) CPUS=$OPTARG ;;
        n) NAME=$OPTARG ;;
        a) APPEND=$OPTARG ;;
        S) SSOCK=$OPTARG ;;
        Q) QMP=$OPTARG ;;
        q) QEMU=$OPTARG ;;
        A) ACCEL=$OPTARG ;;
        w) WAIT=1 ;;
        h) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
        *) die "bad option; see $0 -h" ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift
EXTRA=("$@")

[ -n "$KVER" ] || die "-k KVER is required (see scripts/fetch-kernels.sh output)"
[ ${#INITRDS[@]} -gt 0 ] || die "-i INITRD is required (scripts/build-initramfs.sh makes one)"
[ -n "$LOG" ] || die "-l SERIAL_LOG is required"
for f in "${INITRDS[@]}"; do [ -f "$f" ] || die "initramfs $f not found"; done

# Resolve a series prefix (6.12, 6.1) to a cached kernel release.
KROOT=$HUGEROOM_CACHE/kernels
if [ ! -e "$KROOT/$KVER/vmlinuz" ]; then
    match=
    for d in "$KROOT"/"$KVER".* "$KROOT"/"$KVER"-*; do
        [ -e "$d/vmlinuz" ] && { match=$(basename "$d"); break; }
    done
    [ -n "$match" ] || die "kernel $KVER not in $KROOT; run scripts/fetch-kernels.sh"
    KVER=$match
fi
VMLINUZ=$KROOT/$KVER/vmlinuz

if [ -z "$QEMU" ]; then
    QEMU=$("$HR_SCRIPTS/build-qemu.sh" | tail -1)
fi
[ -x "$QEMU" ] || die "QEMU binary $QEMU is not executable"

mkdir -p "$(dirname "$LOG")"
: >"$LOG"

# One initrd file: QEMU's -initrd takes a single file; concatenated gzip'd
# cpio archives are unpacked one after the other by the kernel.
if [ ${#INITRDS[@]} -eq 1 ]; then
    INITRD=${INITRDS[0]}
else
    INITRD=$LOG.initrd
    cat "${INITRDS[@]}" >"$INITRD"
fi

COMMON=(-nodefaults -L /usr/share/qemu -L /usr/share/seabios
    -machine q35 -display none -no-reboot)

# KVM probe: boot the kernel once under KVM with a one-line /init; cached per
# host boot and QEMU binary. Nested KVM on these machines opens
# /dev/kvm fine but the guest crashes, so opening it proves nothing.
kvm_works() {
    [ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
    local boot_id key cache dir rc=1 pid
    boot_id=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)
    key=$(printf '%s %s %s' "$boot_id" "$QEMU" "$(stat -c %Y "$QEMU")" | sha256sum | cut -c1-16)
    cache=$HUGEROOM_CACHE/accel/$key
    if [ -f "$cache" ]; then
        [ "$(cat "$cache")" = kvm ]; return
    fi
    info "probing whether KVM runs a guest on this host (once per host boot)"
    dir=$(mktemp -d "${TMPDIR:-/tmp}/hr-kvmprobe.XXXXXX")
    mkdir -p "$dir/r/bin" "$dir/r/dev" "$dir/r/proc"
    cp /bin/busybox "$dir/r/bin/busybox"
    ln -s busybox "$dir/r/bin/sh"
    mknod -m 600 "$dir/r/dev/console" c 5 1
    printf '#!/bin/sh\n/bin/busybox echo HR-KVM-PROBE-OK\n/bin/busybox poweroff -f\n' >"$dir/r/init"
    chmod 755 "$dir/r/init"
    (cd "$dir/r" && find . -mindepth 1 | cpio -o -H newc -R 0:0 --quiet | gzip -1) >"$dir/probe.cpio.gz"
    "$QEMU" "${COMMON[@]}" -accel kvm -cpu host -m 256 -serial "file:$dir/serial" \
        -kernel "$VMLINUZ" -initrd "$dir/probe.cpio.gz" \
        -append "console=ttyS0 panic=-1 quiet" >"$dir/qemu.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 150); do
        if grep -q HR-KVM-PROBE-OK "$dir/serial" 2>/dev/null; then rc=0; break; fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    grep -q HR-KVM-PROBE-OK "$dir/serial" 2>/dev/null && rc=0
    rm -rf "$dir"
    mkdir -p "$HUGEROOM_CACHE/accel"
    if [ "$rc" = 0 ]; then echo kvm >"$cache"; else echo tcg >"$cache"; fi
    info "KVM probe: $(cat "$cache")"
    return "$rc"
}

case $ACCEL in
    kvm) ACC=(-accel kvm -cpu host) ;;
    tcg) ACC=(-accel tcg) ;;
    auto) if kvm_works; then ACC=(-accel kvm -cpu host); else ACC=(-accel tcg); fi ;;
    *) die "-A must be auto, kvm or tcg" ;;
esac

if [ -n "$SSOCK" ]; then
    SERIAL=(-chardev "socket,id=ser0,path=$SSOCK,server=on,wait=off,logfile=$LOG,logappend=on" -serial chardev:ser0)
else
    SERIAL=(-chardev "file,id=ser0,path=$LOG,append=on" -serial chardev:ser0)
fi
QMPA=()
[ -n "$QMP" ] && QMPA=(-qmp "unix:$QMP,server=on,wait=off")

CMDLINE="console=ttyS0 panic=-1 loglevel=4${APPEND:+ $APPEND}"
ARGS=("${COMMON[@]}" "${ACC[@]}" -name "$NAME,debug-threads=on" -m "$MEM" -smp "$CPUS"
    -kernel "$VMLINUZ" -initrd "$INITRD" -append "$CMDLINE"
    "${SERIAL[@]}" "${QMPA[@]}" "${EXTRA[@]}")
printf '%q ' "$QEMU" "${ARGS[@]}" >"$LOG.cmd"; echo >>"$LOG.cmd"
info "booting $KVER ($NAME, ${ACC[1]}, $MEM) serial log $LOG"
setsid "$QEMU" "${ARGS[@]}" </dev/null >"$LOG.qemu" 2>&1 &
QPID=$!
echo "$QPID"
if [ -n "$WAIT" ]; then
    set +e
    wait "$QPID"
    rc=$?
    set -e
    if [ "$rc" != 0 ]; then
        warn "QEMU exited with $rc; its last output ($LOG.qemu):"
        tail -n 20 "$LOG.qemu" >&2
    fi
    exit "$rc"
fi
# Catch immediate failures (bad args, missing firmware) right here.
sleep 0.3
if ! kill -0 "$QPID" 2>/dev/null; then
    wait "$QPID" || true
    cat "$LOG.qemu" >&2
    die "QEMU exited at once; see $LOG.qemu, command in $LOG.cmd"
fi
