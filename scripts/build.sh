#!/usr/bin/env bash
# Configures (Release) and builds Hangar into ./build. Extra arguments are passed to ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache, where the machine has it, with paths relative to the checkout so that clones in other
# folders share its cache.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}"
fi
jobs=$(nproc 2>/dev/null || echo 2)
ninja -C build -j"$jobs" "$@"
