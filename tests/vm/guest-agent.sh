#!/bin/sh
# Guest side of the VM tests: runs as /test.sh in the busybox initramfs.
# Reads "<n> <command> [args]" lines from the serial console and answers
#   @@BEGIN <n>
#   ...output...
#   @@END <n> <exit status>
# The snapshot command reads /proc with shell builtins only (no fork), so
# taking it disturbs the free lists as little as possible.

exec </dev/ttyS0 >/dev/ttyS0 2>&1
stty -echo 2>/dev/null
D=/sys/kernel/debug/virtio_hugeroom

dump() {
	while IFS= read -r line; do
		echo "$2$line"
	done <"$1"
}

vmstat() {
	while read -r k v; do
		case $k in
		compact_* | pgmigrate_* | thp_*) echo "$1 $k $v" ;;
		esac
	done </proc/vmstat
}

snapshot() {
	dump /proc/buddyinfo "before "
	vmstat vmbefore
	echo 1 >"$D/report_now" || return 1
	dump /proc/buddyinfo "after "
	vmstat vmafter
	dump "$D/status" "status "
}

echo "@@READY $(uname -r)"
while read -r n cmd args; do
	[ -n "$n" ] || continue
	echo "@@BEGIN $n"
	rc=0
	case $cmd in
	snapshot) snapshot || rc=$? ;;
	inject) echo "$args" >"$D/inject" || rc=$? ;;
	status) dump "$D/status" "" || rc=$? ;;
	sh) eval "$args" || rc=$? ;;
	poweroff)
		echo "@@END $n 0"
		poweroff -f
		;;
	*)
		echo "unknown command: $cmd"
		rc=127
		;;
	esac
	echo "@@END $n $rc"
done
