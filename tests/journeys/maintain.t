Rolling maintenance (docs/maintenance.md) on `hangar dev`'s four nodes, whose agents allow
maintenance commands: two nodes at a time, each node's command run by its agent and its output
kept, the run stopping at the node whose command fails, which stays drained; the start is in the
audit log.

  $ . "$TESTDIR/journey.sh"
  $ dev_start --allow-maintenance-commands
  $ wait_for 30 '[ "$(hangar nodes | grep -c " ready ")" = 4 ]'

  $ hangar maintain --nodes all --batch 2 --wait --run 'echo "updated $HANGAR_NODE"; [ "$HANGAR_NODE" != node-3 ] || { echo "board not supported" >&2; exit 4; }' > run.txt
  error: maintenance run 1 failed: node-3: its command exited with status 4 (last line: board not supported)
  [1]
  $ head -1 run.txt
  maintenance run 1: failed (node-3: its command exited with status 4 (last line: board not supported))
  $ awk '$1 ~ /^node-/ {print $1, $2, $3}' run.txt
  node-1 1 done
  node-2 1 done
  node-3 2 failed
  node-4 2 done
  $ sed -n '/^--- output of node-3/,$p' run.txt
  --- output of node-3 ---
  updated node-3
  board not supported
  $ hangar maintain status 1 --show-output | grep -A1 -- '--- output of node-1'
  --- output of node-1 ---
  updated node-1
  $ hangar nodes | awk '$1 == "node-3" || $1 == "node-4" {print $1, $2}'
  node-3 drained
  node-4 ready
  $ hangar maintain list | awk 'NR > 1 {print $1, $2, $3, $4}'
  1 failed all 2/2
  $ hangar audit | grep -c 'POST /v1/maintenance '
  1
  $ hangar undrain node-3 > /dev/null
  $ dev_stop
