#!/usr/bin/env bash
# For a machine with NVIDIA GPUs: builds Hangar with the NVML backend and hangar-validate (CMake
# with CUDA), then shows what the agent sees -- discovery and one telemetry sample, as tables --
# and runs the validation benchmarks (GEMM, memory and PCIe bandwidth, NCCL all-reduce).
# On a machine without a usable GPU it says so and exits 2.
#
#   scripts/gpu-check.sh [--no-validate] [--no-build]
#
# HANGAR_GPU_CHECK_BUILD_DIR (default build-gpu-check) is the build directory; --no-build uses
# what is already built there (e.g. a build carried to a machine without the build tools).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${HANGAR_GPU_CHECK_BUILD_DIR:-build-gpu-check}
validate=--validate
do_build=1
for arg in "$@"; do
  case "$arg" in
    --no-validate) validate= ;;
    --no-build) do_build=0 ;;
    *) echo "usage: scripts/gpu-check.sh [--no-validate] [--no-build]" >&2; exit 64 ;;
  esac
done

fail() { echo "gpu-check: $*" >&2; exit 2; }

# NVML comes with the driver: without it there is nothing to check.
have_nvml() {
  ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1' && return 0
  local dir
  for dir in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [[ -e "$dir/libnvidia-ml.so.1" ]] && return 0
  done
  return 1
}
have_nvml || fail "no NVIDIA driver here (libnvidia-ml.so.1 not found): this check needs a machine with an NVIDIA GPU and its driver"

if [[ -z "$(command -v nvcc || true)" && -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
if [[ $do_build == 1 ]]; then
  if [[ -n "$validate" && -z "$(command -v nvcc || true)" ]]; then
    echo "gpu-check: no CUDA compiler (nvcc) found: hangar-validate cannot be built; checking without validation" >&2
    validate=
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHANGAR_BUILD_TESTS=OFF \
    -DHANGAR_BUILD_BENCH=OFF >/dev/null ||
    fail "cmake failed in $build (missing libraries? scripts/install-deps.sh installs them)"
  targets=(hangar)
  [[ -n "$validate" ]] && targets+=(hangar-validate)
  ninja -C "$build" -j"$(nproc 2>/dev/null || echo 2)" "${targets[@]}"
fi
[[ -x "$build/src/hangar" ]] || fail "$build/src/hangar is not built; run without --no-build"
if [[ -n "$validate" && ! -x "$build/tools/validate/hangar-validate" ]]; then
  fail "$build/tools/validate/hangar-validate is not built (CMake found no nvcc?); pass --no-validate to skip it"
fi

# hangar finds hangar-validate in the build tree beside it. Exits 2 with the reason when NVML
# cannot start (driver not loaded, no GPU, a GPU lost) or validation fails.
exec "$build/src/hangar" gpu-check --gpu-backend nvml $validate --scratch-dir "$build/gpu-check"
