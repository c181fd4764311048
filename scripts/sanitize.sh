#!/usr/bin/env bash
# The tests under clang's sanitizers (docs/security.md, "Sanitizers").
#
#   scripts/sanitize.sh --ci    AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/) on the
#                               parser and state unit tests: job, cluster, api, common, sched and
#                               controller state. What scripts/test.sh runs (a few minutes with a
#                               warm ccache).
#   scripts/sanitize.sh --all   ASan+UBSan on every unit and integration test (build-asan/, all
#                               targets), then ThreadSanitizer (build-tsan/) on the daemons'
#                               concurrency tests: the state owner, the agent, the task runner, and
#                               the integration tests that drive the HTTP server, the agent hub and
#                               failover with real controller and agent processes. Long: a full
#                               clang build twice; run it at low priority (nice -n 10).
#   scripts/sanitize.sh --tsan  only the ThreadSanitizer part of --all.
# Extra arguments after the mode go to ctest (e.g. -R Pattern). A sanitizer report fails the test
# that triggered it (halt_on_error / abort), and the script exits non-zero.
#
# Runtime options: the Debian protobuf/gRPC libraries are not instrumented, so ASan's ODR check
# across them is off (they and our generated code define the same descriptors);
# fuzz/sanitizer.supp lists the few reports in those libraries that are not ours.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

mode=${1:---ci}
shift || true
case "$mode" in --ci | --all | --tsan) ;; *)
  echo "usage: scripts/sanitize.sh --ci | --all | --tsan [ctest arguments]" >&2; exit 2 ;;
esac

cxx=$(command -v clang++-14 || command -v clang++ || true)
cc=$(command -v clang-14 || command -v clang || true)
if [[ -z "$cxx" ]]; then
  echo "sanitize.sh: clang++ not found; install clang-14 and libclang-rt-14-dev (scripts/install-deps.sh --test)" >&2
  exit 1
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$root"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
jobs=$(nproc 2>/dev/null || echo 2)

# configure DIR SANITIZERS: a clang build folder with -fsanitize=SANITIZERS.
configure() {
  if [[ ! -f $1/build.ninja ]]; then
    # -O1 and asserts on (no NDEBUG), as the sanitizers are meant to be used.
    cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
      -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
      -DHANGAR_SANITIZE="$2" -DHANGAR_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
  fi
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0:abort_on_error=1:detect_leaks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/fuzz/sanitizer.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:suppressions=$root/fuzz/ubsan.supp}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/fuzz/tsan.supp}

ci_tests=(job_test cluster_test api_test common_test sched_test controller_state_test)
tsan_tests=(state_owner_test agent_test task_runner_test control_plane_test agent_auth_test http_limits_test
  failover_test)

# run_binary DIR TEST LABEL: one gtest binary, one process (ctest would start one per test case),
# its output in DIR/TEST.log; on failure, the sanitizer's summary lines.
run_binary() {
  local bin
  bin=$(find "$1" -name "$2" -type f -perm -u+x | head -1)
  if [[ -z "$bin" ]]; then echo "$3 $2: not built" >&2; return 1; fi
  if "$bin" --gtest_brief=1 >"$1/$2.log" 2>&1; then
    echo "$3 $2: passed"
  else
    echo "$3 $2: FAILED; $1/$2.log:"
    grep -E 'ERROR: |WARNING: ThreadSanitizer|runtime error|SUMMARY|FAILED' "$1/$2.log" | head -8 | sed 's/^/  /'
    return 1
  fi
}

status=0
if [[ $mode == --ci ]]; then
  configure build-asan address,undefined
  ninja -C build-asan -j"$jobs" "${ci_tests[@]}"
  for t in "${ci_tests[@]}"; do run_binary build-asan "$t" "asan+ubsan" || status=1; done
  exit $status
fi

if [[ $mode == --all ]]; then
  configure build-asan address,undefined
  ninja -C build-asan -j"$jobs"
  # Not the two flood tests that exhaust the controller's descriptors on purpose: there UBSan's
  # vptr check cannot open the pipe it probes memory with and reports every object it looks at
  # as having an invalid vptr (docs/security.md, "Sanitizers"); they run in the plain suite.
  ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900 \
    -E 'AgentFloodTest\.(AgentsRegisterAgain|AStandbyAnswersAgentsAgain)' "$@" || status=1
fi
configure build-tsan thread
ninja -C build-tsan -j"$jobs" "${tsan_tests[@]}"
for t in "${tsan_tests[@]}"; do run_binary build-tsan "$t" tsan || status=1; done
exit $status
