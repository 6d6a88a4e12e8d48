# SPDX-License-Identifier: GPL-2.0-only
"""The hugeroom .deb's files for the tests that run what the package ships.

build_debs() builds the packages from this tree (tests/install/build-debs.sh,
cached by the tree's content) and returns their directory; extract() unpacks
hugeroom_*.deb into a directory; unit() reads a systemd unit as systemd does
(a key set twice: the last one counts).
"""

import configparser
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def build_debs():
    out = subprocess.run(["bash", os.path.join(HERE, "build-debs.sh")],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


def extract(debs, d):
    deb = [f for f in os.listdir(debs) if f.startswith("hugeroom_") and f.endswith(".deb")]
    assert len(deb) == 1, "one hugeroom_*.deb in %s: %s" % (debs, deb)
    root = os.path.join(d, "pkg")
    subprocess.run(["dpkg-deb", "-x", os.path.join(debs, deb[0]), root], check=True)
    return root


def unit(path):
    p = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",),
                                  comment_prefixes=("#", ";"))
    p.optionxform = str
    p.read(path)
    return p


def conf(path):
    """hugeroomd.conf (GKeyFile) as a ConfigParser, keys as written"""
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str
    cp.read(path)
    return cp
