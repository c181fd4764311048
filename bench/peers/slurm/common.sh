# Shared by configure.sh, start.sh and stop.sh (sourced, not run). Everything lives under one
# folder, $SLURM_BENCH_DIR, with its own slurm.conf; nothing is written anywhere else.
#
# Layout:  etc/ (slurm.conf, topology.conf, gres.conf)   munge/ (key, private)   munge-run/ (socket)
#          dev/ (fake GPU device files)   spool/   log/   pids/ (one "PID STARTTIME" file per daemon)

SLURM_NODES=${SLURM_NODES:-64}          # nodes n001..nNNN, 8 GPUs each
SLURM_GPUS_PER_NODE=8
SLURM_LEAVES=4                          # leaf switches under one spine (fewer for fewer nodes)

# Sets SLURM_BENCH_DIR (absolute) and SLURM_CONF from the first argument.
slurm_bench_dir() {
  if [[ -z ${1:-} ]]; then
    echo "usage: $0 DIR   (the folder that holds this Slurm: config, state, logs, sockets)" >&2
    exit 2
  fi
  mkdir -p "$1"
  SLURM_BENCH_DIR=$(cd "$1" && pwd)
  export SLURM_CONF=$SLURM_BENCH_DIR/etc/slurm.conf
}

node_name() { printf 'n%03d' "$1"; }

# The start time of a process in clock ticks since boot (field 22 of /proc/PID/stat): with the PID
# it names one process, even after the PID is reused.
proc_start() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  set -- $stat
  echo "${20}"
}

# Records a process this script started: pids/NAME holds "PID STARTTIME".
remember_pid() {
  local start
  start=$(proc_start "$2") || { echo "$1 (pid $2) exited at once; see $SLURM_BENCH_DIR/log/" >&2; return 1; }
  echo "$2 $start" >"$SLURM_BENCH_DIR/pids/$1"
}

# True when pids/NAME names a process that is still the one we started.
pid_alive() {
  local f=$SLURM_BENCH_DIR/pids/$1 pid start
  [[ -f $f ]] || return 1
  read -r pid start <"$f"
  [[ $(proc_start "$pid" 2>/dev/null) == "$start" ]]
}

pid_of() { local pid _; read -r pid _ <"$SLURM_BENCH_DIR/pids/$1"; echo "$pid"; }

# This shell and its ancestors: never to be signalled, whatever their environment says.
self_and_ancestors() {
  local pid=$BASHPID
  while [[ $pid -gt 1 ]]; do
    echo "$pid"
    pid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || break
  done
}

# True when process $1 is a descendant of this script ($$): the subshells of its own pipelines are
# forks that carry its environment, marker included, when start.sh's failure path runs stop.sh.
descends_from_self() {
  local pid=$1
  while [[ $pid -gt 1 ]]; do
    pid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || return 1
    [[ -n $pid ]] || return 1
    [[ $pid -eq $$ ]] && return 0
  done
  return 1
}

# PIDs of the processes this folder's Slurm started that are not in pids/: slurmstepd (slurmd's
# children inherit HANGAR_SLURM_BENCH_DIR from it, which start.sh sets) and job processes (they
# carry SLURM_JOB_ID and this SLURM_CONF in their environment).
pids_under_this_slurm() {
  local keep f pid
  keep=" $(self_and_ancestors | tr '\n' ' ') "
  {
    grep -lzxF "HANGAR_SLURM_BENCH_DIR=$SLURM_BENCH_DIR" /proc/[0-9]*/environ 2>/dev/null || true
    for f in $(grep -lzxF "SLURM_CONF=$SLURM_CONF" /proc/[0-9]*/environ 2>/dev/null); do
      if grep -qz '^SLURM_JOB_ID=' "$f" 2>/dev/null; then echo "$f"; fi
    done
  } | while read -r f; do
    pid=${f#/proc/}
    pid=${pid%/environ}
    [[ $keep == *" $pid "* ]] || descends_from_self "$pid" || echo "$pid"
  done | sort -un
  return 0
}
