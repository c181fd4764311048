#!/usr/bin/env bash
# README's first command: installs what Hangar needs, builds it, and starts a whole local cluster
# (a controller and 4 agents with fake GPUs, SQLite store under ./hangar-dev/), submits the example
# jobs and shows them placed, running and finishing. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh hangar
exec build/src/hangar dev --submit-examples examples/jobs "$@"
