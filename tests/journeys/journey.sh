# Sourced by every journey (tests/journeys/*.t, run by cram): `hangar` on PATH is the build's,
# `hangar dev` started on free loopback ports, waits that poll the real CLI, and a stop that
# leaves nothing running. Everything lives in cram's temporary directory ($PWD).
set -u
export HANGAR_SRC="${HANGAR_SOURCE_DIR:?HANGAR_SOURCE_DIR names the source tree}"
export NO_COLOR=1
J_PY=/usr/bin/python3

# A free TCP port on 127.0.0.1 whose next `n` ports (default 1) are free as well.
free_port() {
  "$J_PY" - "${1:-1}" <<'PY'
import socket, sys, random
n = int(sys.argv[1])
def free(p):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
# Below the kernel's ephemeral range: a port there is never taken meanwhile as the local end of
# someone's outgoing connection (a CI run lost PostgreSQL's port that way).
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
top = low - n - 2 if low > 20000 + n + 2 else 60000
for _ in range(200):
    p = random.randint(15000 if top < 60000 else 20000, top)
    if all(free(p + i) for i in range(n + 1)):
        print(p); break
PY
}

# Polls a shell condition for at most `secs` seconds; fails (and says what) if it never holds.
wait_for() {
  local secs=$1; shift
  local end=$((SECONDS + secs))
  until eval "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $end ]; then echo "timed out after ${secs}s waiting for: $*"; return 1; fi
    sleep 0.2
  done
}

# The state of job $1 as `hangar job -o json` reports it.
job_state() {
  hangar job "$1" -o json 2>/dev/null | "$J_PY" -c 'import json,sys; print(json.load(sys.stdin)["state"])'
}

# Waits (at most $3 s, default 30) until job $1 is in state $2.
wait_job() {
  wait_for "${3:-30}" '[ "$(job_state '"$1"')" = '"$2"' ]' || { hangar job "$1"; return 1; }
}

# Waits until `hangar nodes` lists $1 nodes as ready (at most $2 s, default 30).
wait_ready() {
  wait_for "${2:-30}" '[ "$(hangar nodes -o json | '"$J_PY"' -c "import json,sys; print(sum(n[\"state\"] == \"ready\" for n in json.load(sys.stdin)[\"nodes\"]))")" -ge '"$1"' ]'
}

# Waits until no node holds a job's GPUs (at most $1 s, default 30): a cancelled job's GPUs stay
# held until its agent has seen its processes end.
wait_idle() {
  wait_for "${1:-30}" '[ "$(hangar nodes -o json | '"$J_PY"' -c "import json,sys; print(sum(n[\"gpus_free\"] != n[\"gpus\"] or len(n[\"jobs\"]) > 0 for n in json.load(sys.stdin)[\"nodes\"]))")" = 0 ]'
}

# Where people keep checkouts is a long path (a home folder, a few levels of src/): `hangar dev`
# runs in a folder under one of over 100 characters, which ./hangar-dev links to, so that a path
# limit (podman's runroot, a socket's 108 bytes) trips here and not first on a user's machine.
J_LONG="$PWD/home/a-person-with-a-long-account-name/src/github.com/an-organisation/hangar-checkouts/main"
mkdir -p "$J_LONG/hangar-dev" && ln -sfn "$J_LONG/hangar-dev" "$PWD/hangar-dev"

# Starts `hangar dev` in the long folder (./hangar-dev; args passed on), its output piped through
# tee as people do (`hangar dev | tee log`), and waits until its nodes are ready. HANGAR_URL
# points the CLI at it. DEV_PID, DEV_TEE, DEV_PORT (kept across restarts), DEV_OUT are set.
dev_start() {
  DEV_PORT=${DEV_PORT:-$(free_port 3)}
  DEV_RUNS=$((${DEV_RUNS:-0} + 1))
  DEV_OUT=$PWD/dev-$DEV_RUNS.out  # this run's output (dev-1.out, dev-2.out, ...)
  export HANGAR_URL=http://127.0.0.1:$DEV_PORT
  rm -f "$PWD/dev.pipe" && mkfifo "$PWD/dev.pipe"
  tee "$DEV_OUT" <"$PWD/dev.pipe" >/dev/null &
  DEV_TEE=$!
  hangar dev --dir "$J_LONG/hangar-dev" --port "$DEV_PORT" "$@" >"$PWD/dev.pipe" 2>&1 &
  DEV_PID=$!
  # Up, or gone (a refused cluster file, a port in use): said at once, not after the wait.
  wait_for 60 'grep -q "is up:" "$DEV_OUT" || ! kill -0 $DEV_PID' >/dev/null
  grep -q "is up:" "$DEV_OUT" || { tail -20 "$DEV_OUT"; return 1; }
}

