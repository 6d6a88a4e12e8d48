#!/usr/bin/python3
"""End to end: a guest's PCP policy from hugeroomd's config, API and CLI.

Boots a Debian guest kernel (series given as argv[1], "6.12" or "6.1")
under the patched QEMU with virtio-hugeroom connected to a real hugeroomd
whose config gives the guest `pcp=density`, and a second guest whose
device has the feature off (pcp=off).  Checks:
  * the config's policy reaches the guest when its driver comes up: the
    guest's vm.percpu_pagelist_high_fraction and /proc/zoneinfo, and
    `hugeroomctl --json guest` (pcp.wanted/applied, and the zones' own
    pcp.policy/fraction from the guest's status report);
  * `hugeroomctl pcp GUEST latency` and `explicit:HIGH` are applied, seen
    in the guest's zoneinfo (per-CPU high summed = the report's pcp.high)
    and in the status report;
  * bad input gets a clear error and changes nothing: an unknown policy, a
    high the guest's kernel cannot set, a batch, a guest without F_PCP;
  * the driver reloaded in the guest gets the last policy again.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "guest-driver", "tests"))
import hrvm  # noqa: E402
from pcp_test import parse_zoneinfo, h_of  # noqa: E402

SYSCTL = "/proc/sys/vm/percpu_pagelist_high_fraction"
INT_MAX = 2 ** 31 - 1


def api(sock, method, path, body):
    """One HTTP/1.1 request on the daemon's API socket: (status, JSON)."""
    status, answer = hrvm.http(sock, method, path, body)
    return status, json.loads(answer or b"null")


def ctl_fails(daemon, *args):
    try:
        daemon.ctl(*args)
    except hrvm.Failure as e:
        return str(e)
    return None


def main():
    series = sys.argv[1] if len(sys.argv) > 1 else "6.12"
    tap = hrvm.Tap()
    kver, _ = hrvm.pick_kernel(series)
    wd = hrvm.workdir("hr-pcp-vm-%s" % series)
    ko = hrvm.build_module(kver)
    initrd = hrvm.build_initramfs(kver, ko, wd)
    d = hrvm.Daemon(wd, interval_ms=500)
    name = "hr-pcp-%s" % series
    with open(d.conf, "a") as f:
        f.write("[guest:%s]\npcp=density\n" % name)
    d.start()
    g = hrvm.Guest(hrvm.qemu_binary(), kver, None, initrd, wd, daemon=d,
                   name=name)
    # the same device with the feature off, on the same daemon
    nopcp = hrvm.Guest(hrvm.qemu_binary(), kver, None, initrd, wd,
                       name=name + "-nopcp", hugeroom=False,
                       extra=["-chardev", "socket,id=hr1,path=%s,"
                              "reconnect-ms=1000" % d.vm_sock,
                              "-device", "virtio-hugeroom-pci,id=hr,"
                              "chardev=hr1,pcp=off"])
    try:
        g.start()
        nopcp.start()
        body(tap, d, g, nopcp, name)
    finally:
        g.stop()
        nopcp.stop()
        d.stop()
    return tap.done()


def fraction(g):
    return int(g.cmd("sh cat %s" % SYSCTL)[0])


def zones_match(g, f):
    """/proc/zoneinfo high per CPU as the kernel computes for fraction f."""
    zones = parse_zoneinfo(g.cmd("sh cat /proc/zoneinfo"))
    bad = [(n, c, p["high"]) for n, z in zones.items()
           for c, p in z["cpus"].items()
           if p["high"] != h_of(z, f, len(z["cpus"]), p["batch"])]
    return zones, bad


def pcp_view(d, name):
    return d.ctl_json("guest", name)["pcp"]


def report_policies(d, name, want):
    """Once the status report's zones all say @want: their pcp objects."""
    def got():
        st = d.ctl_json("guest", name).get("status") or {}
        zs = [z["pcp"] for z in st.get("zones", [])]
        return zs if zs and all(z["policy"] == want for z in zs) else None
    return hrvm.wait_for(got, 20, "the status report to say %s" % want)


