#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# `meson install` into a DESTDIR: every file lands where it belongs, the
# programs look for their configuration where it was installed, and the
# systemd units pass `systemd-analyze verify` (their man: links resolve to
# the installed man pages). TAP output.
#
# The paths come from meson (tests/install/meson.build). systemd-analyze
# checks that ExecStart's program exists, so it verifies a copy of each
# unit whose ExecStart points into the DESTDIR; that the installed unit
# names the installed program is checked apart.
set -uo pipefail

: "${HUGEROOM_BUILD:?}" "${HR_PREFIX:?}" "${HR_SBINDIR:?}" "${HR_BINDIR:?}"
: "${HR_SYSCONFDIR:?}" "${HR_MANDIR:?}" "${HR_UNITDIR:?}" "${HR_COMPLETIONSDIR:?}"

. "$(dirname "$0")/tap.sh"

echo "1..12"
dest=$(mktemp -d /tmp/hugeroom-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT

out=$(meson install -C "$HUGEROOM_BUILD" --destdir "$dest" --no-rebuild --quiet 2>&1)
ok $? "meson install --destdir" "$out"

missing=""
for f in "$HR_SBINDIR/hugeroomd" "$HR_BINDIR/hugeroomctl" "$HR_SBINDIR/hugeroom-hook"; do
    [ -x "$dest$f" ] || missing="$missing $f"
done
ok "$([ -z "$missing" ]; echo $?)" "the binaries are installed and executable" "missing:$missing"

missing=""
for f in "$HR_SYSCONFDIR/hugeroom/hugeroomd.conf" "$HR_SYSCONFDIR/hugeroom/hook.conf" \
    "$HR_UNITDIR/hugeroomd.service" "$HR_UNITDIR/hugeroomd.socket" \
    "$HR_MANDIR/man8/hugeroomd.8" "$HR_MANDIR/man8/hugeroomctl.8" \
    "$HR_MANDIR/man8/hugeroom-hook.8" "$HR_MANDIR/man5/hugeroomd.conf.5" \
    "$HR_COMPLETIONSDIR/hugeroomctl"; do
    [ -f "$dest$f" ] || missing="$missing $f"
done
ok "$([ -z "$missing" ]; echo $?)" "config, units, man pages and completion are installed" \
    "missing:$missing"

link=$(readlink "$dest/etc/libvirt/hooks/qemu.d/hugeroom")
ok "$([ "$link" = "$HR_SBINDIR/hugeroom-hook" ]; echo $?)" \
    "/etc/libvirt/hooks/qemu.d/hugeroom links to the installed hook" "it links to '$link'"

# the programs read their configuration where meson installed it
help=$("$dest$HR_SBINDIR/hugeroomd" --help 2>&1)
ok "$(grep -qF "(default $HR_SYSCONFDIR/hugeroom/hugeroomd.conf)" <<<"$help"; echo $?)" \
    "hugeroomd's default config is the installed hugeroomd.conf" "$help"
ok "$(grep -qaF "$HR_SYSCONFDIR/hugeroom/hook.conf" "$dest$HR_SBINDIR/hugeroom-hook"; echo $?)" \
    "the hook's default config is the installed hook.conf"

unit="$dest$HR_UNITDIR/hugeroomd.service"
ok "$(grep -qxF "ExecStart=$HR_SBINDIR/hugeroomd --config $HR_SYSCONFDIR/hugeroom/hugeroomd.conf" \
    "$unit"; echo $?)" "the unit starts the installed hugeroomd with the installed config" \
    "$(grep ExecStart "$unit")"
missing=""
for line in Type=notify WatchdogSec=30 StateDirectory=hugeroom RuntimeDirectory=hugeroom \
    LimitNOFILE=8192 ProtectSystem=strict Requires=hugeroomd.socket; do
    grep -qxF "$line" "$unit" || missing="$missing $line"
done
# /proc/sys/vm and /sys must stay writable: no option that makes them read-only
for bad in ProtectKernelTunables=yes ProtectProc=invisible ReadOnlyPaths=/sys; do
    grep -qxF "$bad" "$unit" && missing="$missing (has $bad)"
done
ok "$([ -z "$missing" ]; echo $?)" "the service is Type=notify with a watchdog, state and runtime directories, and leaves /sys and /proc/sys writable" "missing:$missing"

sock="$dest$HR_UNITDIR/hugeroomd.socket"
api=$(sed -n 's/^api_socket=//p' "$dest$HR_SYSCONFDIR/hugeroom/hugeroomd.conf")
ok "$(grep -qxF "ListenStream=$api" "$sock"; echo $?)" \
    "the socket unit listens on hugeroomd.conf's api_socket ($api)" "$(cat "$sock")"

verify=$(mktemp -d "$dest/verify-XXXXXX")
for u in hugeroomd.service hugeroomd.socket; do
    sed "s|^ExecStart=/|ExecStart=$dest/|" "$dest$HR_UNITDIR/$u" >"$verify/$u"
done
out=$(cd "$verify" && MANPATH="$dest$HR_MANDIR" systemd-analyze verify \
    ./hugeroomd.service ./hugeroomd.socket 2>&1)
rc=$?
# messages about other units on this machine are not ours to judge
ours=$(grep -i hugeroom <<<"$out")
ok "$([ $rc = 0 ] && [ -z "$ours" ]; echo $?)" \
    "systemd-analyze verify passes the installed units, man: links included" "exit $rc: $out"

# the check above must be able to fail: a unit with an unknown option does
sed 's/^WatchdogSec=30/WatchdogSecs=30/' "$verify/hugeroomd.service" >"$verify/broken.service"
out=$(cd "$verify" && MANPATH="$dest$HR_MANDIR" systemd-analyze verify ./broken.service 2>&1)
ok "$(grep -q "WatchdogSecs" <<<"$out"; echo $?)" \
    "systemd-analyze verify reports a unit's unknown option" "$out"

# the installed hugeroomctl finds the installed man page's commands
man_out=$(MANPATH="$dest$HR_MANDIR" man -P cat hugeroomctl 2>&1)
ok "$(grep -q "plan SIZE" <<<"$man_out"; echo $?)" "man hugeroomctl finds the installed page" \
    "$man_out"

[ "$failed" = 0 ]