# Ctrl-C at the terminal, as a person would: SIGINT to `hangar dev` and to the tee it writes
# through, which ends at once; waits for `hangar dev` to exit.
dev_stop() {
  kill -INT "$DEV_PID" "${DEV_TEE:-}" 2>/dev/null
  wait_for 20 '! kill -0 '"$DEV_PID" || { echo "hangar dev did not stop"; kill -KILL "$DEV_PID"; }
  wait "$DEV_PID" 2>/dev/null
  return 0
}

# Processes whose command line or working directory is under this journey's directory.
left_running() {
  local me=$$ p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = "$me" ] && continue
    [ "$p" = "${DEV_TEE:-}" ] && continue
    if { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | grep -q "$PWD/hangar-dev\|$J_LONG" ||
       readlink "/proc/$p/cwd" 2>/dev/null | grep -q "^$PWD/hangar-dev\|^$J_LONG"; then
      echo "$p $({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null)"
    fi
  done
}

# The end of every journey: nothing it started keeps running (killed if it did, and said).
cleanup() {
  [ -n "${DEV_PID:-}" ] && kill -0 "$DEV_PID" 2>/dev/null && dev_stop
  pg_stop
  local left
  # A node's fence keeper leaves within a moment of its agent: give what ends by itself a second.
  wait_for 3 '[ -z "$(left_running)" ]' >/dev/null
  left=$(left_running)
  if [ -n "$left" ]; then
    echo "left running:"; echo "$left"
    echo "$left" | while read -r p _; do kill -KILL "$p" 2>/dev/null; done
    return 1
  fi
}

# Waits (at most $1 s) for `hangar dev` to exit by itself and prints its exit status.
dev_wait_exit() {
  if wait_for "$1" '! kill -0 '"$DEV_PID"; then
    wait "$DEV_PID"; echo "hangar dev exited with $?"
  else
    echo "hangar dev still runs after $1 s"; dev_stop
  fi
  DEV_PID=
}

# The Nth fenced block (```) of a document in the source tree, as it stands: journeys run the
# documents' examples from the documents themselves (doc_examples.py checks each is run).
doc_block() {
  "$J_PY" - "$HANGAR_SRC/$1" "$2" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
n = int(sys.argv[2])
if not 1 <= n <= len(blocks):
    sys.exit(f"{sys.argv[1]} has {len(blocks)} fenced blocks, not {n}")
sys.stdout.write(blocks[n - 1])
PY
}

# Runs the `$ ` commands of a transcript block of a document (its other lines are the output it
# shows), each printed before its output as the document shows it. $3, if given: an extended
# regex of commands the journey does its own way and doc_run skips (e.g. '^hangar dev &').
# $DOC_SED, if set: a sed script for the commands (the journey's own ports and folders).
doc_run() {
  local line
  doc_block "$1" "$2" | grep '^\$ ' | sed 's/^\$ //' | grep -Ev "${3:-^\$^}" | sed "${DOC_SED:-}" | while IFS= read -r line; do
    echo "[doc] \$ $line"  # not "$ ...": cram would take it for a command
    eval "$line" 2>&1 </dev/null
  done
}

# A PostgreSQL server of the journey's own on a free loopback port (PG_PORT, PG_URL_BASE); as
# root it runs as user nobody (initdb refuses root), in a folder of its own that nobody can enter.
# pg_stop ends it.
pg_start() {
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  PG_DIR=$(mktemp -d /tmp/hangar-journey-pg.XXXXXX)
  PG_PORT=$(free_port 1)
  chmod 755 "$PG_DIR"
  local as=()
  if [ "$(id -u)" = 0 ]; then chown nobody: "$PG_DIR"; as=(setpriv --reuid=nobody --regid=nogroup --clear-groups); fi
  "${as[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -U hangar -A trust >"$PG_DIR/initdb.log" 2>&1 || { tail "$PG_DIR/initdb.log"; return 1; }
  "${as[@]}" "$PG_BIN/postgres" -D "$PG_DIR/data" -p "$PG_PORT" -k "$PG_DIR" -c listen_addresses=127.0.0.1 >"$PG_DIR/postgres.log" 2>&1 &
  PG_PID=$!
  wait_for 60 '"$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"' || { tail "$PG_DIR/postgres.log"; return 1; }
  PG_URL_BASE=postgres://hangar@127.0.0.1:$PG_PORT
}

pg_stop() {
  [ -n "${PG_PID:-}" ] || return 0
  kill -INT "$PG_PID" 2>/dev/null; wait "$PG_PID" 2>/dev/null
  rm -rf "$PG_DIR"; PG_PID=
}
