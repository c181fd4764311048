#!/usr/bin/env bash
# The upgrade test (docs/operations.md, "Versions and upgrades"): the previous release and this
# one, an HA pair of controllers on PostgreSQL and four agents with fake GPUs under running jobs,
# upgraded in the documented order -- the standby, a handover, the old leader, then the agents one
# by one -- and then checked: no job lost, none started twice, every task that ran before the
# upgrade kept running through it (its own start and end marks), none was signalled to checkpoint.
# Then a skew outside the policy: agents claiming 0.3.0 (newer than the controller) and 0.0.9 (two
# minor versions behind it) are refused by the new controller with the policy's sentence.
#
#   bench/upgrade.sh [--from REV]      (default: d8ec821~1, release 0.1.0)
#
# Builds this checkout's `hangar` (scripts/build.sh) and REV's in a git worktree of its own under
# build/upgrade/old-src, at nice 10 with ccache where the machine has it (so only the files that
# changed since REV miss the cache). Runs everything on 127.0.0.1 in a folder under /tmp that it
# removes on exit (HANGAR_KEEP_TEST_DIRS=1 keeps it). Prints a JSON summary; exits 1 when a check
# failed. Needs PostgreSQL's server binaries (/usr/lib/postgresql/*/bin, or $HANGAR_POSTGRES_BIN),
# psql, curl and python3. Outside CI's run: the old build does not fit its time.
# HANGAR_UPGRADE_NEW=BINARY takes that binary as the new release instead of building this checkout.
set -euo pipefail
from=d8ec821~1
while [ $# -gt 0 ]; do
  case "$1" in
    --from) from="$2"; shift 2 ;;
    *) echo "usage: bench/upgrade.sh [--from REV]" >&2; exit 2 ;;
  esac
done
src=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "upgrade: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

# --- the two builds -------------------------------------------------------------------------
new="$src/build/src/hangar"
if [ -n "${HANGAR_UPGRADE_NEW:-}" ]; then
  new=$(realpath "$HANGAR_UPGRADE_NEW")
else
  say "building this checkout's hangar"
  (cd "$src" && nice -n 10 scripts/build.sh hangar > /dev/null)
fi
old_src="$src/build/upgrade/old-src"
if [ ! -d "$old_src" ]; then
  mkdir -p "$src/build/upgrade"
  git -C "$src" worktree add --detach "$old_src" "$from" > /dev/null
else
  git -C "$old_src" checkout --quiet --detach "$from"
fi
say "building $from's hangar in $old_src"
(cd "$old_src" && nice -n 10 scripts/build.sh hangar > /dev/null)
old="$old_src/build/src/hangar"
old_version=$("$old" --version)
new_version=$("$new" version)
say "old: $old_version, new: $new_version"

# --- a folder, and everything started in it stopped on exit --------------------------------------
run=$(mktemp -d /tmp/hangar-upgrade-XXXXXX)
chmod 0711 "$run"
declare -A agent_pid ctl_pid
pg_pid=0
cleanup() {
  set +e
  # The shell's own "Killed" notices of the processes stopped here are noise.
  exec 3>&2 2> /dev/null
  for p in "${agent_pid[@]}" "${ctl_pid[@]}"; do kill -9 "$p" 2> /dev/null; done
  # Tasks still running (a failed run): their process groups, from their start marks.
  [ -f "$run/marks" ] && awk '$1 == "start" {print $8}' "$run/marks" | while read -r p; do
    kill -9 -- "-$p" 2> /dev/null
  done
  [ "$pg_pid" != 0 ] && kill -INT "$pg_pid" 2> /dev/null && sleep 1
  wait 2> /dev/null
  if [ -z "${HANGAR_KEEP_TEST_DIRS:-}" ]; then rm -rf "$run"; else say "kept $run" 2>&3; fi
}
trap cleanup EXIT
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
json() { python3 -c "import json, sys; d = json.load(sys.stdin); print($1)"; }

