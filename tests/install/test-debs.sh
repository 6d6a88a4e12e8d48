#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# The Debian packages, as an admin meets them, and as piuparts checks them:
#   * built from this tree with dpkg-buildpackage (tests/install/build-debs.sh,
#     cached by the tree's content) and lintian clean: no error, no warning
#     (debian/*.lintian-overrides say why for each tag they silence);
#   * installed with apt into an overlay of the cached clean bookworm root
#     (tests/install/pkg-root.sh: the packages' dependencies and the headers
#     of the suite's 6.1 and 6.12 kernels already there, so no download),
#     then removed, purged, installed again and purged again.  After each
#     step the root is compared with the clean one (tests/install/rootdiff.py:
#     type, mode, owner and SHA-256 of every path the overlay touched):
#     installed, nothing changed outside the packages' own files but what
#     the install is for (its group, dpkg's and DKMS's records, the units'
#     enable links, the modules DKMS built); removed, only the conffiles
#     stay; purged, nothing stays.  DKMS built virtio_hugeroom for each
#     kernel whose headers are there.
# Needs root (chroot, overlayfs).  A few minutes: the build (about a minute)
# and four DKMS builds.  TAP.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../scripts/lib.sh"
. "$HERE/tap.sh"
set +e
need_root

# The overlay needs a mount namespace of its own: nothing stays mounted
# however the test ends.
if [ -z "${HR_DEBS_NS:-}" ]; then
    exec unshare --mount --propagation private -- env HR_DEBS_NS=1 bash "$0" "$@"
fi

# What a package's install may change outside its own files, and why:
# dpkg's and apt's records and logs; the group postinst adds (and purge
# deletes: the group files are compared after the purge like any other);
# shadow's backups of them; the enable links and state of
# deb-systemd-helper (postinst enables hugeroomd.socket and
# hugeroomd.service; purge removes them); DKMS's tree and the modules it
# installs, with depmod's indexes of them; ldconfig's cache.
RECORDS=(
    --ignore '/var/lib/dpkg(/.*)?' --ignore '/var/log(/.*)?'
    --ignore '/var/cache/(debconf|ldconfig|apt)(/.*)?' --ignore '/var/lib/apt(/.*)?'
    --ignore '/etc/(group|gshadow|passwd|shadow)-'
    --ignore '/etc/ld.so.cache'
    --ignore '/tmp(/.*)?'
)
INSTALLED=(
    --ignore '/etc/(group|gshadow)'
    --ignore '/etc/systemd/system/(sockets|multi-user)\.target\.wants(/hugeroomd\.(socket|service))?'
    --ignore '/var/lib/systemd(/deb-systemd-helper-enabled(/.*)?)?'
    --ignore '/var/lib/dkms(/.*)?'
    --ignore '(/usr)?/lib/modules/[^/]+/updates(/dkms(/virtio_hugeroom\.ko(\.[a-z]+)?)?)?'
    --ignore '(/usr)?/lib/modules/[^/]+/modules\.[a-z.]+'
)
# What stays after a remove, besides the conffiles: the units' enable
# state (deb-systemd-helper keeps it until the purge, so that a reinstall
# keeps the admin's choice) and the group (postrm deletes it on purge).
REMOVED=(
    --ignore '/etc/(group|gshadow)'
    --ignore '/etc/hugeroom(/(hugeroomd|hook)\.conf)?'
    --ignore '/etc/systemd/system/(sockets|multi-user)\.target\.wants(/hugeroomd\.(socket|service))?'
    --ignore '/var/lib/systemd(/deb-systemd-helper-enabled(/.*)?)?'
)

work=''
trap '[ -z "$work" ] || { umount -l "$work/merged" 2>/dev/null; rm -rf "$work"; }' EXIT

# rootdiff ARGS...: the changes against the clean root; a failure of the
# comparison itself is a change too
rootdiff() {
    python3 "$HERE/rootdiff.py" "$root" "$work/upper" "$m" "$@" 2>&1 ||
        echo "rootdiff.py failed (exit $?)"
}

