#!/usr/bin/env bash
# README's test command: installs what the tests need, builds everything and runs every test, then
# the fuzz targets' smoke run and the parser and state unit tests under ASan+UBSan (two smaller
# clang builds: build-fuzz/, build-asan/; docs/security.md). First, src/ is checked against the
# module table (scripts/layers.txt, docs/architecture.md "Layers") and every C++ file against
# .clang-format (scripts/check-format.sh); after the build, clang's
# thread-safety analysis runs over the code that uses annotated locks (scripts/check-thread-safety.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
python3 scripts/check-layers.py
scripts/check-format.sh
scripts/build.sh
python3 scripts/check-thread-safety.py build
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600
scripts/fuzz.sh
scripts/sanitize.sh --ci
