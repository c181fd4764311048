#!/usr/bin/env bash
# Writes a 64-node x 8-GPU Slurm under DIR: slurm.conf (select/cons_tres, sched/backfill, its own
# ports on 127.0.0.1), topology.conf (topology/tree: 4 leaf switches of 16 nodes under one spine),
# gres.conf (8 GPUs per node whose device files are links to /dev/null), a MUNGE key, and the
# folders for state, logs and sockets. Every node is a `slurmd -N nNNN` on 127.0.0.1 with a port
# of its own (Debian's build has no multiple-slurmd; this works without it).
#
#   bench/peers/slurm/configure.sh DIR
#
# Rerunning rewrites the configuration (and picks ports again) unless this Slurm is running.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
slurm_bench_dir "${1:-}"
d=$SLURM_BENCH_DIR

if pid_alive slurmctld; then
  echo "slurm: running under $d; leaving its configuration alone (stop.sh $d first to change it)"
  exit 0
fi
command -v slurmctld >/dev/null || { echo "Slurm is not installed; run $here/install.sh" >&2; exit 1; }

# A port for slurmctld and SLURM_NODES consecutive ones for the slurmds, none of them listening.
listening=" $(ss -Htln 2>/dev/null | awk '{n = split($4, a, ":"); printf "%s ", a[n]}') "
base=""
for try in $(seq 17000 200 29000); do
  ok=1
  for ((p = try; p <= try + SLURM_NODES; ++p)); do
    [[ $listening == *" $p "* ]] && { ok=0; break; }
  done
  if [[ $ok -eq 1 ]]; then base=$try; break; fi
done
[[ -n $base ]] || { echo "no free range of $((SLURM_NODES + 1)) ports on 127.0.0.1 in 17000-29000" >&2; exit 1; }
ctld_port=$base

rm -rf "$d/etc" "$d/spool" "$d/dev" "$d/log" "$d/munge-run"
mkdir -p "$d/etc" "$d/spool/ctld" "$d/dev" "$d/log" "$d/pids" "$d/munge" "$d/munge-run"
chmod 700 "$d/munge"        # munged refuses a key folder others can read
chmod 755 "$d/munge-run" "$d/log"   # ...and wants its socket folder readable by everyone
for ((n = 1; n <= SLURM_NODES; ++n)); do mkdir -p "$d/spool/$(node_name "$n")"; done
for ((g = 0; g < SLURM_GPUS_PER_NODE; ++g)); do ln -sf /dev/null "$d/dev/nvidia$g"; done
[[ -s $d/munge/munge.key ]] || mungekey --create --keyfile="$d/munge/munge.key" >/dev/null
chmod 600 "$d/munge/munge.key"

last=$(node_name "$SLURM_NODES")
# A small Slurm (the differential test's 2 to 4 nodes) has as many leaves as fit: one node at least.
((SLURM_NODES >= SLURM_LEAVES)) || SLURM_LEAVES=$SLURM_NODES
per_leaf=$((SLURM_NODES / SLURM_LEAVES))
cat >"$d/etc/slurm.conf" <<CONF
# Written by bench/peers/slurm/configure.sh: Slurm's defaults except where a fake node on one
# machine needs otherwise (no cgroups, no accounting daemon, config_overrides for CPUs).
ClusterName=hangarbench
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge-run/munge.socket.2
CredType=cred/munge
StateSaveLocation=$d/spool/ctld
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/spool/ctld/slurmctld.pid
SlurmdPidFile=$d/spool/%n/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
TopologyPlugin=topology/tree
GresTypes=gpu
ReturnToService=2
NodeName=n[001-${last#n}] NodeAddr=127.0.0.1 Port=[$((base + 1))-$((base + SLURM_NODES))] CPUs=64 Boards=1 SocketsPerBoard=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:$SLURM_GPUS_PER_NODE State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

{
  echo "# $SLURM_LEAVES leaf switches of $per_leaf nodes under one spine, as Hangar's cluster file."
  leaves=()
  for ((l = 0; l < SLURM_LEAVES; ++l)); do
    first=$(node_name $((l * per_leaf + 1)))
    lastn=$(node_name $(((l + 1) * per_leaf)))
    ((l < SLURM_LEAVES - 1)) || lastn=$last   # the last leaf takes what the division leaves
    echo "SwitchName=leaf-$l Nodes=n[${first#n}-${lastn#n}]"
    leaves+=("leaf-$l")
  done
  echo "SwitchName=spine-0 Switches=$(IFS=,; echo "${leaves[*]}")"
} >"$d/etc/topology.conf"

echo "NodeName=n[001-${last#n}] Name=gpu File=$d/dev/nvidia[0-$((SLURM_GPUS_PER_NODE - 1))]" >"$d/etc/gres.conf"
echo "slurm: configured $SLURM_NODES nodes x $SLURM_GPUS_PER_NODE GPUs under $d (SLURM_CONF=$SLURM_CONF; ports $base-$((base + SLURM_NODES)))"
