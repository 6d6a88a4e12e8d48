#!/usr/bin/env bash
# The module users load carries no test aid; the test build carries them;
# and the driver picks kernel interfaces by feature tests, not versions:
#   tests/vm/driver-builds.sh 6.12|6.1
# Builds both variants of the driver for the given kernel series and looks
# for the debugfs names of the test aids (pin_unmovable, inject, fault_inject) in
# each .ko: none may be in the user build, all must be in the test build
# (else the tests would load a module without them and skip).
. "$(dirname "$0")/../../scripts/lib.sh"

series=${1:?series (6.12 or 6.1)}
kver=$(bash "$HR_SCRIPTS/fetch-kernels.sh" | awk -v s="$series" \
    'index($1, s ".") == 1 || index($1, s "-") == 1 { print $1; exit }')
[ -n "$kver" ] || die "no $series kernel in the cache"
user=$(bash "$HR_SCRIPTS/build-module.sh" "$kver" | tail -n1)
test=$(bash "$HR_SCRIPTS/build-module.sh" --test "$kver" | tail -n1)

aids=(pin_unmovable inject fault_inject)
echo "TAP version 13"
echo "1..$((2 * ${#aids[@]} + 1))"
n=1 rc=0
# Kernel interfaces by feature tests (guest-driver/Kbuild), which see what
# a distribution backported; a version number does not.
if grep -Hn 'LINUX_VERSION_CODE\|KERNEL_VERSION(' "$HR_REPO"/guest-driver/*.[ch] |
        grep -v '^[^:]*:[0-9]*: \*'; then
    echo "not ok $n - the driver tests no LINUX_VERSION_CODE"; rc=1
else
    echo "ok $n - the driver tests no LINUX_VERSION_CODE"
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
