#!/usr/bin/python3
"""Every example in README.md and docs/ is run (issue 15: "a doc example that does not run is a
failing test"). Each fenced block must be named in doc-examples.txt with how it runs:

  FILE#N  journey NAME   tests/journeys/NAME.t takes it from the document (doc_block/doc_run FILE N)
  FILE#N  test NAME      a test program whose source reads FILE (it runs the block from there)
  FILE#N  output NAME    an output the document shows; journey NAME prints it (its lines are there)
  FILE#N  not-run WHY    cannot run in a test (why), said so

docs/benchmarks.md (current figures) and docs/benchmarks-log.md (every run) record benchmarks, not examples.
"""
import pathlib, re, sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
here = root / "tests" / "journeys"
docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
blocks = {}
for d in docs:
    rel = d.relative_to(root).as_posix()
    if rel in ("docs/benchmarks.md", "docs/benchmarks-log.md"):
        continue
    for n, b in enumerate(re.findall(r"^```[^\n]*\n(.*?)^```", d.read_text(), re.S | re.M), 1):
        blocks[f"{rel}#{n}"] = b

problems, kinds = [], {}
listed = {}
for no, line in enumerate((here / "doc-examples.txt").read_text().splitlines(), 1):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    parts = line.split(None, 2)
    if len(parts) < 3:
        problems.append(f"doc-examples.txt:{no}: want 'FILE#N how NAME-or-why', got '{line}'")
        continue
    key, how, what = parts
    listed[key] = (how, what)
    if key not in blocks:
        problems.append(f"doc-examples.txt:{no}: {key} is not a fenced block of the documents (renumbered?)")
        continue
    file, n = key.rsplit("#", 1)
    kinds[how] = kinds.get(how, 0) + 1
    if how == "journey":
        t = here / f"{what}.t"
        text = t.read_text() if t.exists() else ""
        if not re.search(rf"doc_(block|run) {re.escape(file)} {n}\b", text):
            problems.append(f"{key}: journey {what} does not run it (no 'doc_block {file} {n}' or 'doc_run {file} {n}' in {t.name})")
    elif how == "output":
        t = here / f"{what}.t"
        text = t.read_text() if t.exists() else ""
        for l in blocks[key].splitlines():
            l = l.strip()
            if l and "..." not in l and "~" not in l and l not in text:
                problems.append(f"{key}: journey {what} never prints '{l}'")
                break
    elif how == "test":
        srcs = [p for p in (root / "tests").rglob("*") if p.is_file() and p.suffix in (".cc", ".mjs", ".sh", ".t")]
        srcs += [p for p in (root / "src").rglob("*_test.cc")]
        named = [p for p in srcs if p.stem == what or p.name == what]
        if not named:
            problems.append(f"{key}: no test source named {what}")
        elif not any(file in p.read_text() or pathlib.Path(file).name in p.read_text() for p in named):
            problems.append(f"{key}: {what} does not read {file}")
    elif how == "not-run":
        pass
    else:
        problems.append(f"{key}: unknown way '{how}' (journey, test, output or not-run)")
for key in blocks:
    if key not in listed:
        problems.append(f"{key} is not in tests/journeys/doc-examples.txt: say which journey or test runs it")
print(f"{len(blocks)} examples: " + ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())))
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
