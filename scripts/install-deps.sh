#!/usr/bin/env bash
# Installs what Hangar needs to build (and, with --test, to run every test) from Debian's archive.
# Idempotent: when everything is present it does nothing. Uses sudo when not root.
set -euo pipefail

# libgloo-dev: the gang preflight's all-reduce across a gang's nodes (docs/goodput.md).
# ccache: scripts/build.sh uses it, so that a clone in another folder (CI's) rebuilds from the cache.
build_pkgs=(build-essential cmake ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev libabsl-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler nlohmann-json3-dev
  libyaml-cpp-dev libcpp-httplib-dev libspdlog-dev libcli11-dev prometheus-cpp-dev libsqlite3-dev
  libpq-dev libssl-dev libgloo-dev curl procps ccache)
# systemd (systemd-analyze), dpkg-dev (dpkg-shlibdeps, for cpack), adduser and util-linux (unshare,
# setpriv): tests/packaging/deb_test.sh. chromium: the dashboard's browser tests (tests/web/).
# haproxy: the services' load balancer (`hangar dev` starts one; tests/integration/services_e2e_test.py).
# clang-format-14: scripts/check-format.sh. clang-14 and libclang-rt-14-dev (libFuzzer and the
# sanitizers' runtimes): scripts/fuzz.sh and
# scripts/sanitize.sh. snakemake: a real client of Slurm's commands (tests/journeys/snakemake.t).
# slurm-wlm and munge: the real Slurm the differential test runs beside `hangar dev`
# (tests/slurm/slurm_diff_test.sh, bench/peers/slurm/; its daemons run under a folder of its own).
test_pkgs=(python3 python3-cram sqlite3 jq curl python3-torch prometheus postgresql iproute2 systemd dpkg-dev adduser util-linux chromium haproxy
  clang-14 clang-format-14 libclang-rt-14-dev snakemake slurm-wlm munge)
# Container tasks (docs/containers.md): podman with runc (crun refuses this host's cgroup hybrid),
# catatonit (podman --init), skopeo (pins tags to digests), docker-registry (`hangar dev
# --registry`, tests) and busybox-static (the tests' images). With --test, or alone with --containers.
container_pkgs=(podman runc catatonit skopeo docker-registry busybox-static)

want=("${build_pkgs[@]}")
if [[ "${1:-}" == "--test" ]]; then want+=("${test_pkgs[@]}" "${container_pkgs[@]}"); fi
if [[ "${1:-}" == "--containers" ]]; then want+=("${container_pkgs[@]}"); fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm (for the report's chart library) may come from Debian or be on the machine already
# from another source (nodesource's nodejs carries npm; Debian's npm would conflict with it): only
# when no npm is on PATH do we ask Debian for both.
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then missing+=(nodejs npm); fi
if [[ ${#missing[@]} -eq 0 ]]; then exit 0; fi

echo "installing: ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# Package scripts must not start system-wide daemons (munge, slurmctld, slurmd, postgresql,
# haproxy): tests start their own under their own folders. While installing, invoke-rc.d asks
# policy-rc.d whether to start a service; 101 means no. Removed afterwards when we created it.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  created_policy=1
fi
remove_policy() { if [[ $created_policy -eq 1 ]]; then $SUDO rm -f "$policy"; fi; }
trap remove_policy EXIT
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
