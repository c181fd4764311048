#!/usr/bin/env bash
# Configures (Release) and builds Hangar into ./build. Extra arguments are passed to ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
jobs=$(nproc 2>/dev/null || echo 2)
ninja -C build -j"$jobs" "$@"
