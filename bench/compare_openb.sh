#!/usr/bin/env bash
# Runs `hangar sim fgd` for every placement policy on every openb variant and prints one table:
# alloc@100 (ours vs the FGD authors' published runs), alloc@130 (ours vs published) and
# frag@100 (ours vs published), means over the seeds, plus each run's wall time. For `hangar`
# the published columns are FGD's, the policy it has to beat.
#
# Usage: bench/compare_openb.sh            (from anywhere; needs jq and a built build/src/hangar)
# Environment:
#   HANGAR_OPENB_DIR  the openb trace folder       (default: <repo>/../shared/traces/openb)
#   HANGAR_BIN        the hangar binary            (default: <repo>/build/src/hangar)
#   SEEDS             seeds                        (default: 42-51)
#   POLICIES          policies, space-separated    (default: all seven)
#   VARIANTS          variants, space-separated    (default: all thirteen)
#   THREADS           seeds run in parallel        (default: 2)
#   OUT_DIR           where the JSON reports go    (default: a fresh temporary folder)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
traces="${HANGAR_OPENB_DIR:-$root/../shared/traces/openb}"
hangar="${HANGAR_BIN:-$root/build/src/hangar}"
seeds="${SEEDS:-42-51}"
threads="${THREADS:-2}"
policies="${POLICIES:-random dot-product gpu-clustering gpu-packing best-fit fgd hangar}"
variants="${VARIANTS:-default cpu050 cpu100 cpu200 gpushare40 gpushare60 gpushare80 gpuspec10 gpuspec20 gpuspec25 multigpu20 multigpu30 multigpu40}"
out="${OUT_DIR:-$(mktemp -d)}"

if [[ ! -x "$hangar" ]]; then
  echo "compare_openb: $hangar is not built; run: ninja -C build -j2 hangar" >&2
  exit 2
fi
if [[ ! -f "$traces/openb_node_list_gpu_node.csv" ]]; then
  echo "compare_openb: no openb traces in $traces; set HANGAR_OPENB_DIR" >&2
  exit 2
fi
command -v jq >/dev/null || { echo "compare_openb: needs jq" >&2; exit 2; }
mkdir -p "$out"

fmt='%-15s %-11s %8s %8s %7s   %8s %8s   %7s %7s   %6s\n'
printf "$fmt" policy variant a@100 pub diff a@130 pub f@100 pub wall_s
num() { if [[ "$1" == "null" ]]; then echo "n/a"; else printf "%.${2:-3}f" "$1"; fi; }
for policy in $policies; do
  for variant in $variants; do
    json="$out/$policy.$variant.json"
    start=$(date +%s.%N)
    "$hangar" sim fgd --nodes "$traces/openb_node_list_gpu_node.csv" \
      --pods "$traces/openb_pod_list_$variant.csv" --policy "$policy" --seeds "$seeds" \
      --threads "$threads" --json "$json" --reference "$traces/fgd_reference" >/dev/null
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    read -r a100 r100 a130 r130 f100 rf100 < <(jq -r '[.alloc_at_100, .reference.alloc_at_100,
      .alloc_at_130, .reference.alloc_at_130, .frag_at_100, .reference.frag_at_100] | @tsv' "$json")
    diff="n/a"
    [[ "$a100" != "null" && "$r100" != "null" ]] && diff=$(printf "%+.2f" "$(echo "$a100 - $r100" | bc)")
    printf "$fmt" "$policy" "$variant" "$(num "$a100")" "$(num "$r100")" "$diff" "$(num "$a130")" \
      "$(num "$r130")" "$(num "$f100")" "$(num "$rf100")" "$(num "$wall" 1)"
  done
done
echo "a@100, a@130: GPU allocation (% of capacity) when the arrived request is 100 % / 130 % of"
echo "capacity; f@100: fragmented GPU (% of capacity) at 100 %; pub: the FGD authors' published"
echo "mean for the same policy (FGD's for hangar); means over seeds $seeds; wall_s: wall time of"
echo "one hangar sim fgd run (all seeds, $threads threads, $(nproc) CPUs). Reports in $out"
