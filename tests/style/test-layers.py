#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The host's layers (ARCHITECTURE.md): a file may include a header of its
own layer or of one its layer may call, never one above. Reads every
#include "..." of host/*/ and the source lists of host/meson.build; fails
on an upward include, on a header of the tree that no layer owns, on a
circle of includes between files, on a circle of .c files that call each
other's functions (through a shared private header the includes do not
show it), on a source of host/ that
host/meson.build does not build, and on a layer's meson library
(hr_LAYER_lib, hr_LAYER_dep) that builds another folder's sources or
depends on a layer above.  TAP.

  tests/style/test-layers.py [SOURCE_ROOT]
"""

import os
import re
import sys

# What each layer may call, besides itself and protocol/ (the wire codec).
MAY_CALL = {
    "base": [],
    "memory": ["base"],
    "planner": ["memory", "base"],
    "guests": ["base"],
    "reservations": ["planner", "memory", "guests", "base"],
    "api": ["reservations", "planner", "memory", "guests", "base"],
    "daemon": ["api", "reservations", "planner", "memory", "guests", "base"],
    # the CLI and the hook talk to the daemon over its API only
    "clients": ["base"],
}
# headers that are no file of a layer: the wire codec, the generated paths
OUTSIDE = {"hr-codec.h": "protocol", "virtio_hugeroom.h": "protocol", "hr-paths.h": "base",
           "hr-openapi.h": "api"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
PRIVATE = re.compile(r"-private$")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
# a function's definition as the host code writes it: the type on its own
# line, the name at the start of the next
DEFINITION = re.compile(r"^([^\n#]*)\n([a-z_][a-z0-9_]*)\(", re.M)
CALL = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\(")


def meson_blocks(meson):
    """NAME = static_library(...) and NAME = declare_dependency(...) of a
    meson file: {(NAME, function): the text inside the parentheses}"""
    blocks = {}
    for m in re.finditer(r"^(\w+) = (static_library|declare_dependency)\(", meson, re.M):
        depth, i = 1, m.end()
        while depth > 0 and i < len(meson):
            depth += {"(": 1, ")": -1}.get(meson[i], 0)
            i += 1
        blocks[(m.group(1), m.group(2))] = meson[m.end():i - 1]
    return blocks


def rings(edges):
    """the circles of the graph @edges (node -> its successors), each as
    the list of its nodes with the first repeated at the end, found by one
    depth-first walk in sorted order"""
    found, state = [], {}

    def visit(u, path):
        state[u] = 1
        path.append(u)
        for v in sorted(edges.get(u, ())):
            if state.get(v) == 1:
                found.append(path[path.index(v):] + [v])
            elif v not in state:
                visit(v, path)
        path.pop()
        state[u] = 2

    for u in sorted(edges):
        if u not in state:
            visit(u, [])
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    host = os.path.join(root, "host")
    layer_of = dict(OUTSIDE)
    files = []
    for layer in sorted(MAY_CALL):
        d = os.path.join(host, layer)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                layer_of.setdefault(name, layer)
                files.append((layer, name))
    stray = [n for n in os.listdir(host) if n.endswith((".c", ".h"))]
    for d in os.listdir(host):
        if os.path.isdir(os.path.join(host, d)) and d not in MAY_CALL and d != "doc":
            stray.append(d + "/")

    tests = []

    def check(name, problems):
        tests.append((name, problems))

    check("every host source is in a layer's folder",
          ["host/%s is in no layer (%s)" % (n, ", ".join(sorted(MAY_CALL))) for n in stray])

    upward, unknown, edges = [], [], {}
    for layer, name in files:
        with open(os.path.join(host, layer, name), encoding="utf-8") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            target = layer_of.get(os.path.basename(inc))
            if target is None:
                unknown.append("host/%s/%s includes \"%s\", a header no layer owns" %
                               (layer, name, inc))
                continue
            if target in ("protocol",) or target == layer:
                pass
            elif target not in MAY_CALL[layer]:
                upward.append("host/%s/%s includes \"%s\" of %s/: %s/ may call only %s" %
                              (layer, name, inc, target, layer,
                               ", ".join(MAY_CALL[layer]) or "itself"))
            # a unit's private header (hr-prepare-private.h, shared by the
            # files its .c is split into) is the unit's own
            unit = PRIVATE.sub("", os.path.splitext(name)[0])
            dest = PRIVATE.sub("", os.path.splitext(os.path.basename(inc))[0])
            if dest != unit and target != "protocol":
                edges.setdefault(unit, set()).add(dest)
    check("no include crosses a layer upward", upward)
    check("every included header belongs to a layer", unknown)

    # a circle of units (a .c with its .h) that include each other
    circles = [" -> ".join(ring) for ring in rings(edges)]
    check("no circle of files that include each other", circles)

    # a circle of .c files that call each other: file A calls a function
    # defined (not static) in file B, and B, maybe through others, one of A's
    defined, texts = {}, {}
    for layer, name in files:
        if not name.endswith(".c"):
            continue
        path = "host/%s/%s" % (layer, name)
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = COMMENT.sub(" ", f.read())
        texts[path] = STRING.sub('""', text)
        for m in DEFINITION.finditer(texts[path]):
            if not m.group(1).startswith("static"):
                defined.setdefault(m.group(2), path)
    calls = {}
    for path, text in texts.items():
        for ident in set(CALL.findall(text)):
            dest = defined.get(ident)
            if dest is not None and dest != path:
                calls.setdefault(path, {}).setdefault(dest, []).append(ident)
    call_circles = [" -> ".join("%s (%s)" % (a, ", ".join(sorted(calls[a][b])[:3]))
                                for a, b in zip(ring, ring[1:])) + " -> " + ring[-1]
                    for ring in rings(calls)]
    check("no circle of .c files that call each other", call_circles)

    # meson: each source it builds is in a folder whose layer exists, and
    # each .c of a layer is built
    with open(os.path.join(host, "meson.build"), encoding="utf-8") as f:
        meson = f.read()
    built = set(re.findall(r"'([a-z]+/[a-z0-9_-]+\.c)'", meson))
    missing = ["host/%s/%s is not in host/meson.build" % (l, n)
               for l, n in files if n.endswith(".c") and "%s/%s" % (l, n) not in built]
    check("host/meson.build builds every source of the layers", missing)
    # meson: one static library per layer of the daemon (hr_LAYER_lib, and
    # its hr_LAYER_dep), of its own folder's sources, depending only on the
    # layers it may call; no client source in them
    blocks = meson_blocks(meson)
    libs = {m: body for (name, kind), body in blocks.items()
            for m in [name[len("hr_"):-len("_lib")]]
            if kind == "static_library" and name.startswith("hr_") and name.endswith("_lib")}
    check("host/meson.build has a library per layer of the daemon",
          ["no hr_%s_lib = static_library( in host/meson.build" % l
           for l in sorted(MAY_CALL) if l != "clients" and l not in libs])
    check("no layer library builds a client's source",
          ["hr_%s_lib builds %s" % (l, src) for l, body in sorted(libs.items())
           for src in re.findall(r"'(clients/[a-z0-9_-]+\.c)'", body)])
    wrong = []
    for (name, kind), body in sorted(blocks.items()):
        m = re.match(r"hr_([a-z]+)_(lib|dep)$", name)
        if m is None or m.group(1) not in MAY_CALL:
            continue
        layer = m.group(1)
        for src in re.findall(r"'([a-z]+)/[a-z0-9_-]+\.c'", body):
            if src != layer:
                wrong.append("%s builds a source of %s/, not of %s/" % (name, src, layer))
        for ref in sorted(set(re.findall(r"\bhr_([a-z]+)_(?:lib|dep)\b", body))):
            if ref == layer or ref not in MAY_CALL:
                continue
            if ref not in MAY_CALL[layer]:
                wrong.append("%s depends on hr_%s_*: %s/ may call only %s" %
                             (name, ref, layer, ", ".join(MAY_CALL[layer]) or "itself"))
    check("no meson dependency crosses a layer upward", wrong)

    print("TAP version 13")
    print("1..%d" % len(tests))
    failed = 0
    for i, (name, problems) in enumerate(tests, 1):
        if problems:
            failed += 1
            print("not ok %d - %s" % (i, name))
            for p in problems:
                print("# %s" % p)
        else:
            print("ok %d - %s" % (i, name))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
