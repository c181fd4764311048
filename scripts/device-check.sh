#!/usr/bin/env bash
# The checks that need a real NVIDIA GPU (issue 22), in under 5 minutes, for when one is lent:
#   1. `hangar gpu-check`: NVML discovery and one telemetry sample, as the agent sees them;
#   2. control: hangar-mps-probe with a memory limit but no MPS daemon -- the limit must NOT hold
#      (the variable alone does nothing);
#   3. `hangar mps-check`: MPS through the agent's own code -- the per-GPU control daemon started,
#      the probe run as a half-GPU client with an 8 GiB pinned memory limit (it allocates 4 GiB,
#      which must work, and 9 GiB, which must be refused), the daemon stopped afterwards;
#   4. hangar-validate's benchmarks on the GPUs, then the gang preflight (issue 44) as the agent
#      runs it on GPU nodes: `hangar preflight` with that validation as its node check and its
#      all-reduce through hangar-validate's NCCL gang form (--nccl-id, --nccl-gang) over every GPU.
#
#   scripts/device-check.sh                               # builds hangar and the probe here
#   HANGAR_BIN=build/src/hangar scripts/device-check.sh   # a hangar built elsewhere (carried)
#
# Logs and device-check.json (one line per check) go to $OUT (default /tmp/hangar-device-check).
# Exit 0 when every check passed, 1 when one failed, 2 when there is no GPU here.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${OUT:-/tmp/hangar-device-check}
work=/tmp/hangar-device-check-work
build=${HANGAR_DEVICE_CHECK_BUILD_DIR:-build-device-check}
mkdir -p "$out" "$work"
: > "$out/device-check.json"
failed=0

say() { echo "device-check: $*" | tee -a "$out/summary.txt"; }
# record NAME PASS(true|false) DETAIL
record() {
  printf '{"check":"%s","passed":%s,"detail":%s}\n' "$1" "$2" "$(printf '%s' "$3" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')" >>"$out/device-check.json"
  [[ $2 == true ]] || failed=1
  say "$1: $([[ $2 == true ]] && echo passed || echo FAILED) -- $3"
}

if ! nvidia-smi -L >"$out/nvidia-smi.txt" 2>&1; then
  say "no NVIDIA GPU here (nvidia-smi -L failed: $(head -1 "$out/nvidia-smi.txt"))"
  exit 2
fi
[[ -z "$(command -v nvcc || true)" && -x /usr/local/cuda/bin/nvcc ]] && export PATH=/usr/local/cuda/bin:$PATH

# hangar: the one given if it runs here, else built (Release, no tests, at most 200 s).
hangar=${HANGAR_BIN:-}
if [[ -n $hangar ]] && ! "$hangar" --version >/dev/null 2>&1; then
  say "HANGAR_BIN=$hangar does not run here ($("$hangar" --version 2>&1 | head -1)); building it"
  hangar=
fi
if [[ -z $hangar ]]; then
  if ! timeout 200 bash -c "cmake -S . -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release -DHANGAR_BUILD_TESTS=OFF \
        -DHANGAR_BUILD_BENCH=OFF && ninja -C '$build' -j$(nproc) hangar && \
        { ninja -C '$build' -t targets all | grep -q '^hangar-validate:' && ninja -C '$build' hangar-validate || true; }" \
        >"$out/build.log" 2>&1; then
    record build false "building hangar failed or took over 200 s; see build.log"
    exit 1
  fi
  hangar=$build/src/hangar
fi

# The probe: one .cu file, built for this GPU (the build's hangar-mps-probe target does the same).
probe=$work/hangar-mps-probe
if ! timeout 120 nvcc -O2 -arch=native -o "$probe" tools/mps_probe/mps_probe.cu >"$out/probe-build.log" 2>&1; then
  record probe-build false "nvcc could not build tools/mps_probe/mps_probe.cu: $(tail -3 "$out/probe-build.log")"
  exit 1
fi

