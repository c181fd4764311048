#!/usr/bin/env bash
# The differential comparison against the real Slurm over the whole corpus: every script of
# tests/data/slurm-corpus/ through Debian's Slurm 22.05 and through `hangar dev`, 4 nodes x 8 GPUs
# each side, a recording stub in place of the programs they call (tests/slurm/slurm_diff.py, whose
# sample the ctest `slurm_diff` runs). Prints the table docs/slurm.md holds, one row per script,
# with each difference under its row; exits 1 when any difference is not allow-listed.
#
#   bench/slurm_diff_corpus.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
"$here/bench/peers/slurm/install.sh" >/dev/null
exec python3 "$here/tests/slurm/slurm_diff.py" "$build/src/hangar" "$here" --nodes 4 --timeout 30 \
  "$here"/tests/data/slurm-corpus/*.sbatch "$here"/tests/slurm/scripts/*.sbatch
