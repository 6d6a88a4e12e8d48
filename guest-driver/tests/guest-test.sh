#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# In-guest test of virtio_hugeroom (kselftest-style TAP, busybox sh).
# Run as /test.sh inside a guest booted by scripts/build-initramfs.sh with
# virtio_hugeroom.ko already loaded.  The guest kernel command line selects
# the mode:
#   hr.device=1   a virtio-hugeroom-pci device is present: probe, reports,
#                 report_now against /proc/buddyinfo, injections, rmmod.
#   (otherwise)   no device: the module loads, binds nothing, unloads.
#   hr.hold=N     sleep N seconds first (see tests/fake-daemon.py).
# Exits non-zero if any test failed.

DBG=/sys/kernel/debug/virtio_hugeroom
DRV=/sys/bus/virtio/drivers/virtio_hugeroom
n=0
failed=0

ok() {
	n=$((n + 1))
	echo "ok $n - $1"
}

not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $1"
}

check() {
	desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}

field() {
	awk -v k="$1" '$1 == k { print $2; exit }' "$DBG/status"
}

# Compare the report's per-order counts with /proc/buddyinfo, zone by zone.
# Counts move between the two reads, so allow a small difference.
buddyinfo_matches() {
	awk '
	FNR == NR {
		if ($1 == "zone" && $5 == "nr_free") {
			key = $2 " " $4
			for (i = 0; i < 11; i++)
				rep[key, i] = $(6 + i)
			zones[key] = 1
		}
		next
	}
	/^Node/ {
		sub(",", "", $2)
		key = $2 " " $4
		if (!(key in zones)) {
			print "# zone " key " missing from the report"
			bad = 1
			next
		}
		seen[key] = 1
		for (i = 0; i < 11; i++) {
			a = rep[key, i]; b = $(5 + i)
			d = a > b ? a - b : b - a
			tol = (a > b ? a : b) / 10
			if (tol < 16)
				tol = 16
			if (d > tol) {
				print "# zone " key " order " i ": report " a " buddyinfo " b
				bad = 1
			}
		}
	}
	END {
		for (k in zones)
			if (!(k in seen)) {
				print "# zone " k " not in /proc/buddyinfo"
				bad = 1
			}
		exit bad
	}' "$DBG/status" /proc/buddyinfo
}

dmesg_clean() {
	! dmesg | grep -E 'BUG:|WARNING:|Oops|general protection|refcount_t|list_(add|del) corruption|virtio_hugeroom virtio[0-9]+: .*(failed|refused)' |
		grep -v 'injected'
}

# hr.hold=N keeps the guest (and the driver) up N seconds first, for a
# host-side test that drives cmdq (tests/fake-daemon.py).
hold=$(sed -n 's/.*hr\.hold=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$hold" ] && sleep "$hold"

echo "TAP version 13"

if ! grep -q 'hr.device=1' /proc/cmdline; then
	echo "1..3"
	check "module loaded" grep -q '^virtio_hugeroom ' /proc/modules
	check "no device, no debugfs directory" test ! -e "$DBG"
	check "rmmod" rmmod virtio_hugeroom
	[ "$failed" = 0 ]
	exit
fi

echo "1..19"
check "module loaded" grep -q '^virtio_hugeroom ' /proc/modules
check "device bound" sh -c "ls $DRV | grep -q virtio"
check "debugfs status exists" test -r "$DBG/status"

# The first report is sent from a work item right after probe.
i=0
while [ $i -lt 20 ] && [ -z "$(field seq)" ]; do
	sleep 0.5
	i=$((i + 1))
done
seq1=$(field seq)
check "first report sent after probe (seq $seq1)" test "${seq1:-0}" -ge 1

i=0
good=1
while [ $i -lt 5 ]; do
	echo 1 >"$DBG/report_now" || good=0
	i=$((i + 1))
done
seq2=$(field seq)
check "report_now works repeatedly (seq $seq1 -> $seq2)" \
	test "$good" = 1 -a "${seq2:-0}" -ge $((seq1 + 5))

echo 1 >"$DBG/report_now"
check "per-order counts match /proc/buddyinfo" buddyinfo_matches

bytes=$(field report_bytes)
zones=$(field nr_zones)
cands=$(field nr_candidates)
check "report size is exact ($bytes = 208 + 256 * $zones + 16 * $cands)" \
	test "$bytes" = $((208 + 256 * zones + 16 * cands))
check "build time reported ($(field build_ns) ns)" test "$(field build_ns)" -gt 0
check "vmstat by name" grep -q '^compact_stall [0-9]' "$DBG/status"
check "memory totals" test "$(field mem_total_pages)" -gt 0

before=$(field reports_sent)
for what in bad_len bad_type unaligned_candidate too_many_zones \
	    bad_zone_name truncated; do
	echo "$what" >"$DBG/inject" || echo "# inject $what: write failed"
done
check "unknown injection is refused" sh -c "! echo nonsense >$DBG/inject"
echo 1 >"$DBG/report_now"
after=$(field reports_sent)
check "reports still flow after injections ($before -> $after)" \
	test "$after" -gt "$before"
check "no errors counted" test "$(field report_errors)" = 0

check "nothing held without a host command" \
	test "$(field held_blocks_driver)" = 0 -a -z "$(cat $DBG/held)"
echo 8 >"$DBG/pin_unmovable"
pins=$(grep -c '^0x' "$DBG/pin_unmovable")
echo 0 >"$DBG/pin_unmovable"
check "pin_unmovable pins 8 pages and lets them go ($pins)" \
	test "$pins" = 8 -a -z "$(cat $DBG/pin_unmovable)"
check "pin_unmovable refuses nonsense" \
	sh -c "! echo nonsense >$DBG/pin_unmovable"

grep -v '^candidate' "$DBG/status" | sed 's/^/# /'
grep '^candidate' "$DBG/status" | head -5 | sed 's/^/# /'
check "dmesg clean before rmmod" dmesg_clean
check "rmmod" rmmod virtio_hugeroom
check "debugfs gone after rmmod" test ! -e "$DBG"
dmesg | grep virtio_hugeroom | sed 's/^/# /'
[ "$failed" = 0 ]
