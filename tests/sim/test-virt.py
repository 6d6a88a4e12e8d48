#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomd looks up each connected guest's libvirt domain for its policy.

The real daemon binary and simulated guests, with libvirt_uri naming
libvirt's own test driver (test:///FILE, in-process, part of libvirt0):
the file defines a domain per simulated guest, with the guest's UUID and a
<hugeroom:policy> in its <metadata>. Once the daemon has looked them up, a
plan that needs guest donations asks only the domains whose policy lets
it (donor no: never; floor: kept free), where without the lookups it asks
every guest. A domain whose policy does not parse is logged by name and
nothing of it applied; a guest with no domain is left as it is. TAP output.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vm"))
from hrvm import Tap  # noqa: E402
from simharness import SimSetup  # noqa: E402

tap = Tap()
check = tap.ok

GUESTS = 4
SEED = 7
NS = "https://hugeroom.org/xmlns/1"
POLICIES = {
    "sim0": "<hugeroom:donor>no</hugeroom:donor>",
    # a floor above all it has: it may give nothing
    "sim1": "<hugeroom:floor unit='GiB'>64</hugeroom:floor>",
    "sim2": "<hugeroom:floor unit='parsec'>1</hugeroom:floor>",
}



def donors(s, extra_blocks=4000):
    free = s.api("GET", "/v1/host")["nodes"][0]["available_blocks"]
    plan = s.api("POST", "/v1/plan", {"bytes": (free + extra_blocks) << 21, "node": 0})
    return sorted({st["guest"] for st in plan["plan"]["steps"] if st["kind"] == "donate"}), plan


def write_node(path, guests):
    """libvirt's test driver: a host with one domain per guest but the last."""
    doms = []
    for g in guests[:-1]:
        policy = POLICIES.get(g["name"])
        meta = ("<metadata><hugeroom:policy xmlns:hugeroom='%s'>%s</hugeroom:policy>"
                "</metadata>" % (NS, policy)) if policy else ""
        doms.append("<domain type='test'><name>%s</name><uuid>%s</uuid>"
                    "<memory unit='GiB'>4</memory><os><type>hvm</type></os>%s</domain>"
                    % (g["name"], g["uuid"], meta))
    with open(path, "w") as f:
        f.write("<node>\n%s\n</node>\n" % "\n".join(doms))


def wait_log(s, needles, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = s.daemon_log()
        if all(n in text for n in needles):
            return True
        time.sleep(0.1)
    return False


def main():
    # without lookups: every guest can donate; learn the simulated guests' UUIDs
    s = SimSetup(extra_config="host_backing=thp")
    try:
        s.start_guests(GUESTS, 4, prefix="sim", seed=SEED)
        guests = sorted(s.wait_statuses(GUESTS), key=lambda g: g["name"])
        before, plan = donors(s)
        check(before == ["sim%d" % i for i in range(GUESTS)],
              "without domain lookups the plan asks every guest: %s" % before, plan)
    finally:
        s.close()

    node = os.path.join(s.dir + "-node.xml")
    write_node(node, guests)
    s = SimSetup(extra_config="host_backing=thp", libvirt_uri="test://" + node)
    try:
        s.start_guests(GUESTS, 4, prefix="sim", seed=SEED)
        got = sorted(s.wait_statuses(GUESTS), key=lambda g: g["name"])
        check([g["uuid"] for g in got] == [g["uuid"] for g in guests],
              "the same seed gives the guests the same UUIDs")
        applied = wait_log(s, ["sim0: libvirt domain sim0 (%s): policy donor=no floor=unset "
                               "applied" % guests[0]["uuid"],
                               "sim1: libvirt domain sim1 (%s): policy donor=unset "
                               "floor=65536 MiB applied" % guests[1]["uuid"]])
        check(applied, "the daemon applies the policies of sim0 and sim1's domains",
              s.daemon_log())
        check(wait_log(s, ["sim2: libvirt domain sim2: <hugeroom:policy><hugeroom:floor>: unit 'parsec'", "its policy is not "
                           "applied"]),
              "sim2's bad floor is logged with the domain, nothing applied", s.daemon_log())
        after, plan = donors(s)
        check(after == ["sim2", "sim3"],
              "with the lookups the plan asks only sim2 and sim3 (no domain): %s" % after,
              plan)
    finally:
        s.close()
        os.unlink(node)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
