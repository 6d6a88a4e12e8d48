#!/usr/bin/env bash
# The module users load carries no test aid; the test build carries them;
# and the driver picks kernel interfaces by feature tests, not versions:
#   tests/vm/driver-builds.sh 6.12|6.1|sid
# Builds both variants of the driver for the given kernel series and looks
# for the debugfs names of the test aids (pin_unmovable, inject, fault_inject,
# contig, claimed_blocks) in
# each .ko: none may be in the user build, all must be in the test build
# (else the tests would load a module without them and skip).
. "$(dirname "$0")/../../scripts/lib.sh"

series=${1:?series (6.12, 6.1 or sid)}
kver=$(hr_series_kver "$series")
user=$(bash "$HR_SCRIPTS/build-module.sh" "$kver" | tail -n1)
test=$(bash "$HR_SCRIPTS/build-module.sh" --test "$kver" | tail -n1)

aids=(pin_unmovable inject fault_inject contig claimed_blocks)
echo "TAP version 13"
echo "1..$((2 * ${#aids[@]} + 3))"
n=1 rc=0
# Built against that release's own headers (and, for sid, by its gcc in
# the sid root: scripts/build-module.sh fails on any W=1 warning).
vm=$(modinfo -F vermagic "$test")
if [ "${vm%% *}" = "$kver" ]; then
    echo "ok $n - the build is for $kver (vermagic $vm)"
else
    echo "not ok $n - the build is for $kver (vermagic $vm)"; rc=1
fi
echo "# $(readelf -p .comment "$test" 2>/dev/null | grep -o 'GCC: .*' | sort -u | head -1)"
echo "# features: $(grep -oh 'VIRTIO_HUGEROOM_HAVE_[A-Z_]*' "$(dirname "$test")"/.*.o.cmd |
    sort -u | sed 's/VIRTIO_HUGEROOM_HAVE_//' | tr '\n' ' ')"
n=$((n + 1))
# Kernel interfaces by feature tests (guest-driver/Kbuild), which see what
# a distribution backported; a version number does not.
if grep -Hn 'LINUX_VERSION_CODE\|KERNEL_VERSION(' "$HR_REPO"/guest-driver/*.[ch] |
        grep -v '^[^:]*:[0-9]*: \*'; then
    echo "not ok $n - the driver tests no LINUX_VERSION_CODE"; rc=1
else
    echo "ok $n - the driver tests no LINUX_VERSION_CODE"
fi
n=$((n + 1))
# alloc_contig_range()'s third argument is a migratetype or acr_flags_t
# (MIGRATE_MOVABLE, 1, is ACR_FLAGS_CMA), which the compiler does not
# tell apart: one wrapper in hr_compat.h picks it by the feature test.
if grep -Hn 'alloc_contig_range(' "$HR_REPO"/guest-driver/*.c |
        grep -v '^[^:]*:[0-9]*:[[:space:]]*\*\|/\*\|()'; then
    echo "not ok $n - alloc_contig_range() is called through hr_compat.h only"; rc=1
else
    echo "ok $n - alloc_contig_range() is called through hr_compat.h only"
fi
for aid in "${aids[@]}"; do
    n=$((n + 1))
    if grep -qaw -- "$aid" "$user"; then
        echo "not ok $n - user build of $kver has no debugfs \"$aid\""; rc=1
    else
        echo "ok $n - user build of $kver has no debugfs \"$aid\""
    fi
    n=$((n + 1))
    if grep -qaw -- "$aid" "$test"; then
        echo "ok $n - test build of $kver has debugfs \"$aid\""
    else
        echo "not ok $n - test build of $kver has debugfs \"$aid\""; rc=1
    fi
done
exit $rc
