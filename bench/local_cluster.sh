# Sourced by the benchmark scripts that run a real controller and real agents on loopback
# (--auth none, plaintext, SQLite in a temporary folder that is removed on exit, with every
# process the script started).
#
#   local_cluster_init BUILD_DIR NAME   sets $hangar (BUILD_DIR's binary) and $root (a fresh folder
#                                       under /tmp); the script writes $root/cluster.yaml
#   local_cluster_start NODE...         starts the controller on free ports and an agent for each
#                                       NODE (extra agent flags in $agent_flags), waits until every
#                                       node is ready, and sets $url; logs in $root/*.log
# Processes the script starts itself and appends to $pids are stopped on exit too.

pids=()
agent_flags=()

local_cluster_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # An agent's stopping tasks may still write in its folder for a moment.
  for _ in 1 2 3 4 5; do rm -rf "$root" 2>/dev/null && break; sleep 0.5; done
}

local_cluster_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

local_cluster_init() {
  hangar=$(realpath "$1/src/hangar")
  root=$(mktemp -d "/tmp/hangar-$2-XXXXXX")
  trap local_cluster_cleanup EXIT
}

local_cluster_start() {
  local api agents n
  api=$(local_cluster_free_port)
  agents=$(local_cluster_free_port)
  url="http://127.0.0.1:$api"
  "$hangar" controller --cluster "$root/cluster.yaml" --api "127.0.0.1:$api" --agents "127.0.0.1:$agents" \
    --store "sqlite://$root/state.db" --auth none --insecure > "$root/controller.log" 2>&1 &
  pids+=($!)
  sleep 1
  for n in "$@"; do
    "$hangar" agent --controller "127.0.0.1:$agents" --node "$n" --cluster "$root/cluster.yaml" \
      --state-dir "$root/agent-$n" --insecure --stop-tasks-on-exit "${agent_flags[@]}" > "$root/agent-$n.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 150); do
    [ "$("$hangar" nodes --server "$url" 2>/dev/null | grep -c ready)" = "$#" ] && return 0
    sleep 0.1
  done
  echo "the local cluster did not become ready; see $root/controller.log" >&2
  return 1
}
