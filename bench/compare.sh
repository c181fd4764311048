#!/usr/bin/env bash
# One command for both simulator comparisons, printing both tables:
#   1. openb: `hangar sim fgd`, every placement policy against the FGD authors' published runs
#      (bench/compare_openb.sh; its environment variables apply: SEEDS, POLICIES, VARIANTS, ...).
#   2. Philly: `hangar sim replay` per policy, the virtual clusters as static partitions and as
#      queues of one shared pool (--shared-pool), at --load $LOAD: one markdown table with average,
#      p50 and p99 JCT, GPU utilisation, queueing delay, the no-queueing bound (mean run time),
#      whether every queue got its guarantee when it asked, and each replay's wall time.
#
# Usage: bench/compare.sh                 (from anywhere; needs jq and a built build/src/hangar)
# Environment:
#   HANGAR_BIN        the hangar binary                 (default: <repo>/build/src/hangar)
#   HANGAR_TRACES     the shared trace folder           (default: <repo>/../shared/traces)
#   PHILLY_POLICIES   replay policies, space-separated  (default: fifo-backfill hangar sjf-oracle)
#   LOAD              arrival compression               (default: 4)
#   FROM, TO          submit days to replay (YYYY-MM-DD, both included; default: the whole trace)
#   SKIP_OPENB=1      only the Philly table;  SKIP_PHILLY=1  only the openb table
#   OUT_DIR           where the JSON reports go         (default: a fresh temporary folder)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
traces="${HANGAR_TRACES:-$root/../shared/traces}"
hangar="${HANGAR_BIN:-$root/build/src/hangar}"
policies="${PHILLY_POLICIES:-fifo-backfill hangar sjf-oracle}"
load="${LOAD:-4}"
out="${OUT_DIR:-$(mktemp -d)}"
mkdir -p "$out"

if [[ ! -x "$hangar" ]]; then
  echo "compare: $hangar is not built; run: scripts/build.sh hangar (or set HANGAR_BIN)" >&2
  exit 2
fi
command -v jq >/dev/null || { echo "compare: needs jq" >&2; exit 2; }

if [[ "${SKIP_OPENB:-0}" != 1 ]]; then
  echo "## openb: hangar sim fgd against the FGD authors' published runs"
  echo
  HANGAR_BIN="$hangar" HANGAR_OPENB_DIR="${HANGAR_OPENB_DIR:-$traces/openb}" OUT_DIR="$out/openb" \
    "$root/bench/compare_openb.sh"
  echo
fi

if [[ "${SKIP_PHILLY:-0}" != 1 ]]; then
  philly="$traces/philly"
  if [[ ! -f "$philly/philly.csv" || ! -f "$philly/philly_vc_nodes.csv" ]]; then
    echo "compare: no Philly trace in $philly; set HANGAR_TRACES" >&2
    exit 2
  fi
  days=()
  [[ -n "${FROM:-}" ]] && days+=(--from "$FROM")
  [[ -n "${TO:-}" ]] && days+=(--to "$TO")
  echo "## Philly: virtual clusters as static partitions vs one shared pool, --load $load"
  echo
  echo "| policy | layout | jobs | avg JCT (s) | p50 JCT (s) | p99 JCT (s) | GPU util | avg queueing (s) | mean run time (s) | avg JCT over the bound | avg JCT vs partitions | within-guarantee jobs started late | denied cycles (s) | worst queue's entitlement met | preemptions | wall (s) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for policy in $policies; do
    base=""
    for layout in partitions shared-pool; do
      json="$out/philly.$policy.$layout.json"
      extra=()
      [[ "$layout" == shared-pool ]] && extra=(--shared-pool)
      start=$(date +%s.%N)
      "$hangar" sim replay --format philly --trace "$philly/philly.csv" --philly-vcs "$philly/philly_vc_nodes.csv" \
        --policy "$policy" --load "$load" "${days[@]}" "${extra[@]}" --json "$json" >/dev/null
      wall=$(echo "$(date +%s.%N) - $start" | bc)
      avg=$(jq -r .avg_jct_s "$json")
      [[ -z "$base" ]] && base="$avg"
      jq -r --arg policy "$policy" --arg layout "$layout" --arg base "$base" --arg wall "$wall" '
        def f(d): . * pow(10; d) | round / pow(10; d);
        def d1: (. * 10 | round) as $x | ($x | if . < 0 then -. else . end) as $a
          | "\(if $x < 0 then "-" else "" end)\($a / 10 | floor).\($a % 10)";
        def c: tostring | until(test("^[0-9]{4}") | not; sub("(?<a>[0-9])(?<b>[0-9]{3})(?<r>[,.]|$)"; "\(.a),\(.b)\(.r)"));
        "| \($policy) | \($layout) | \(.jobs | c) | \(.avg_jct_s | round | c) | \(.p50_jct_s | round | c) | \(.p99_jct_s | round | c) | \(.gpu_util_pct | f(1))% | \(.avg_queue_s | round | c) | \(.avg_runtime_s | round | c) | +\((.avg_jct_s / .avg_runtime_s - 1) * 100 | d1)% | \(if $layout == "partitions" then "—" else "\((.avg_jct_s / ($base | tonumber) - 1) * 100 | d1)%" end) | \(.within_late) of \(.asked_within | c) | \(.denied_cycles | c) (\(.denied_s | round | c)) | \(.worst_queue_entitlement_met_pct | f(2))% | \(.preemptions | c) | \($wall | tonumber | f(1)) |"' "$json"
    done
  done
  echo
  echo "JCT: submit to end; queueing: submit to first start; mean run time: the no-queueing bound on"
  echo "the average JCT. within-guarantee jobs started late: jobs submitted when their queue's held +"
  echo "waiting + own GPUs fit its guarantee that did not start in that cycle; denied cycles: cycles after"
  echo "which a queue had a waiting job that fit within its guarantee while another queue borrowed"
  echo "(docs/benchmarks.md); entitlement: GPU-time a queue held of min(its demand, its guarantee)."
  echo "wall: one hangar sim replay run (reading the trace included), $(nproc) CPUs. Reports in $out"
fi