main() {
    local debs t0=$SECONDS lint
    debs=$(bash "$HERE/build-debs.sh" | tail -n1) || { ok 1 "build the packages"; return; }
    ok 0 "dpkg-buildpackage builds hugeroom and hugeroom-dkms from the tree ($debs)"
    lint=$(grep -E '^(E|W): ' "$debs/lintian.txt")
    ok "$( [ -z "$lint" ] && grep -qx 'lintian exit 0' "$debs/lintian.txt"; echo $?)" \
        "lintian: no errors, no warnings" "$lint"
    root=$(bash "$HERE/pkg-root.sh" 2>/dev/null | tail -n1) || { ok 1 "the clean bookworm root"; return; }
    work=$(mktemp -d "${TMPDIR:-/tmp}/hr-debs.XXXXXX")
    mkdir "$work/upper" "$work/ovl" "$work/merged"
    mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/ovl" \
        "$work/merged" || { ok 1 "overlay of $root"; return; }
    m=$work/merged
    mkdir -p "$m/tmp/hr-debs"
    cp "$debs"/hugeroom_*.deb "$debs"/hugeroom-dkms_*.deb "$m/tmp/hr-debs/"
    local kvers kver
    kvers=$(ls "$m/usr/src" | sed -n 's/^linux-headers-\(.*-amd64\)$/\1/p' | sort)
    ok "$([ "$(echo $kvers | wc -w)" -ge 2 ]; echo $?)" "the root has the headers of the suite's kernels: $(echo $kvers)"

    local out files_first rc
    for round in 1 2; do
        out=$(hr_in_root "$m" sh -c 'apt-get install -y /tmp/hr-debs/*.deb' 2>&1)
        rc=$?
        ok "$([ $rc = 0 ] && ! printf '%s\n' "$out" | grep -Eq '^Get:[0-9]+ [a-z+]+://'; echo $?)" \
            "round $round: apt-get install of both packages (nothing downloaded; exit $rc)" "$(printf "%s\n" "$out" | grep -E "^(Get|E):")"
        out=$(hr_in_root "$m" sh -c 'getent group hugeroom && hugeroomctl --version &&
            hugeroomd --help >/dev/null && dpkg-query -W -f="\${Conffiles}\n" hugeroom' 2>&1)
        ok "$(printf '%s\n' "$out" | grep -q '^hugeroom:x:' &&
              printf '%s\n' "$out" | grep -q ' /etc/hugeroom/hugeroomd.conf ' &&
              printf '%s\n' "$out" | grep -q ' /etc/hugeroom/hook.conf '; echo $?)" \
            "round $round: the group hugeroom, the programs run, both .conf files are conffiles" "$out"
        # where libvirt's AppArmor profiles let libvirtd and virtqemud run it
        # (host/HOOK.md): qemu.d/ links to sbindir
        out=$(readlink "$m/etc/libvirt/hooks/qemu.d/hugeroom")
        ok "$([ "$out" = /usr/sbin/hugeroom-hook ] && [ -x "$m/usr/sbin/hugeroom-hook" ]; echo $?)" \
            "round $round: /etc/libvirt/hooks/qemu.d/hugeroom links to /usr/sbin/hugeroom-hook ($out)"
        for kver in $kvers; do
            out=$(hr_in_root "$m" dkms status -k "$kver" 2>&1)
            ok "$(printf '%s\n' "$out" | grep -q "^hugeroom/.*, $kver, x86_64: installed" &&
                  ls "$m/lib/modules/$kver/updates/dkms/virtio_hugeroom.ko"* >/dev/null; echo $?)" \
                "round $round: DKMS built and installed virtio_hugeroom for $kver" "$out"
        done
        # installed: outside the packages' files only what the install is for
        local diff
        hr_in_root "$m" dpkg-query -L hugeroom hugeroom-dkms >"$work/own" ||
            echo "/dpkg-query -L failed" >"$work/own"
        diff=$(rootdiff "${RECORDS[@]}" "${INSTALLED[@]}" --ignore-listed "$work/own")
        ok "$([ -z "$diff" ]; echo $?)" \
            "round $round: installed, nothing outside the packages' files changed" "$diff"
        files=$(hr_in_root "$m" dpkg-query -L hugeroom hugeroom-dkms | sort)
        if [ "$round" = 1 ]; then
            files_first=$files
        else
            ok "$([ "$files" = "$files_first" ]; echo $?)" "round 2 installs the same files as round 1"
        fi
        # removed: the conffiles stay, and nothing else of the packages
        out=$(hr_in_root "$m" apt-get remove -y hugeroom hugeroom-dkms 2>&1)
        ok $? "round $round: apt-get remove" "$out"
        diff=$(rootdiff "${RECORDS[@]}" "${REMOVED[@]}")
        ok "$([ -z "$diff" ] && [ -f "$m/etc/hugeroom/hugeroomd.conf" ]; echo $?)" \
            "round $round: removed, only the conffiles and the group stay" "$diff"
        # hugeroom-dkms has no conffiles: removed, it is gone, and apt no
        # longer knows it
        out=$(hr_in_root "$m" sh -c 'apt-get purge -y $(dpkg-query -W \
            -f="\${db:Status-Abbrev} \${Package}\n" hugeroom hugeroom-dkms |
            awk "\$1 != \"un\" { print \$2 }")' 2>&1)
        ok $? "round $round: apt-get purge" "$out"
        diff=$(rootdiff "${RECORDS[@]}")
        ok "$([ -z "$diff" ]; echo $?)" "round $round: purged, the root is as clean as before" "$diff"
    done
    echo "# $((SECONDS - t0)) s"
}

main
echo "1..$n"
[ "$failed" = 0 ]
