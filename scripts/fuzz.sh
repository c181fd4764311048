#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with AddressSanitizer and UndefinedBehaviorSanitizer)
# into build-fuzz/ and runs them; docs/security.md, "Fuzzing".
#
#   scripts/fuzz.sh                  CI smoke: every target over its committed corpus, then
#                                    SMOKE_SECONDS (default 10) of new inputs each, two at a time
#   scripts/fuzz.sh --long 600       every target for 600 s, niced, FUZZ_JOBS (default 2) at a
#                                    time; logs and new inputs under build-fuzz/runs/<target>/
#   scripts/fuzz.sh --merge          merges build-fuzz/runs/<target>/new into fuzz/corpus/<target>
#                                    (libFuzzer's -merge=1: only inputs that add coverage)
#   scripts/fuzz.sh --build          only builds
# Any mode takes --only TARGET (e.g. --only sbatch) to run one target. A crash fails the script
# and leaves its input in build-fuzz/runs/<target>/ (crash-*, leak-*, oom-*, timeout-*).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

mode=smoke
seconds=${SMOKE_SECONDS:-10}
only=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --long) mode=long; seconds=${2:?--long needs seconds}; shift 2 ;;
    --merge) mode=merge; shift ;;
    --build) mode=build; shift ;;
    --only) only=${2:?--only needs a target}; shift 2 ;;
    *) echo "usage: scripts/fuzz.sh [--long SECONDS | --merge | --build] [--only TARGET]" >&2; exit 2 ;;
  esac
done

cxx=$(command -v clang++-14 || command -v clang++ || true)
cc=$(command -v clang-14 || command -v clang || true)
if [[ -z "$cxx" ]]; then
  echo "fuzz.sh: clang++ not found; install clang-14 and libclang-rt-14-dev (scripts/install-deps.sh --test)" >&2
  exit 1
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$root"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
if [[ ! -f build-fuzz/build.ninja ]]; then
  # -O1 and asserts on (no NDEBUG): what libFuzzer and ASan are made for.
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_C_COMPILER="$cc" -DHANGAR_FUZZ=ON -DHANGAR_SANITIZE=address,undefined \
    -DHANGAR_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
fi
# FUZZ_NO_BUILD=1: run what build-fuzz/ holds (while another ninja builds there).
[[ -n "${FUZZ_NO_BUILD:-}" ]] || ninja -C build-fuzz -j"$(nproc 2>/dev/null || echo 2)" fuzz
[[ $mode == build ]] && exit 0

targets=()
for f in fuzz/*_fuzz.cc; do
  t=$(basename "$f" _fuzz.cc)
  if [[ -z "$only" || "$only" == "$t" ]]; then targets+=("$t"); fi
done
if [[ ${#targets[@]} -eq 0 ]]; then echo "fuzz.sh: no target named '$only' (fuzz/*_fuzz.cc)" >&2; exit 2; fi

# UBSan findings are crashes; leaks are reported (libFuzzer's -detect_leaks) but the Debian
# protobuf/gRPC libraries are not instrumented, hence no ODR check across them.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# Long runs share the machine: lowest priority.
niced=()
[[ $mode == long ]] && niced=(nice -n 19)

# run TARGET ARGS...: the target binary with its dictionary, in its run folder.
run() {
  local t=$1; shift
  local dict=()
  [[ -f fuzz/dict/$t.dict ]] && dict=(-dict="$root/fuzz/dict/$t.dict")
  mkdir -p "build-fuzz/runs/$t"
  (cd "build-fuzz/runs/$t" && "${niced[@]}" "$root/build-fuzz/fuzz/${t}_fuzz" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "${dict[@]}" "$@")
}

# One target's whole smoke or long run; its output in build-fuzz/runs/<t>/log.
one() {
  local t=$1 corpus="fuzz/corpus/$1" new="build-fuzz/runs/$1/new"
  mkdir -p "$new" "$corpus"
  if [[ $mode == smoke ]]; then
    run "$t" -runs=0 "$root/$corpus" >"build-fuzz/runs/$t/log" 2>&1 &&
      run "$t" -max_total_time="$seconds" "$root/$new" "$root/$corpus" >>"build-fuzz/runs/$t/log" 2>&1
  else
    run "$t" -max_total_time="$seconds" "$root/$new" "$root/$corpus" >"build-fuzz/runs/$t/log" 2>&1
  fi
}

if [[ $mode == merge ]]; then
  for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "build-fuzz/runs/$t/new"
    run "$t" -merge=1 "$root/fuzz/corpus/$t" "$root/build-fuzz/runs/$t/new" >"build-fuzz/runs/$t/merge.log" 2>&1
    echo "$t: $(ls "fuzz/corpus/$t" | wc -l) inputs in fuzz/corpus/$t"
  done
  exit 0
fi

jobs=2
[[ $mode == long ]] && jobs=${FUZZ_JOBS:-2}
failed=()
pids=() names=()
wait_one() {  # waits for the oldest running target and reports it
  local t=${names[0]}
  if wait "${pids[0]}"; then
    # libFuzzer's last status line ("#123 DONE cov: ... ft: ...") and its execution count.
    local last execs
    last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|INITED)' "build-fuzz/runs/$t/log" | tail -1 | tr -s ' \t' ' ' || true)
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "build-fuzz/runs/$t/log" | tail -1 | awk '{print $2}' || true)
    echo "fuzz $t: ok, ${execs:-?} executions; ${last:-no status line}"
  else
    echo "fuzz $t: FAILED; see build-fuzz/runs/$t/log (and the crash-* input beside it):"
    grep -E 'ERROR|runtime error|fuzz property|SUMMARY' "build-fuzz/runs/$t/log" | head -5 | sed 's/^/  /'
    failed+=("$t")
  fi
  pids=("${pids[@]:1}") names=("${names[@]:1}")
}
for t in "${targets[@]}"; do
  [[ ${#pids[@]} -ge $jobs ]] && wait_one
  one "$t" & pids+=($!) names+=("$t")
done
while [[ ${#pids[@]} -gt 0 ]]; do wait_one; done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  exit 1
fi