# 1. What the agent sees.
timeout 60 "$hangar" gpu-check --gpu-backend nvml >"$out/gpu-check.txt" 2>&1
rc=$?
record gpu-check "$([[ $rc == 0 ]] && echo true || echo false)" "exit $rc; $(grep -c . "$out/gpu-check.txt") lines in gpu-check.txt"

# 2. Control: the limit without a daemon (an empty pipe folder, so no system-wide daemon answers).
mkdir -p "$work/no-daemon"
CUDA_MPS_PIPE_DIRECTORY=$work/no-daemon CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M \
  timeout 60 "$probe" >"$out/probe-without-mps.json" 2>&1
rc=$?
record limit-needs-mps "$([[ $rc == 1 ]] && echo true || echo false)" \
  "without a daemon the over-limit allocation should succeed (probe exit 1): exit $rc, $(cat "$out/probe-without-mps.json")"

# 3. Through the agent's MPS code.
if [[ -z "$(command -v nvidia-cuda-mps-control || true)" ]]; then
  record mps false "nvidia-cuda-mps-control is not installed here (the driver's compute utilities)"
else
  state=$work/state
  rm -rf "$state"
  timeout 120 "$hangar" mps-check --gpu-backend nvml --gpu 0 --fraction 0.5 --gpu-memory 8Gi \
    --state-dir "$state" -- "$probe" >"$out/mps-check.txt" 2>&1
  rc=$?
  verdict=$(grep -o '"verdict":"[^"]*"' "$out/mps-check.txt" | head -1)
  record mps-limit "$([[ $rc == 0 ]] && echo true || echo false)" \
    "probe under MPS with 0=8192M: exit $rc, $verdict, $(grep -o '{"sm_count.*}' "$out/mps-check.txt" | head -1)"
  pid_file=$(find "$state/mps" -path "*/pipe/nvidia-cuda-mps-control.pid" 2>/dev/null | head -1)
  stopped=true
  if [[ -n $pid_file ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then stopped=false; fi
  grep -q "control daemon stopped" "$out/mps-check.txt" || stopped=false
  record mps-daemon-stopped "$stopped" "$(grep 'mps-check: command' "$out/mps-check.txt")"
  for f in "$state"/mps/*/log/control.log "$state"/mps/*/log/server.log; do
    [[ -f $f ]] && cp "$f" "$out/mps-$(basename "$f")"
  done
  # Whatever was left (it should be nothing): ended, so the machine goes back clean.
  [[ $stopped == true ]] || { echo quit | CUDA_MPS_PIPE_DIRECTORY=$(dirname "$pid_file") timeout 10 nvidia-cuda-mps-control; }
fi

# 4. hangar-validate, and the gang preflight through it (NCCL across every GPU here).
validate=${HANGAR_VALIDATE_BIN:-$(dirname "$hangar")/../tools/validate/hangar-validate}
if [[ ! -x $validate ]]; then
  record validate false "no hangar-validate at $validate (built where nvcc and NCCL are)"
else
  timeout 180 "$validate" --iterations 5 >"$out/validate.json" 2>"$out/validate.err"
  rc=$?
  record validate "$([[ $rc == 0 ]] && echo true || echo false)" "exit $rc: $(head -c 600 "$out/validate.json")"
  gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  timeout 150 "$hangar" preflight --rank 0 --world 1 --store "127.0.0.1:$port" --budget 120s \
    --allreduce-mib 256 --node-check "$out/validate.json" --nccl-program "$validate" --gpus "$gpus" \
    --scratch "$work" >"$out/preflight.json" 2>"$out/preflight.err"
  rc=$?
  ok=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("true" if j.get("ok") and "NCCL all-reduce" in j.get("summary","") else "false")' "$out/preflight.json" 2>/dev/null || echo false)
  record gang-preflight-nccl "$ok" "exit $rc on GPUs $gpus: $(cat "$out/preflight.json") $(tail -2 "$out/preflight.err")"
fi

say "done in $SECONDS s; $([[ $failed == 0 ]] && echo 'every check passed' || echo 'a check FAILED')"
exit $failed
