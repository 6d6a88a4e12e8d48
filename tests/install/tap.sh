# SPDX-License-Identifier: GPL-2.0-only
# TAP for the shell tests here: ok STATUS NAME [DIAGNOSTIC]; STATUS 0 passes.
n=0
failed=0
ok() {
    n=$((n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        failed=$((failed + 1))
        [ -n "${3:-}" ] && printf '%s\n' "$3" | tail -30 | sed 's/^/#   /'
    fi
}
