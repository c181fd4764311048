#!/usr/bin/env python3
"""Fails when src/ crosses the module table in scripts/layers.txt, or files include each other.

Checks every #include "module/..." of the production files under src/ (tests, *_test.cc and
testing/ folders, are free to use what they test with), every library's DEPS and
target_link_libraries in src/**/CMakeLists.txt, and that no two parts of src/ include each other
(a part: a header and its .cc files; scripts/layers.txt's "cycle:" lines name the few allowed).
Prints one line per crossing and exits 1; prints a summary and exits 0 when there is none.
"""
import collections
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def read_table(path):
    modules, headers, cycles = {}, {}, set()
    for n, raw in enumerate(open(path), 1):
        line = raw.split('#', 1)[0].strip() if not raw.lstrip().startswith('#') else ''
        if not line:
            continue
        if line.startswith('cycle:'):
            parts = line[len('cycle:'):].split(':', 1)[0].split()
            cycles.add(frozenset(parts))
        elif '->' in line:
            left, right = line.split('->', 1)
            header = right.split(':', 1)[0].strip()
            headers.setdefault(left.strip(), set()).add(header)
        elif ':' in line:
            mod, deps = line.split(':', 1)
            modules[mod.strip()] = set(deps.split())
        else:
            sys.exit(f'{path}:{n}: cannot read this line: {raw.rstrip()}')
    return modules, headers, cycles


def module_of(rel):  # rel: path under src/
    return 'main' if '/' not in rel else rel.split('/', 1)[0]


def is_test(rel):
    return rel.endswith('_test.cc') or '/testing/' in rel or rel.endswith('_test.h')


def check_includes(modules, headers, problems):
    parts = collections.defaultdict(set)
    count = 0
    for root, _, files in os.walk(os.path.join(ROOT, 'src')):
        for f in sorted(files):
            if not f.endswith(('.cc', '.h')):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, os.path.join(ROOT, 'src'))
            if is_test(rel):
                continue
            mod = module_of(rel)
            if mod not in modules:
                problems.append(f'src/{rel}: module "{mod}" is not in scripts/layers.txt; add it with what it may use')
                continue
            for n, text in enumerate(open(path, errors='replace'), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', text)
                if not m:
                    continue
                inc = m.group(1)
                count += 1
                if '/' not in inc:
                    continue
                target = inc.split('/', 1)[0]
                part, other = os.path.splitext(rel)[0], os.path.splitext(inc)[0]
                if other != part:
                    parts[part].add(other)
                if target == mod or target not in modules or target in modules[mod]:
                    continue
                if inc in headers.get(mod, ()):
                    continue
                problems.append(f'src/{rel}:{n}: {mod} includes {inc}, but {mod} may use only '
                                f'{" ".join(sorted(modules[mod])) or "nothing"} (scripts/layers.txt)')
    return parts, count


def check_links(modules, headers, problems):
    lib_module = {}
    links = []
    for root, _, files in os.walk(os.path.join(ROOT, 'src')):
        if 'CMakeLists.txt' not in files:
            continue
        path = os.path.join(root, 'CMakeLists.txt')
        rel = os.path.relpath(root, os.path.join(ROOT, 'src'))
        mod = 'main' if rel == '.' else rel.split('/', 1)[0]
        text = re.sub(r'#[^\n]*', '', open(path).read())
        for m in re.finditer(r'\b(hangar_library|add_library)\(\s*(\w+)(.*?)\)', text, re.S):
            lib_module[m.group(2)] = mod
            deps = re.search(r'\bDEPS\b(.*)', m.group(3), re.S)
            if deps:
                links.append((path, m.group(2), deps.group(1).split()))
        for m in re.finditer(r'\btarget_link_libraries\(\s*(\w+)(.*?)\)', text, re.S):
            links.append((path, m.group(1), m.group(2).split()))
    for m in re.finditer(r'\badd_library\(\s*(\w+)', open(os.path.join(ROOT, 'proto', 'CMakeLists.txt')).read()):
        lib_module[m.group(1)] = 'proto'
    for path, lib, deps in links:
        if lib not in lib_module:
            continue  # an executable or a test
        mod = lib_module[lib]
        for dep in deps:
            target = lib_module.get(dep)
            if target is None or target == mod or target in modules.get(mod, ()):
                continue
            if any(h.split('/', 1)[0] == target for h in headers.get(mod, ())):
                continue  # the headers it may use are named in the table; their code links here
            problems.append(f'{os.path.relpath(path, ROOT)}: {lib} ({mod}) links {dep} ({target}), but {mod} may '
                            f'use only {" ".join(sorted(modules[mod]))} (scripts/layers.txt)')
    return len(links)


def check_cycles(parts, allowed, problems):
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(parts.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(parts):
        if v not in index:
            visit(v)
    for group in found:
        if frozenset(group) in allowed:
            continue
        problems.append('src/: these include each other (directly or around a loop): ' + ', '.join(group) +
                        '; move what they share into a part of its own')
    return len(found)


def main():
    modules, headers, cycles = read_table(os.path.join(ROOT, 'scripts', 'layers.txt'))
    problems = []
    parts, includes = check_includes(modules, headers, problems)
    links = check_links(modules, headers, problems)
    loops = check_cycles(parts, cycles, problems)
    for p in problems:
        print(p)
    if problems:
        print(f'check-layers: {len(problems)} crossing(s) of scripts/layers.txt', file=sys.stderr)
        return 1
    print(f'check-layers: {includes} includes, {links} link lines and {len(parts)} parts of src/ keep to '
          f'scripts/layers.txt ({loops} allowed loop(s))')
    return 0


if __name__ == '__main__':
    sys.exit(main())
