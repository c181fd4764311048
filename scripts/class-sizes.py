#!/usr/bin/env python3
"""Data members and methods of every class and struct in src/ (tests aside), as Universal Ctags
counts them: the owners rule of docs/architecture.md is that no class keeps more than 20 data
members together with more than 12 methods.

  python3 scripts/class-sizes.py            # the classes over the rule, biggest first
  python3 scripts/class-sizes.py --all N    # the N biggest classes, whatever their size
  python3 scripts/class-sizes.py --class ClusterState   # one class
"""
import argparse
import collections
import json
import pathlib
import re
import subprocess
import sys

MAX_MEMBERS, MAX_METHODS = 20, 12


def sizes(root: pathlib.Path):
    files = [str(p) for p in sorted(root.glob("src/**/*")) if p.suffix in (".h", ".cc")
             and not p.name.endswith("_test.cc") and not p.name.endswith("_test.h")]
    # The thread-safety annotations (common/mutex.h) read as nothing: without this, ctags takes
    # `T x_ HANGAR_GUARDED_BY(mu_);` for a method named HANGAR_GUARDED_BY and misses the member.
    mutex_h = root / "src/common/mutex.h"
    annotations = sorted(set(re.findall(r"#define (HANGAR_[A-Z_]+)\(", mutex_h.read_text()))
                         if mutex_h.exists() else [])
    defines = [f"-D{a}(...)=" for a in annotations]
    out = subprocess.run(
        ["ctags"] + defines + ["--output-format=json", "--languages=C++", "--kinds-C++=+p-l",
                               "--fields=+sZKn", "-f", "-"] + files,
        capture_output=True, text=True, check=True).stdout
    members = collections.defaultdict(set)
    methods = collections.defaultdict(set)
    for line in out.splitlines():
        t = json.loads(line)
        scope, kind = t.get("scope"), t.get("kind")
        if not scope or t.get("scopeKind") not in ("class", "struct"):
            continue
        # The whole scope, namespaces included: two classes of one name (maintenance::Run and
        # Scheduler::Run) are two classes.
        cls = scope
        if kind == "member":
            members[cls].add(t["name"])
        elif kind in ("function", "prototype"):
            short = cls.split("::")[-1]
            if t["name"] not in (short, "~" + short):
                methods[cls].add(t["name"])
    full = {c: (len(members[c]), len(methods[c])) for c in set(members) | set(methods)}
    # Shown by its own name, or by the scope within hangar:: where two classes share one.
    names = collections.Counter(c.split("::")[-1] for c in full)
    return {(c.split("::")[-1] if names[c.split("::")[-1]] == 1
             else re.sub(r"__anon[0-9a-f]+", "(anonymous)", c.removeprefix("hangar::"))): v
            for c, v in full.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", type=int, metavar="N")
    ap.add_argument("--class", dest="cls")
    a = ap.parse_args()
    s = sizes(pathlib.Path(__file__).resolve().parent.parent)
    rows = sorted(s.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    if a.cls:
        rows = [r for r in rows if r[0] == a.cls or r[0].endswith("::" + a.cls)]
    elif a.all:
        rows = rows[: a.all]
    else:
        rows = [r for r in rows if r[1][0] > MAX_MEMBERS and r[1][1] > MAX_METHODS]
    print(f"{'class':32} {'members':>7} {'methods':>7}")
    for c, (m, f) in rows:
        print(f"{c:32} {m:7} {f:7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
