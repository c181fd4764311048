#!/usr/bin/env bash
# Stops the Slurm that start.sh started under DIR: cancels its jobs, stops each daemon it recorded
# in DIR/pids/ (by PID, checked against the process's start time), then any slurmstepd or job
# process of this Slurm still left; verifies nothing remains. Safe to run when nothing runs.
#
#   bench/peers/slurm/stop.sh DIR [--clean]     --clean also removes DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
slurm_bench_dir "${1:-}"
d=$SLURM_BENCH_DIR
clean=0
[[ ${2:-} == --clean ]] && clean=1
mkdir -p "$d/pids"

# Signals pids/NAME when it is still the process we started.
signal_daemon() {
  pid_alive "$2" && kill "-$1" "$(pid_of "$2")" 2>/dev/null || true
}

# Waits up to $1 tenths of a second for the recorded daemons named by glob $2 to exit.
wait_daemons() {
  local f any
  for _ in $(seq "$1"); do
    any=0
    for f in "$d"/pids/$2; do [[ -e $f ]] && pid_alive "$(basename "$f")" && any=1 && break; done
    [[ $any -eq 0 ]] && return 0
    sleep 0.1
  done
  return 1
}

if pid_alive slurmctld; then
  scancel --quiet --full --user="$(id -un)" 2>/dev/null || true
  for _ in $(seq 100); do [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break; sleep 0.2; done
fi
for f in "$d"/pids/slurmd-*; do [[ -e $f ]] && signal_daemon TERM "$(basename "$f")"; done
signal_daemon TERM slurmctld
wait_daemons 100 'slurm*' || true
signal_daemon TERM munged
if ! wait_daemons 50 '*'; then
  for f in "$d"/pids/*; do [[ -e $f ]] && signal_daemon KILL "$(basename "$f")"; done
  wait_daemons 50 '*' || true
fi

# slurmstepd and job processes that outlived their daemons.
left=$(pids_under_this_slurm)
if [[ -n $left ]]; then
  kill -TERM $left 2>/dev/null || true
  sleep 1
  left=$(pids_under_this_slurm)
  [[ -z $left ]] || kill -KILL $left 2>/dev/null || true
  sleep 0.2
fi

still=""
for f in "$d"/pids/*; do
  [[ -e $f ]] || continue
  if pid_alive "$(basename "$f")"; then still+=" $(basename "$f")($(pid_of "$(basename "$f")"))"; else rm -f "$f"; fi
done
left=$(pids_under_this_slurm | tr '\n' ' ')
if [[ -n $still || -n ${left// /} ]]; then
  echo "slurm: could not stop everything under $d:$still ${left}" >&2
  exit 1
fi
rm -f "$d/munge-run/munge.socket.2" "$d/munge-run/munge.socket.2.lock"
if [[ $clean -eq 1 ]]; then
  rm -rf "$d"
  echo "slurm: stopped; removed $d"
else
  echo "slurm: stopped; nothing of it is running (files kept in $d)"
fi
