#!/usr/bin/env bash
# Starts the Slurm that configure.sh wrote under DIR: munged, slurmctld and one slurmd per node,
# all on 127.0.0.1, each recorded in DIR/pids/ for stop.sh; then waits until every node is idle.
# Does nothing for a daemon that is already running.
#
#   bench/peers/slurm/start.sh DIR        then: SLURM_CONF=DIR/etc/slurm.conf sbatch ...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
slurm_bench_dir "${1:-}"
d=$SLURM_BENCH_DIR
[[ -f $SLURM_CONF ]] || { echo "no $SLURM_CONF; run $here/configure.sh $d first" >&2; exit 1; }
mkdir -p "$d/pids"
# Marks the daemons (and the slurmstepd they fork) as this folder's, for stop.sh's sweep.
export HANGAR_SLURM_BENCH_DIR=$d

# Starts "$@" in the background, in its own session, as pids/NAME.
launch() {
  local name=$1
  shift
  pid_alive "$name" && return 0
  setsid "$@" </dev/null >>"$d/log/$name.out" 2>&1 &
  remember_pid "$name" $!
}

stop_on_failure() {
  echo "slurm: start failed; stopping what was started (logs: $d/log/)" >&2
  "$here/stop.sh" "$d" >&2 || true
}
trap stop_on_failure ERR

launch munged munged --foreground --force --socket="$d/munge-run/munge.socket.2" \
  --key-file="$d/munge/munge.key" --log-file="$d/log/munged.log" --pid-file="$d/munge-run/munged.pid" \
  --seed-file="$d/munge/munged.seed"
for _ in $(seq 100); do [[ -S $d/munge-run/munge.socket.2 ]] && break; sleep 0.1; done
[[ -S $d/munge-run/munge.socket.2 ]] || { echo "munged did not open its socket; see $d/log/munged.log" >&2; false; }

launch slurmctld slurmctld -D -c -i
for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
scontrol ping | grep -q UP || { echo "slurmctld did not answer; see $d/log/slurmctld.log" >&2; false; }

for ((n = 1; n <= SLURM_NODES; ++n)); do
  node=$(node_name "$n")
  launch "slurmd-$node" slurmd -D -N "$node"
done

# Nodes register as they come up; wait until all of them are idle.
idle=0
for _ in $(seq 300); do
  idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
  [[ $idle -ge $SLURM_NODES ]] && break
  sleep 0.2
done
if [[ $idle -lt $SLURM_NODES ]]; then
  echo "only $idle of $SLURM_NODES nodes came up idle within 60 s:" >&2
  sinfo -N -o '%N %T %E' >&2 || true
  false
fi
trap - ERR
echo "slurm: up under $d: slurmctld pid $(pid_of slurmctld), $SLURM_NODES slurmd, $(sinfo -h -o '%G' | head -1) per node"