# --- PostgreSQL, as tests/integration/ha_cluster.cc starts it (as nobody when run as root) -------
pg_bin=${HANGAR_POSTGRES_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -1)}
[ -x "$pg_bin/initdb" ] || fail "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin; install them or set HANGAR_POSTGRES_BIN"
as_pg=()
mkdir -p "$run/pg"
if [ "$(id -u)" = 0 ]; then
  chown nobody "$run/pg"
  as_pg=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups)
fi
"${as_pg[@]}" "$pg_bin/initdb" -D "$run/pg/data" -U hangar -A trust -E UTF8 --locale=C --no-sync > "$run/pg/initdb.log" 2>&1 ||
  fail "initdb failed: $(tail -3 "$run/pg/initdb.log")"
pg_port=$(free_port)
"${as_pg[@]}" "$pg_bin/postgres" -D "$run/pg/data" -p "$pg_port" -k "$run/pg" -c listen_addresses=127.0.0.1 \
  -c fsync=off -c max_connections=40 > "$run/pg/postgres.log" 2>&1 &
pg_pid=$!
sql() { psql -X -A -t -q "postgres://hangar@127.0.0.1:$pg_port/${2:-hangar}" -c "$1"; }
for _ in $(seq 300); do sql "SELECT 1" postgres > /dev/null 2>&1 && break; sleep 0.2; done
sql "CREATE DATABASE hangar" postgres > /dev/null || fail "PostgreSQL did not start: $(tail -3 "$run/pg/postgres.log")"
store="postgres://hangar@127.0.0.1:$pg_port/hangar"

# --- the cluster: four nodes of 8 fake GPUs under one leaf ---------------------------------------
nodes=(node-1 node-2 node-3 node-4)
{
  printf 'name: upgrade\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n'
  printf 'fabric:\n  spines:\n    - name: spine-0\n      leaves:\n        - name: leaf-0\n          nodes:\n'
  for n in "${nodes[@]}"; do printf '            - {name: %s}\n' "$n"; done
} > "$run/cluster.yaml"
api_port=("$(free_port)" "$(free_port)")
agent_port=("$(free_port)" "$(free_port)")
agents_list="127.0.0.1:${agent_port[0]},127.0.0.1:${agent_port[1]}"

api() { echo "http://127.0.0.1:${api_port[$1]}"; }
role() { curl -s -m 2 "$(api "$1")/v1/leader" 2> /dev/null | json 'd.get("role", "")' 2> /dev/null || true; }
leader() {
  for i in 0 1; do [ "$(role "$i")" = leader ] && { echo "$i"; return; }; done
  echo -1
}
wait_leader() {
  local l
  for _ in $(seq 300); do l=$(leader); [ "$l" != -1 ] && { echo "$l"; return; }; sleep 0.1; done
  echo -1
}
# start_controller I BINARY: controller I on its own ports, up once it answers GET /v1/leader.
start_controller() {
  "$2" controller --cluster "$run/cluster.yaml" --store "$store" --api "127.0.0.1:${api_port[$1]}" \
    --agents "127.0.0.1:${agent_port[$1]}" --port-file "$run/ctl-$1.json" --auth none --insecure \
    --name "ctl-$1" --lease 1500ms --lease-renew 300ms --lease-poll 100ms --standby-follow 250ms \
    --checkpoint-root "$run/checkpoints" >> "$run/ctl-$1.log" 2>&1 &
  ctl_pid[$1]=$!
  for _ in $(seq 400); do
    [ -n "$(role "$1")" ] && return 0
    kill -0 "${ctl_pid[$1]}" 2> /dev/null || fail "controller $1 exited: $(tail -5 "$run/ctl-$1.log")"
    sleep 0.05
  done
  fail "controller $1 did not start: $(tail -5 "$run/ctl-$1.log")"
}
# stop PID: SIGTERM, and wait until it has exited.
stop() {
  kill -TERM "$1"
  for _ in $(seq 300); do kill -0 "$1" 2> /dev/null || { wait "$1" 2> /dev/null || true; return; }; sleep 0.1; done
  fail "process $1 did not exit within 30 s of SIGTERM"
}
get() { curl -s -m 5 "$(api "$(leader)")$1"; }
connected() { get /healthz | json 'd.get("agents", 0)' 2> /dev/null || echo 0; }
# start_agent NODE BINARY
start_agent() {
  "$2" agent --controller "$agents_list" --node "$1" --cluster "$run/cluster.yaml" \
    --state-dir "$run/agents/$1" --insecure >> "$run/agent-$1.log" 2>&1 &
  agent_pid[$1]=$!
}
wait_agents() {
  for _ in $(seq 600); do [ "$(connected)" = "${#nodes[@]}" ] && return 0; sleep 0.1; done
  fail "the agents did not all connect: $(tail -3 "$run/ctl-$(leader).log")"
}
wait_standby_ready() {
  for _ in $(seq 300); do
    [ "$(curl -s -m 2 "$(api "$1")/v1/leader" | json 'd.get("following", {}).get("ready", False)')" = True ] && return 0
    sleep 0.1
  done
  fail "standby $1's copy of the store was not ready within 30 s"
}

