# shellcheck shell=bash
# What tests/qemu/checkpatch.sh, qtest.sh and series-steps.sh share.
# Source it after scripts/lib.sh.

# qemu_checkpatch SRC PATCH: QEMU's scripts/checkpatch.pl (of the tree SRC)
# on PATCH; prints its complaints and fails if it has any.  Patch 0001
# imports a standard header: checkpatch asks for update-linux-headers.sh and
# a MAINTAINERS entry there, nothing else.
qemu_checkpatch() {
    local src=$1 patch=$2 out errors warnings
    [ -f "$src/scripts/checkpatch.pl" ] ||
        die "QEMU's checkpatch.pl not found in $src/scripts (run scripts/build-qemu.sh)"
    out=$(cd "$src" && perl scripts/checkpatch.pl --no-signoff -q "$patch" 2>&1) || true
    errors=$(printf '%s\n' "$out" | grep -c '^ERROR' || true)
    warnings=$(printf '%s\n' "$out" | grep '^WARNING' |
        grep -v -e 'added, moved or deleted file(s), does MAINTAINERS need updating' \
                -e 'update-linux-headers.sh' | grep -c . || true)
    [ "$errors" = 0 ] && [ "$warnings" = 0 ] && return 0
    printf '%s:\n%s\n' "$(basename "$patch")" "$out"
    return 1
}

# hugeroom_qtests QEMU QOS_TEST EXPECTED: run the virtio-hugeroom qos tests
# with QOS_TEST against QEMU, print their TAP output, and fail unless
# exactly EXPECTED ran and every one passed.  qos-test passes vacuously
# when a path matches nothing, and a skipped test prints "ok ... # SKIP":
# both are failures here.
hugeroom_qtests() {
    local qemu=$1 qos=$2 expected=$3 out n rc=0
    local p=/x86_64/pc/i440FX-pcihost/pci-bus-pc/pci-bus/virtio-hugeroom-pci
    [ -x "$qos" ] || { warn "$qos missing: the qtests were not built"; return 1; }
    # Debian firmware (incl. ipxe-qemu ROMs for the e1000 the qos pc machine
    # has) is on the binary's --firmwarepath, so QTEST_QEMU_BINARY is the
    # plain binary: qtest reads the target from its name.
    out=$(QTEST_QEMU_BINARY=$qemu "$qos" --tap \
        -p "$p/virtio-hugeroom/virtio-hugeroom-tests" \
        -p "$p/virtio-hugeroom-pci-tests" 2>&1) || rc=1
    printf '%s\n' "$out"
    [ "$rc" = 0 ] || { warn "qos-test failed"; return 1; }
    n=$(printf '%s\n' "$out" | grep -c '^ok ' || true)
    [ "$n" -eq "$expected" ] ||
        { warn "$n virtio-hugeroom qtests ran, expected exactly $expected"; return 1; }
    ! printf '%s\n' "$out" | grep -q '^not ok' || { warn "a qtest failed"; return 1; }
    ! printf '%s\n' "$out" | grep -qi '^ok .*# *skip' ||
        { warn "a qtest was skipped, which is no pass"; return 1; }
}
