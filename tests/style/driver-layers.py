#!/usr/bin/env python3
"""The guest driver's files call down only (issue 20): TAP.

Every file of guest-driver/ has a layer, lowest first (LAYERS below,
also in guest-driver/README.md, "Sources"); a file may call a function
another file defines only if that file is lower.  A call upward, a file
with no layer, and so any circle of files that call each other, fail.
News goes up by callbacks the lower file owns (vh->event_late_ack).

Calls are found as `virtio_hugeroom_NAME(` outside comments, defined by
the file with a non-static definition of that name.

Usage: driver-layers.py SOURCE_ROOT
"""
import os
import re
import sys

LAYERS = ['hr_cmd', 'hr_pcp', 'hr_report', 'hr_event', 'hr_hold',
          'hr_test', 'hr_evac', 'hr_debugfs', 'hr_dev']
DEF = re.compile(r'^(?!static)[a-z][^\n(;]*?\b(virtio_hugeroom_\w+)\(', re.M)
CALL = re.compile(r'\b(virtio_hugeroom_\w+)\(')


def strip_comments(s):
    return re.sub(r'/\*.*?\*/', '', s, flags=re.S)


def main(root):
    d = os.path.join(root, 'guest-driver')
    files = sorted(f[:-2] for f in os.listdir(d) if f.endswith('.c'))
    src = {f: strip_comments(open(os.path.join(d, f + '.c')).read())
           for f in files}
    defs = {}
    for f in files:
        for m in DEF.finditer(src[f]):
            defs[m.group(1)] = f
    bad = []
    n = 0
    print('TAP version 13')
    unknown = [f for f in files if f not in LAYERS]
    n += 1
    print('%s %d - every driver file has a layer%s' %
          ('not ok' if unknown else 'ok', n,
           (': not ' + ', '.join(unknown)) if unknown else ''))
    for f in files:
        if f not in LAYERS:
            continue
        up = sorted({'%s()' % m.group(1) + ' in ' + defs[m.group(1)]
                     for m in CALL.finditer(src[f])
                     if defs.get(m.group(1), f) != f and
                     defs[m.group(1)] in LAYERS and
                     LAYERS.index(defs[m.group(1)]) > LAYERS.index(f)})
        n += 1
        print('%s %d - %s calls down only' % ('not ok' if up else 'ok', n, f))
        for u in up:
            print('#   calls up: %s' % u)
        bad += up
    print('1..%d' % n)
    return 1 if bad or unknown else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else '.'))