# --- jobs: tasks mark their start and end (and any checkpoint signal) in $run/marks --------------
cat > "$run/task.sh" << EOF
#!/bin/sh
# task.sh hold|SECONDS: runs until \$run/release exists, or SECONDS.
M="\$HANGAR_NODE \$HANGAR_JOB_ID \$HANGAR_TASK_INDEX \$HANGAR_ATTEMPT \${CUDA_VISIBLE_DEVICES:-none}"
echo "start \$M \$(date +%s%N) \$\$" >> "$run/marks"
trap 'echo "checkpoint \$M \$(date +%s%N) \$\$" >> "$run/marks"' USR1
trap 'echo "term \$M \$(date +%s%N) \$\$" >> "$run/marks"; exit 143' TERM
if [ "\$1" = hold ]; then
  while [ ! -f "$run/release" ]; do sleep 0.2 & wait \$!; done
else
  sleep "\$1" & wait \$!
fi
echo "end \$M \$(date +%s%N) \$\$" >> "$run/marks"
EOF
held=()
flow=()
# submit NAME REPLICAS GPUS ARG [CHECKPOINT]: the job's id, through the leader.
submit() {
  local spec="name: $1
" key="upgrade-$1-$RANDOM$RANDOM" id=""
  [ -n "${5:-}" ] && spec+="checkpoint: {signal: SIGUSR1, grace: 60s}
"
  spec+="tasks:
  - replicas: $2
    gpus: $3
    command: [\"/bin/sh\", \"$run/task.sh\", \"$4\"]
"
  for _ in $(seq 100); do
    id=$(curl -s -m 5 -X POST -H 'Content-Type: application/yaml' -H "Idempotency-Key: $key" \
      --data-binary "$spec" "$(api "$(leader)")/v1/jobs" | json 'd.get("id", "")' 2> /dev/null || true)
    [ -n "$id" ] && { echo "$id"; return; }
    sleep 0.2
  done
  fail "no controller accepted job $1"
}
state() { get "/v1/jobs/$1" | json 'd.get("state", "")' 2> /dev/null || true; }
# A few short jobs through each step of the upgrade, in the GPUs the held jobs leave free.
flow_jobs() { for k in 1 2; do flow+=("$(submit "flow-$1-$k" 1 1 1)"); done; }

start=$(date +%s%N)
start_controller 0 "$old"
[ "$(wait_leader)" = 0 ] || fail "the first controller did not lead"
start_controller 1 "$old"
for n in "${nodes[@]}"; do start_agent "$n" "$old"; done
wait_agents
for _ in $(seq 600); do
  ready=0
  for n in "${nodes[@]}"; do [ "$(get "/v1/nodes/$n" | json 'd.get("state", "")')" = ready ] && ready=$((ready + 1)); done
  [ "$ready" = 4 ] && break
  sleep 0.2
done
[ "$ready" = 4 ] || fail "only $ready of the 4 nodes became ready: $(get /v1/nodes)"
say "HA pair and four agents at $old_version; submitting jobs"
held+=("$(submit gang-1 2 6 hold)" "$(submit gang-2 2 6 hold)")
for k in 1 2 3 4; do held+=("$(submit "ckpt-$k" 1 1 hold checkpoint)"); done
tasks_held=8
for _ in $(seq 600); do
  n=$(grep -c '^start' "$run/marks" 2> /dev/null || true)
  [ "${n:-0}" -ge "$tasks_held" ] && break
  sleep 0.2
done
for id in "${held[@]}"; do [ "$(state "$id")" = running ] || fail "job $id is $(state "$id"), not running"; done
flow_jobs before

# --- the upgrade, in the documented order --------------------------------------------------------
upgrade_start=$(date +%s%N)
restarts=0
wait_standby_ready 1
say "1/4: the standby (ctl-1) to $new_version"
stop "${ctl_pid[1]}"
start_controller 1 "$new"
restarts=$((restarts + 1))
wait_standby_ready 1
flow_jobs standby
say "2/4: handover (SIGTERM to the old leader, ctl-0)"
handover_start=$(date +%s%N)
stop "${ctl_pid[0]}"
[ "$(wait_leader)" = 1 ] || fail "the upgraded standby did not take over"
handover_ms=$((($(date +%s%N) - handover_start) / 1000000))
wait_agents
flow_jobs handover
say "3/4: the old leader (ctl-0) to $new_version, as the standby"
start_controller 0 "$new"
restarts=$((restarts + 1))
[ "$(role 0)" = standby ] || fail "the upgraded ctl-0 is $(role 0), not a standby"
# --- between 3/4 and 4/4: new controllers, old agents; capabilities negotiated ---------------------
# The old agents name no features: a session into their tasks is refused with the sentence, and a
# job that needs a terminal waits (agent-version) until an upgraded agent has room for it.
say "mixed: controllers at $new_version, agents at $old_version"
problems=()
capabilities=0
exec_out=$(HANGAR_URL="$(api "$(leader)")" "$new" exec "${held[2]}" -- true 2>&1 || true)
if [[ "$exec_out" == *"which cannot open sessions into tasks"*"upgrade its agent"* ]]; then
  capabilities=$((capabilities + 1))
  say "exec into an old agent's task refused: $exec_out"
else
  problems+=("exec into a task of an old agent was not refused with the capability sentence (saw: $exec_out)")
fi
terminal_job=""
for _ in $(seq 100); do
  terminal_job=$(curl -s -m 5 -X POST -H 'Content-Type: application/yaml' \
    --data-binary $'name: shell\nterminal: true\ntasks:\n  - {gpus: 1, command: ["/bin/sh", "-c", "exit 0"]}\n' \
    "$(api "$(leader)")/v1/jobs" | json 'd.get("id", "")' 2> /dev/null || true)
  [ -n "$terminal_job" ] && break
  sleep 0.2
done
[ -n "$terminal_job" ] || fail "no controller accepted the terminal job"
rule=""
for _ in $(seq 100); do
  rule=$(get "/v1/jobs/$terminal_job" | json 'd.get("reason_rule", "")' 2> /dev/null || true)
  [ "$rule" = agent-version ] && break
  sleep 0.1
done
if [ "$rule" = agent-version ] && [ "$(state "$terminal_job")" = pending ]; then
  capabilities=$((capabilities + 1))
  say "the terminal job waits: $(get "/v1/jobs/$terminal_job" | json 'd.get("reason", "")')"
else
  problems+=("the terminal job is $(state "$terminal_job") ($rule), not pending for agent-version while every agent is old")
fi
flow+=("$terminal_job")
say "4/4: the agents one by one"
adopted=0
for n in "${nodes[@]}"; do
  stop "${agent_pid[$n]}"
  before=$(grep -c "adopted task" "$run/agent-$n.log" || true)
  start_agent "$n" "$new"
  restarts=$((restarts + 1))
  wait_agents
  for _ in $(seq 300); do [ "$(get "/v1/nodes/$n" | json 'd.get("state", "")')" = ready ] && break; sleep 0.1; done
  adopted=$((adopted + $(grep -c "adopted task" "$run/agent-$n.log" || true) - before))
  flow_jobs "$n"
done
upgrade_end=$(date +%s%N)
say "upgraded in $(((upgrade_end - upgrade_start) / 1000000)) ms; releasing the held jobs"

# --- the checks ----------------------------------------------------------------------------------
touch "$run/release"
all=("${held[@]}" "${flow[@]}")
ids=$(IFS=,; echo "${all[*]}")
for _ in $(seq 600); do
  [ "$(sql "SELECT count(*) FROM jobs WHERE id IN ($ids) AND state IN ('succeeded','failed','cancelled','timed_out')")" = "${#all[@]}" ] && break
  sleep 0.2
done
lost=$(sql "SELECT ${#all[@]} - count(*) FROM jobs WHERE id IN ($ids) AND state = 'succeeded'")
# A job that did not succeed, with the last word of its events (why it ended).
# An adopted task's exit status is unknown to the agent that adopted it (it is not its child): it
# reports -1, and the job fails.
unknown_exit=$(sql "SELECT count(DISTINCT subject) FROM events WHERE kind = 'job' AND subject IN (SELECT 'job/' || id FROM jobs WHERE id IN ($ids)) AND message LIKE 'failed: task % exited with code -1'")
[ "$lost" = 0 ] || problems+=("$lost jobs did not succeed: $(sql "SELECT 'job ' || j.id || ' ' || (SELECT message FROM events e WHERE e.subject = 'job/' || j.id ORDER BY e.id DESC LIMIT 1) FROM jobs j WHERE j.id IN ($ids) AND j.state <> 'succeeded' ORDER BY j.id" | tr '\n' ';')")
ended_twice=$(sql "SELECT count(*) FROM (SELECT subject FROM events WHERE kind = 'job' AND (message = 'succeeded' OR message = 'cancelled' OR message LIKE 'failed:%' OR message LIKE 'timed out:%') GROUP BY subject HAVING count(*) > 1) t")
[ "$ended_twice" = 0 ] || problems+=("$ended_twice jobs ended more than once")
# From the marks: each (job, task) started once; no task was stopped or signalled to checkpoint;
# every held task started before the upgrade and was still running when it was over (its end, or
# its stop, marked after it).
started_twice=$(awk '$1 == "start" {n[$3 "/" $4]++} END {c = 0; for (k in n) if (n[k] > 1) c++; print c}' "$run/marks")
[ "$started_twice" = 0 ] || problems+=("$started_twice tasks started more than once")
interrupted=$(grep -c -E '^(term|checkpoint)' "$run/marks" || true)
[ "$interrupted" = 0 ] || problems+=("$interrupted tasks were stopped or signalled: $(grep -E '^(term|checkpoint)' "$run/marks" | head -3 | tr '\n' ';')")
spanned=$(awk -v a="$upgrade_start" -v b="$upgrade_end" -v ids="${held[*]}" '
  BEGIN {split(ids, l, " "); for (i in l) held[l[i]] = 1}
  ($3 in held) && $1 == "start" {s[$3 "/" $4] = $7}
  ($3 in held) && ($1 == "end" || $1 == "term") {e[$3 "/" $4] = $7}
  END {c = 0; for (k in s) if (s[k] < a && (k in e) && e[k] > b) c++; print c}' "$run/marks")
[ "$spanned" = "$tasks_held" ] || problems+=("only $spanned of the $tasks_held held tasks kept running through the whole upgrade")
tasks=$(grep -c '^start' "$run/marks")
ended=$(grep -c '^end' "$run/marks")
[ "$tasks" = "$ended" ] || problems+=("$tasks tasks started, $ended ended")

# --- a skew outside the policy, refused with its sentence -----------------------------------------
# Agents one minor version newer than the controller, and two older: copies of the new and the old
# binary with the version their agents send rewritten in place (the same length).
read -r newer older < <(python3 - "$new_version" << 'EOF'
import sys
major, minor, patch = (int(x) for x in sys.argv[1].split()[-1].split("."))
print(f"{major}.{minor + 1}.{patch}", f"{major}.{max(minor - 2, 0)}.9")
EOF
)
say "skew: agents claiming $newer and $older against the $new_version leader"
python3 - "$new" "$run/hangar-$newer" "${new_version#hangar }" "$newer" "$old" "$run/hangar-$older" "${old_version#hangar }" "$older" << 'EOF'
import sys
a = sys.argv[1:]
for src, dst, was, now in (a[0:4], a[4:8]):
    was, now = was.encode() + b"\0", now.encode() + b"\0"
    data = open(src, "rb").read()
    if len(was) != len(now) or data.count(was) != 1:
        sys.exit(f"{src}: cannot rewrite its version {was!r} as {now!r} in place")
    open(dst, "wb").write(data.replace(was, now))
EOF
chmod +x "$run/hangar-$newer" "$run/hangar-$older"
[ "$("$run/hangar-$newer" version)" = "hangar $newer" ] || fail "the $newer copy says $("$run/hangar-$newer" version)"
stop "${agent_pid[node-4]}"
skew_refused=0
for fake in "$newer" "$older"; do
  case $fake in
    "$newer") want="the agent is newer than its controller" fix="upgrade the controller first" ;;
    "$older") want="the controller is more than one minor version ahead" fix="upgrade the agent" ;;
  esac
  "$run/hangar-$fake" agent --controller "$agents_list" --node node-4 --cluster "$run/cluster.yaml" \
    --state-dir "$run/skew-$fake" --insecure > "$run/agent-skew-$fake.log" 2>&1 &
  agent_pid[skew]=$!
  line=""
  for _ in $(seq 200); do
    line=$(grep -h "refused: the agent runs hangar $fake" "$run/agent-skew-$fake.log" "$run"/ctl-*.log | head -1 || true)
    [ -n "$line" ] && break
    sleep 0.1
  done
  stop "${agent_pid[skew]}"
  unset 'agent_pid[skew]'
  if [[ "$line" == *"$want"*"; $fix"* ]]; then
    skew_refused=$((skew_refused + 1))
    say "refused as it should be: ${line#*refused: }"
  else
    problems+=("the $fake agent was not refused with the policy's sentence (saw: ${line:-nothing})")
  fi
done

took_s=$(((upgrade_end - start) / 1000000000))
cat << EOF
{"from": "$old_version", "to": "$new_version", "jobs": ${#all[@]}, "held_jobs": ${#held[@]},
 "flow_jobs": ${#flow[@]}, "tasks": $tasks, "held_tasks_kept_running": $spanned,
 "jobs_lost": $lost, "jobs_ended_twice": $ended_twice, "tasks_started_twice": $started_twice,
 "tasks_interrupted": $interrupted,
 "jobs_failed_exit_status_unknown": $unknown_exit, "restarts": $restarts, "tasks_adopted": $adopted,
 "handover_ms": $handover_ms, "upgrade_ms": $(((upgrade_end - upgrade_start) / 1000000)),
 "skew_refused": $skew_refused, "capability_checks_passed": $capabilities, "setup_and_upgrade_s": $took_s}
EOF
if [ ${#problems[@]} -gt 0 ]; then
  for p in "${problems[@]}"; do say "problem: $p"; done
  exit 1
fi
say "ok"
