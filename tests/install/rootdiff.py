#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""What changed in an overlay of a root, as piuparts compares snapshots.

Usage: rootdiff.py LOWER UPPER MERGED [--ignore REGEX]... [--ignore-listed FILE]...

LOWER is the clean root, MERGED the overlay mounted over it, UPPER the
overlay's upper directory.  A path the overlay never touched is not in
UPPER and is LOWER's as it was, so only UPPER's paths are compared: each
one's type, mode, owner and group, a symlink's target and a regular file's
SHA-256 against LOWER's (a file copied up and written back as it was is
not a change), and each directory's entries (a whiteout or an opaque
directory hides LOWER's entries: those are removals).  Prints one line
per change, "added PATH", "removed PATH" or "changed PATH (what)", sorted;
paths are root-relative with a leading /.  A path matching an --ignore
regex (re.fullmatch on the path) or listed in an --ignore-listed FILE
(one path a line, as dpkg-query -L prints a package's) is left out.
"""

import hashlib
import os
import re
import stat
import sys


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def describe(path):
    """(kind, mode, uid, gid, content) of @path, None when it is not there."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    kind = stat.S_IFMT(st.st_mode)
    if stat.S_ISREG(st.st_mode):
        content = sha256(path)
    elif stat.S_ISLNK(st.st_mode):
        content = os.readlink(path)
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        content = st.st_rdev
    else:
        content = None
    return (kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, content)


def canonical(root, path):
    """@path with its directories' symlinks (as in @root) resolved"""
    d, base = os.path.split(path)
    parts = []
    for part in d.strip("/").split("/"):
        if not part:
            continue
        cur = "/".join(parts + [part])
        full = os.path.join(root, cur)
        if os.path.islink(full):
            target = os.readlink(full)
            if target.startswith("/"):
                parts = [x for x in target.strip("/").split("/") if x]
            else:
                parts = os.path.normpath("/".join(parts + [target])).strip("/").split("/")
        else:
            parts.append(part)
    return "/" + "/".join(parts + ([base] if base else []))


def what_differs(a, b):
    names = ["type", "mode", "owner", "group", "content"]
    return ", ".join(n for n, x, y in zip(names, a, b) if x != y)


def main(argv):
    lower, upper, merged = argv[1:4]
    ignore = []
    listed = set()
    rest = argv[4:]
    while rest:
        if rest[0] == "--ignore" and len(rest) >= 2:
            ignore.append(re.compile(rest[1]))
        elif rest[0] == "--ignore-listed" and len(rest) >= 2:
            with open(rest[1]) as f:
                listed.update(line.rstrip("\n") for line in f if line.strip())
        else:
            sys.exit("usage: rootdiff.py LOWER UPPER MERGED [--ignore REGEX]... "
                     "[--ignore-listed FILE]...")
        rest = rest[2:]
    for p in (lower, upper, merged):
        if not os.path.isdir(p):
            sys.exit("rootdiff.py: %s is not a directory" % p)
    # a listed /lib/x is /usr/lib/x in a merged-/usr root: the paths are
    # compared by where they are, their directories' links resolved in LOWER
    listed = {canonical(lower, p) for p in listed}
    changes = {}

    def note(rel, line):
        if rel not in listed and not any(r.fullmatch(rel) for r in ignore):
            changes[rel] = line

    def removed_tree(rel):
        """@rel and, for a directory, everything under it in LOWER"""
        note(rel, "removed " + rel)
        lp = lower + rel
        if os.path.isdir(lp) and not os.path.islink(lp):
            for dirpath, dirnames, filenames in os.walk(lp):
                for n in dirnames + filenames:
                    r = os.path.join(dirpath, n)[len(lower):]
                    note(r, "removed " + r)

    for dirpath, dirnames, filenames in os.walk(upper):
        for n in dirnames + filenames:
            rel = os.path.join(dirpath, n)[len(upper):]
            old = describe(lower + rel)
            new = describe(merged + rel)
            if old is None and new is None:
                continue  # a whiteout of something LOWER never had
            if old is None:
                note(rel, "added " + rel)
            elif new is None:
                removed_tree(rel)
            elif old != new:
                note(rel, "changed %s (%s)" % (rel, what_differs(old, new)))
            if new is not None and old is not None and stat.S_ISDIR(new[0]) and \
                    stat.S_ISDIR(old[0]):
                gone = set(os.listdir(lower + rel)) - set(os.listdir(merged + rel))
                for g in gone:
                    removed_tree(os.path.join(rel, g))
    # the root directory itself
    gone = set(os.listdir(lower)) - set(os.listdir(merged))
    for g in gone:
        removed_tree("/" + g)
    for rel in sorted(changes):
        print(changes[rel])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
