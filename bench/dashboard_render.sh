#!/usr/bin/env bash
# The dashboard's render benchmark (issue 21; docs/benchmarks.md): 10,240 nodes from `hangar swarm`,
# every GPU busy, 100,000 jobs pending; time to the first full render of the cluster map and the
# queue view in Debian's chromium. The script itself is tests/web/render_bench.mjs, run from the
# build folder where `npm ci` put puppeteer-core. Extra arguments: --nodes N --pending N --runs N.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
if [[ ! -f "$build/tests/web/npm/node_modules/puppeteer-core/package.json" ]]; then
  ninja -C "$build" hangar dashboard_browser_test_deps
fi
exec node "$build/tests/web/npm/render_bench.mjs" --hangar "$build/src/hangar" "$@"