def body(tap, d, g, nopcp, name):
    hrvm.wait_for(lambda: (pcp_view(d, name).get("applied") == "density"),
                  60, "the config's density to be applied")
    v = pcp_view(d, name)
    zs = report_policies(d, name, "density")
    tap.ok(v["wanted"] == "density" and v["supported"] and
           fraction(g) == INT_MAX and all(z["fraction"] == INT_MAX
                                          for z in zs),
           "[guest:%s] pcp=density applied when the driver came up (%s)" %
           (name, v))

    out = d.ctl("pcp", name, "latency")
    zones, bad = zones_match(g, 8)
    zs = report_policies(d, name, "latency")
    sums = sorted(sum(p["high"] for p in z["cpus"].values())
                  for z in zones.values())
    tap.ok("applied" in out and fraction(g) == 8 and not bad and
           sorted(z["high"] for z in zs) == sums,
           "hugeroomctl pcp %s latency: applied, fraction 8, zoneinfo per "
           "CPU is H(8), the report's pcp.high the per-CPU sum %s" %
           (name, sums), "%s %s %s" % (out, bad, zs))

    big = max(zones.values(), key=lambda z: z["managed"])
    want = 16 * big["cpus"][0]["batch"]
    out = d.ctl("pcp", name, "explicit:%d" % want)
    f = fraction(g)
    zones, bad = zones_match(g, f)
    got = max(zones.values(), key=lambda z: z["managed"])["cpus"][0]["high"]
    tap.ok("applied" in out and not bad and want <= got <= want * 1.02 and
           pcp_view(d, name)["applied"] == "explicit:%d" % want,
           "hugeroomctl pcp %s explicit:%d: the largest zone's high is %d "
           "(fraction %d)" % (name, want, got, f))

    # ---- bad input: clear errors, nothing changes ----
    errs = [ctl_fails(d, "pcp", name, "fast"),
            ctl_fails(d, "pcp", name, "explicit:1"),
            ctl_fails(d, "pcp", name, "explicit:%d" % (big["managed"]))]
    st, ans = api(d.api_sock, "PUT", "/v1/guests/%s/pcp" % name,
                  {"policy": "explicit", "high": want, "batch": 31})
    _, bad2 = zones_match(g, f)
    tap.ok(errs[0] and "unknown" in errs[0] and
           errs[1] and "refused" in errs[1] and
           errs[2] and "refused" in errs[2] and
           st == 400 and "batch" in ans["error"] and
           fraction(g) == f and not bad2 and
           pcp_view(d, name)["applied"] == "explicit:%d" % want,
           "unknown policy, highs the kernel cannot set, a batch: clear "
           "errors, the guest unchanged",
           "\n".join(str(e) for e in errs + [ans]))
    hrvm.log("errors: %s | %s" % (errs[1].splitlines()[-1] if errs[1] else
                                  None, ans.get("error")))

    hrvm.wait_for(lambda: (lambda e: e and e.get("connected"))(
        next((x for x in d.ctl_json("guests")["guests"]
              if x["name"] == name + "-nopcp"), None)), 30,
        "the second guest to connect")
    hrvm.wait_for(lambda: d.ctl_json("guest", name + "-nopcp")["device"] and
                  d.ctl_json("guest", name + "-nopcp")["device"]["driver_ok"],
                  60, "the second guest's driver")
    err = ctl_fails(d, "pcp", name + "-nopcp", "latency")
    tap.ok(err and "F_PCP" in err and fraction(nopcp) == 0,
           "a guest without F_PCP: refused with a clear error, untouched",
           str(err))

    # ---- the driver reloaded gets the policy again ----
    g.cmd("sh rmmod virtio_hugeroom")
    f_unloaded = fraction(g)
    g.cmd("sh insmod $(grep virtio_hugeroom /etc/hr-modules.load)")
    hrvm.wait_for(lambda: fraction(g) == f, 60,
                  "the daemon to send explicit:%d again" % want)
    tap.ok(f_unloaded == 0 and not zones_match(g, f)[1],
           "rmmod gives fraction 0 back; after insmod the daemon sends "
           "explicit:%d again (fraction %d)" % (want, f))


if __name__ == "__main__":
    sys.exit(main())
