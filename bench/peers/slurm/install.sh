#!/usr/bin/env bash
# Installs Debian's Slurm (slurm-wlm 22.05: slurmctld, slurmd, sbatch, ...) and MUNGE when they
# are missing. Package scripts are not allowed to start the system-wide daemons: the benchmark
# runs its own, under its own folder (see configure.sh and start.sh).
#
#   bench/peers/slurm/install.sh
set -euo pipefail

need=()
for cmd in slurmctld slurmd sbatch squeue munged mungekey; do
  command -v "$cmd" >/dev/null 2>&1 || need=(slurm-wlm munge)
done
if [[ ${#need[@]} -eq 0 ]]; then
  echo "slurm: already installed ($(slurmctld -V))"
  exit 0
fi

sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
# While installing, invoke-rc.d asks policy-rc.d whether to start a service; 101 means no.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod 755 "$policy"
  created_policy=1
fi
cleanup() { [[ $created_policy -eq 0 ]] || "${sudo[@]}" rm -f "$policy"; }
trap cleanup EXIT

"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"
echo "slurm: installed ($(slurmctld -V))"
