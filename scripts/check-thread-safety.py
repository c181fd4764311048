#!/usr/bin/env python3
"""Clang's thread-safety analysis over the code that uses annotated locks (src/common/mutex.h).

The default build is g++, which ignores the attributes; this compiles, with clang and
-Wthread-safety -Werror, -fsyntax-only (no object code), every source file of src/ that includes
common/mutex.h directly or through one of our headers, with the flags the build folder's
compile_commands.json gives it. A guarded member touched without its mutex, or a function
marked HANGAR_EXCLUDES called with it held, fails this check (and so CI; scripts/test.sh).

    python3 scripts/check-thread-safety.py [BUILD_DIR]     (default: build)
"""
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# g++ options clang does not take.
DROP = {"-Wno-restrict", "-fno-fat-lto-objects"}


def annotated_files():
    """Every file under src/ that includes common/mutex.h, directly or through our headers."""
    includes = {}
    for dirpath, _, names in os.walk(SRC):
        for n in names:
            if n.endswith((".h", ".cc")):
                path = os.path.join(dirpath, n)
                rel = os.path.relpath(path, SRC)
                with open(path, encoding="utf-8", errors="replace") as f:
                    includes[rel] = set(INCLUDE.findall(f.read()))
    users = {"common/mutex.h"}
    while True:
        more = {f for f, inc in includes.items() if f not in users and inc & users}
        if not more:
            break
        users |= more
    return sorted(f for f in users if f.endswith(".cc"))


def clang():
    for name in ("clang++-14", "clang++"):
        if shutil.which(name):
            return name
    sys.exit("check-thread-safety: clang++ not found; scripts/install-deps.sh --test installs clang-14")


def command_for(entry, compiler):
    args = entry.get("arguments") or shlex.split(entry["command"])
    out, skip = [compiler], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a in DROP or a.startswith("-fsanitize"):
            continue
        out.append(a)
    return out + ["-fsyntax-only", "-Wthread-safety", "-Wthread-safety-beta", "-Werror=thread-safety",
                  "-Wno-unknown-warning-option"]


def main():
    build = os.path.join(ROOT, sys.argv[1] if len(sys.argv) > 1 else "build")
    db_path = os.path.join(build, "compile_commands.json")
    if not os.path.exists(db_path):
        sys.exit(f"check-thread-safety: {db_path} is missing; configure the build first (scripts/build.sh)")
    with open(db_path) as f:
        db = {os.path.realpath(e["file"]): e for e in json.load(f)}
    compiler = clang()
    files = annotated_files()
    jobs = []
    for rel in files:
        entry = db.get(os.path.realpath(os.path.join(SRC, rel)))
        if entry is None:
            continue  # not built in this configuration (e.g. a benchmark-only file)
        jobs.append((rel, command_for(entry, compiler), entry["directory"]))

    def run(job):
        rel, cmd, cwd = job
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        return rel, r.returncode, r.stderr

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for rel, rc, err in pool.map(run, jobs):
            if rc != 0:
                failed += 1
                print(f"src/{rel}: thread-safety analysis failed:\n{err}", file=sys.stderr)
    print(f"check-thread-safety: {len(jobs)} files that use annotated locks, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
