#!/usr/bin/env bash
# promtool, Prometheus' metrics checker, for the API test of /metrics
# (tests/api/test-api.py), unpacked from Debian's prometheus package into
# the cache: installing the package would also install and, on a systemd
# host, start a Prometheus server, which no host admin asked for.
# Prints the path of promtool as the last line of stdout.
. "$(dirname "$0")/lib.sh"

dir=$HUGEROOM_CACHE/tools/prometheus
bin=$dir/root/usr/bin/promtool
if [ -x "$bin" ] && [ -f "$dir/.done" ]; then
    echo "$bin"
    exit 0
fi
need_root
mkdir -p "$dir/debs"
deb=$(ls "$dir/debs/prometheus_"*.deb 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$deb" ]; then
    info "downloading prometheus (for promtool only)"
    chown _apt:root "$dir/debs" 2>/dev/null || true
    (cd "$dir/debs" && apt_get download prometheus >&2) ||
        die "apt-get download prometheus failed; run 'apt-get update' and rerun"
    deb=$(ls "$dir/debs/prometheus_"*.deb | sort -V | tail -1)
fi
rm -rf "$dir/root"
dpkg-deb -x "$deb" "$dir/root"
[ -x "$bin" ] || die "$(basename "$deb") has no usr/bin/promtool"
"$bin" --version >/dev/null 2>&1 || die "$bin does not run"
touch "$dir/.done"
echo "$bin"
