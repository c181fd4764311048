#!/usr/bin/env bash
# The .deb (issue 16, item 8), end to end, as root on this machine without touching it:
#
#  1. `cpack -G DEB` from the build tree, into a temporary folder;
#  2. the package as dpkg sees it (dpkg-deb -I/-c): its files, conffiles, maintainer scripts and
#     Depends (dpkg-shlibdeps' libraries and adduser);
#  3. `systemd-analyze verify --root` on the unpacked tree (dpkg-deb -x);
#  4. `dpkg -i` into a copy-on-write chroot of this machine (a private mount namespace; an
#     overlay over / whose writes go to a tmpfs), so that postinst really runs: the user hangar,
#     /etc/hangar/tls; then `systemd-analyze verify` on the installed units;
#  5. the admin's steps from docs/operations.md (certs, the controller key's owner, a node token),
#     and each unit started from its own ExecStart= line as systemd would start it (its
#     Environment= and EnvironmentFile= expanded, its StateDirectory=, User= and UMask=, and the
#     sandbox settings that need no systemd: ProtectSystem=, ProtectHome=, PrivateTmp=,
#     PrivateDevices=, NoNewPrivileges=, ...), with the shipped configuration; only the listen
#     addresses are moved to free ports on 127.0.0.1 and the agent is given fake GPUs, as
#     agent.env tells a machine without NVIDIA GPUs to do; each sandbox is checked from inside;
#  6. the agent registers (`hangar nodes` over HTTPS with the CA and the admin token), a job runs
#     on it, and every series the Grafana dashboard names is one the controller serves;
#  7. both daemons stop on SIGTERM and leave no process; a reinstall keeps an edited conffile and
#     a purge removes the package's files but leaves the user and the state, as postrm says.
#
# Usage: deb_test.sh BUILD_DIR. Needs root, dpkg-dev, systemd (systemd-analyze), util-linux
# (unshare, setpriv, nsenter), adduser, curl and python3 (scripts/install-deps.sh --test). Talks to
# 127.0.0.1 only; this machine's /etc, /var/lib and dpkg database are left as they were.
set -euo pipefail

fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }
step() { echo "== [${SECONDS} s] $*"; }

if [[ "${HANGAR_DEB_TEST_NS:-}" != 1 ]]; then
  [[ $# -eq 1 ]] || fail "usage: $0 BUILD_DIR"
  [[ $(id -u) -eq 0 ]] || fail "needs root: it installs the package into a copy-on-write chroot of this machine"
  for tool in cpack dpkg-deb dpkg-shlibdeps systemd-analyze unshare setpriv nsenter chroot adduser curl python3; do
    command -v "$tool" >/dev/null || fail "$tool is missing; run scripts/install-deps.sh --test"
  done
  # Everything below runs in a mount namespace of its own: its mounts vanish with it. The parent
  # death signal ends it (and, through theirs, the daemons) if whoever started it is killed.
  export HANGAR_DEB_TEST_NS=1
  exec setpriv --pdeathsig KILL unshare --mount --propagation private -- bash "$0" "$@"
fi

build=$(realpath "$1")
[[ -f "$build/CPackConfig.cmake" ]] || fail "$build has no CPackConfig.cmake; configure it with CMake first"
[[ -x "$build/src/hangar" ]] || fail "$build/src/hangar is not built"
work=$(mktemp -d /tmp/hangar-deb-test.XXXXXX)
ns="$work/ns"          # a tmpfs: the overlay's upper and work folders, and its mount point
R="$ns/root"           # the chroot: this machine, copy-on-write
pids=()

# What the test must leave as it found it (it never writes /etc: only the overlay's copy). Not
# all of /etc/passwd: other tests may add their own accounts meanwhile.
host_state() {
  getent passwd hangar || true
  getent group hangar || true
  ls -d /etc/hangar /var/lib/hangar /var/lib/hangar-agent /lib/systemd/system/hangar-agent.service \
    /lib/systemd/system/hangar-controller.service 2>/dev/null || true
}
host_before=$(host_state)

# The processes in the chroot: in the mount namespace of a unit (the daemons and anything they
# started), or with the chroot as their root.
unit_namespaces=()
in_chroot() {
  python3 - "$R" "${unit_namespaces[@]}" <<'PY'
import os, sys
root, namespaces = sys.argv[1], set(sys.argv[2:])
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.readlink(f"/proc/{pid}/root") == root or os.readlink(f"/proc/{pid}/ns/mnt") in namespaces:
            print(pid)
    except OSError:
        pass  # gone meanwhile
PY
}

cleanup() {
  local rc=$?
  set +e
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  local left
  left=$(in_chroot)
  if [[ -n "$left" ]]; then kill -KILL $left 2>/dev/null; sleep 0.2; fi
  if [[ $rc -ne 0 ]]; then
    for log in "$work"/*.log; do
      [[ -f "$log" ]] || continue
      echo "---- $(basename "$log") (last 40 lines)" >&2
      tail -n 40 "$log" >&2
    done
  fi
  if mountpoint -q "$R"; then umount -R "$R" 2>/dev/null || umount -R -l "$R"; fi
  if mountpoint -q "$ns"; then umount "$ns" 2>/dev/null || umount -l "$ns"; fi
  # Nothing may be mounted below $work any more; then, and only then, remove it.
  if findmnt -rn -o TARGET | grep -q "^$work"; then
    echo "deb_test: mounts remain under $work; not removing it" >&2
  else
    rm -rf --one-file-system "$work"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# ---------------------------------------------------------------------------------------------
step "cpack -G DEB"
start=$SECONDS
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/cpack" >"$work/cpack.log" 2>&1 ||
  fail "cpack failed (its log below)"
debs=("$work"/cpack/hangar_*.deb)
[[ ${#debs[@]} -eq 1 && -f "${debs[0]}" ]] || fail "cpack made no single hangar_*.deb: ${debs[*]}"
deb=${debs[0]}
echo "$(basename "$deb"): $(du -k "$deb" | cut -f1) KiB, in $((SECONDS - start)) s"

# ---------------------------------------------------------------------------------------------
step "the package as dpkg sees it"
dpkg-deb -I "$deb" >"$work/info.txt"
dpkg-deb -c "$deb" >"$work/contents.txt"
[[ "$(dpkg-deb -f "$deb" Package)" == hangar ]] || fail "Package is not hangar"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for dep in adduser libc6 libstdc++6 libssl3 libsqlite3-0 'libgrpc++1'; do
  [[ ",$depends" == *", $dep"* || ",$depends" == *",$dep"* ]] || fail "Depends lacks $dep (dpkg-shlibdeps): $depends"
done
owner_mode() {  # the mode and owner of one path in the data archive, e.g. "-rwxr-xr-x root/root"
  awk -v p="./$1" '$6 == p { print $1, $2 }' "$work/contents.txt"
}
[[ "$(owner_mode usr/bin/hangar)" == "-rwxr-xr-x root/root" ]] ||
  fail "usr/bin/hangar: $(owner_mode usr/bin/hangar) (want -rwxr-xr-x root/root)"
# Slurm's commands, apart from any real Slurm's, running the package's hangar.
for f in sbatch srun salloc squeue scancel sacct sacctmgr sinfo scontrol; do
  [[ "$(owner_mode "usr/lib/hangar/slurm-bin/$f")" == "-rwxr-xr-x root/root" ]] ||
    fail "usr/lib/hangar/slurm-bin/$f: '$(owner_mode "usr/lib/hangar/slurm-bin/$f")' (want -rwxr-xr-x root/root)"
done
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/lib/hangar/slurm-bin/sacct | grep -q "exec '/usr/bin/hangar' slurm sacct" ||
  fail "usr/lib/hangar/slurm-bin/sacct does not run /usr/bin/hangar"
for f in lib/systemd/system/hangar-controller.service lib/systemd/system/hangar-agent.service \
         etc/hangar/controller.env etc/hangar/agent.env etc/hangar/cluster.yaml \
         usr/share/hangar/grafana/hangar.json usr/share/doc/hangar/operations.md; do
  [[ "$(owner_mode "$f")" == "-rw-r--r-- root/root" ]] || fail "$f: '$(owner_mode "$f")' (want -rw-r--r-- root/root)"
done
mkdir "$work/control"
dpkg-deb -e "$deb" "$work/control"
printf '/etc/hangar/agent.env\n/etc/hangar/cluster.yaml\n/etc/hangar/controller.env\n' >"$work/want-conffiles"
sort "$work/control/conffiles" | cmp -s - "$work/want-conffiles" ||
  fail "conffiles: $(tr '\n' ' ' <"$work/control/conffiles") (want the three files of /etc/hangar)"
# Every file under /etc is a conffile (Debian policy 10.7.2).
etc_files=$(awk '$1 ~ /^-/ && $6 ~ /^\.\/etc\// { sub(/^\./, "", $6); print $6 }' "$work/contents.txt" | sort)
[[ "$etc_files" == "$(cat "$work/want-conffiles")" ]] || fail "files in /etc that are not conffiles: $etc_files"
for s in postinst prerm postrm; do
  [[ -x "$work/control/$s" ]] || fail "maintainer script $s is missing or not executable"
  sh -n "$work/control/$s" || fail "$s is not valid sh"
done

# ---------------------------------------------------------------------------------------------
step "systemd-analyze verify --root on the unpacked package"
dpkg-deb -x "$deb" "$work/x"
units=(hangar-controller.service hangar-agent.service)
verify() {  # verify COMMAND...: systemd-analyze verify, with no complaint about our units at all
  local out
  out=$(SYSTEMD_LOG_LEVEL=notice "$@" 2>&1) || fail "$*: $out"
  # Complaints about other units of the machine are not ours; any line naming ours is.
  if grep -q hangar <<<"$out"; then fail "$*: $out"; fi
  if [[ -n "$out" ]]; then echo "(about other units: $out)"; fi
  echo "ok: $*"
}
# A root holds the units ours depend on (sysinit.target, network-online.target, ...): this
# machine's, beside ours, for systemd-analyze to load them; /usr/bin/hangar is the package's.
cp -an /lib/systemd/system/. "$work/x/lib/systemd/system/"
verify systemd-analyze verify --root="$work/x" "${units[@]/#//lib/systemd/system/}"

# ---------------------------------------------------------------------------------------------
step "dpkg -i into a copy-on-write chroot of this machine"
mkdir -p "$ns"
mount -t tmpfs -o mode=0755 hangar-deb-test "$ns"
mkdir "$ns/upper" "$ns/work" "$R"
mount -t overlay overlay -o "lowerdir=/,upperdir=$ns/upper,workdir=$ns/work" "$R"
for d in proc sys dev; do mount --rbind "/$d" "$R/$d"; done
mount -t tmpfs -o mode=1777 tmp "$R/tmp"
mount -t tmpfs -o mode=0755 run "$R/run"   # no /run/systemd/system: no systemd runs there
# A clean slate in the copy: this machine's own hangar package and user, if any, go.
if chroot "$R" dpkg-query -W hangar >/dev/null 2>&1; then chroot "$R" dpkg --purge hangar >/dev/null; fi
if chroot "$R" getent passwd hangar >/dev/null; then chroot "$R" userdel hangar; fi
if chroot "$R" getent group hangar >/dev/null; then chroot "$R" groupdel hangar; fi
rm -rf "$R/etc/hangar" "$R/var/lib/hangar" "$R/var/lib/hangar-agent"
cp "$deb" "$R/tmp/hangar.deb"
chroot "$R" dpkg -i /tmp/hangar.deb >"$work/dpkg-install.log" 2>&1 || fail "dpkg -i failed"
cat "$work/dpkg-install.log"
status=$(chroot "$R" dpkg-query -W -f='${Status}' hangar)
[[ "$status" == "install ok installed" ]] || fail "dpkg status: $status"
passwd=$(chroot "$R" getent passwd hangar) || fail "postinst made no user hangar"
IFS=: read -r _ _ uid _ _ home shell <<<"$passwd"
((uid < 1000)) || fail "hangar is not a system user (uid $uid)"
[[ "$home" == /var/lib/hangar && "$shell" == /usr/sbin/nologin ]] || fail "user hangar: $passwd"
rstat() { chroot "$R" stat -c '%U:%G %a' "$1"; }   # owners by the chroot's names
[[ "$(rstat /etc/hangar/tls)" == "root:hangar 750" ]] || fail "/etc/hangar/tls: $(rstat /etc/hangar/tls) (want root:hangar 750)"
for c in /etc/hangar/controller.env /etc/hangar/agent.env /etc/hangar/cluster.yaml; do
  chroot "$R" dpkg-query -W -f='${Conffiles}\n' hangar | grep -q " $c " || fail "dpkg did not record $c as a conffile"
done
verify chroot "$R" systemd-analyze verify "${units[@]/#//lib/systemd/system/}"
# The controller's hardening stays whole: systemd's own exposure score (0 to 10) at most 2.0
# ("OK"). The agent's is high on purpose (its unit file says why); shown, not judged.
for u in "${units[@]}"; do
  threshold=100
  [[ "$u" == hangar-controller.service ]] && threshold=20
  out=$(chroot "$R" systemd-analyze security --offline=yes --threshold=$threshold "/lib/systemd/system/$u" 2>&1) ||
    fail "systemd-analyze security: $u is exposed above $((threshold / 10)).$((threshold % 10)): $(grep -F '✗' <<<"$out")"
  grep -F 'Overall exposure level' <<<"$out" || fail "systemd-analyze security printed no exposure for $u: $out"
done

# ---------------------------------------------------------------------------------------------
# A unit as systemd would start it: the lines of the installed unit file, its Environment= (with
# the specifiers it uses) and EnvironmentFile= expanded into its ExecStart= line.
unit_lines() {  # the KEY=VALUE lines, continuations joined, comments and blank lines dropped
  local line acc="" skip='^[[:space:]]*([#;]|$)'
  while IFS= read -r line || [[ -n "$line" ]]; do
    if [[ "$line" =~ $skip ]]; then continue; fi
    if [[ "$line" == *\\ ]]; then acc+="${line%\\} "; continue; fi
    echo "$acc$line"
    acc=""
  done <"$1"
}
unit_get() { unit_lines "$1" | sed -n "s/^$2=//p"; }

specifiers() {  # the specifiers our units use; any other fails rather than guess
  local s=$1 out="" c
  while [[ "$s" == *%* ]]; do
    out+="${s%%\%*}"
    s="${s#*%}"
    c="${s:0:1}"
    s="${s:1}"
    case "$c" in
      l) out+=$(hostname -s) ;;
      H) out+=$(hostname) ;;
      %) out+=% ;;
      *) fail "specifier %$c: this test does not know what systemd makes of it" ;;
    esac
  done
  echo "$out$s"
}

# start_unit NAME: runs NAME's ExecStart= in the chroot in the background, with the environment,
# user, umask and state directories its unit gives it; its output in $work/NAME.log.
start_unit() {
  local name=$1 unit="$R/lib/systemd/system/$1.service" log="$work/$1.log"
  declare -A env=()
  local value a file optional line k v skip='^[[:space:]]*([#;]|$)' assign='^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)=(.*)$'
  set -f
  while IFS= read -r value; do
    for a in $value; do
      a=$(specifiers "$a")
      env[${a%%=*}]=${a#*=}
    done
  done < <(unit_get "$unit" Environment)
  while IFS= read -r file; do
    optional=0
    if [[ "$file" == -* ]]; then optional=1; file=${file#-}; fi
    if [[ ! -f "$R$file" ]]; then
      ((optional)) && continue
      fail "$name: EnvironmentFile $file is missing"
    fi
    while IFS= read -r line || [[ -n "$line" ]]; do
      if [[ "$line" =~ $skip ]]; then continue; fi
      [[ "$line" =~ $assign ]] || fail "$file: systemd reads no assignment in '$line'"
      k=${BASH_REMATCH[1]}
      v=${BASH_REMATCH[2]}
      v="${v#"${v%%[![:space:]]*}"}"
      v="${v%"${v##*[![:space:]]}"}"
      if [[ "$v" =~ ^\"(.*)\"$ || "$v" =~ ^\'(.*)\'$ ]]; then v=${BASH_REMATCH[1]}; fi
      env[$k]=$v
    done <"$R$file"
  done < <(unit_get "$unit" EnvironmentFile)

  local exec words=() argv=() w
  exec=$(unit_get "$unit" ExecStart)
  [[ $(wc -l <<<"$exec") -eq 1 && -n "$exec" ]] || fail "$name: want one ExecStart= line, not '$exec'"
  [[ "$exec" != *[\"\'\\]* ]] || fail "$name: ExecStart= has quotes or escapes, which this test does not expand"
  while [[ "$exec" == [@+!:-]* ]]; do exec=${exec:1}; done
  read -r -a words <<<"$exec"
  for w in "${words[@]}"; do
    if [[ "$w" =~ ^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$ ]]; then
      argv+=("${env[${BASH_REMATCH[1]}]-}")          # ${NAME}: one word, even empty
    elif [[ "$w" =~ ^\$([A-Za-z_][A-Za-z0-9_]*)$ ]]; then
      # shellcheck disable=SC2206 # split on purpose, as systemd does (globbing is off: set -f)
      argv+=(${env[${BASH_REMATCH[1]}]-})            # $NAME: split at white space
    elif [[ "$w" == *'$'* ]]; then
      fail "$name: ExecStart= word '$w' mixes a variable with text, which this test does not expand"
    else
      argv+=("$(specifiers "$w")")
    fi
  done
  set +f
  [[ "${argv[0]}" == /* && -x "$R${argv[0]}" ]] || fail "$name: ExecStart= runs '${argv[0]}', not an installed program"

  local user group umask dirs mode ids=() envv=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
  user=$(unit_get "$unit" User)
  group=$(unit_get "$unit" Group)
  umask=$(unit_get "$unit" UMask)
  dirs=$(unit_get "$unit" StateDirectory)
  mode=$(unit_get "$unit" StateDirectoryMode)
  if [[ -n "$user" ]]; then
    ids=(--reuid="$user" --regid="${group:-$user}" --init-groups)
    local pw
    pw=$(chroot "$R" getent passwd "$user") || fail "$name: User=$user does not exist"
    IFS=: read -r _ _ _ _ _ h sh <<<"$pw"
    envv+=(USER="$user" LOGNAME="$user" HOME="$h" SHELL="$sh")
  fi
  for d in $dirs; do     # StateDirectory=: made, and handed to the unit's user, at every start
    mkdir -p "$R/var/lib/$d"
    chroot "$R" chown "${user:-root}:${group:-${user:-root}}" "/var/lib/$d"
    chmod "${mode:-0755}" "$R/var/lib/$d"
    envv+=(STATE_DIRECTORY="/var/lib/$d")
  done
  for k in "${!env[@]}"; do envv+=("$k=${env[$k]}"); done

  # The unit's sandbox, as far as it can be built without systemd: a mount namespace of its own
  # for ProtectSystem=, ProtectHome=, PrivateTmp=, PrivateDevices=, ProtectKernelTunables= and
  # ProtectControlGroups=, and setpriv for NoNewPrivileges= and an empty CapabilityBoundingSet=.
  # The seccomp-based settings (SystemCallFilter=, RestrictAddressFamilies=,
  # MemoryDenyWriteExecute=, ...) and the other namespaces are not applied: they are named.
  local script="$work/$name.sandbox.sh" key applied=() skipped=() sandbox=()
  # Read-only with what is mounted below it. Always "remount,bind": the flag of this namespace's
  # mount, never the file system's (which would reach the host's mounts).
  sandbox_ro() {
    sandbox+=("if [ -d $R$1 ]; then mount --rbind $R$1 $R$1; findmnt -R -n -r -o TARGET $R$1 | while read -r m; do mount -o remount,bind,ro \"\$m\"; done; fi")
  }
  for d in $dirs; do sandbox+=("mount --bind $R/var/lib/$d $R/var/lib/$d"); done   # stays writable
  while IFS='=' read -r key value; do
    case "$key=$value" in
      ProtectSystem=strict) sandbox+=("mount -o remount,bind,ro $R" "mount -o remount,bind,ro $R/run" \
                                      "mount -o remount,bind,ro $R/tmp") ;;
      ProtectSystem=full) sandbox_ro /usr; sandbox_ro /boot; sandbox_ro /efi; sandbox_ro /etc ;;
      ProtectSystem=yes) sandbox_ro /usr; sandbox_ro /boot; sandbox_ro /efi ;;
      ProtectHome=yes) for h in /home /root /run/user; do
                         sandbox+=("if [ -d $R$h ]; then mount -t tmpfs -o mode=000,size=4k protecthome $R$h; fi")
                       done ;;
      PrivateTmp=yes) sandbox+=("mount -t tmpfs -o mode=1777 privatetmp $R/tmp" "mount -t tmpfs -o mode=1777 privatetmp $R/var/tmp") ;;
      PrivateDevices=yes) sandbox+=("mount -t tmpfs -o mode=755,nosuid privatedev $R/dev"
                                    "for n in null zero full random urandom tty; do touch $R/dev/\$n; mount --bind /dev/\$n $R/dev/\$n; done"
                                    "mkdir $R/dev/shm && mount -t tmpfs -o mode=1777 shm $R/dev/shm"
                                    "ln -s /proc/self/fd $R/dev/fd; ln -s fd/0 $R/dev/stdin; ln -s fd/1 $R/dev/stdout; ln -s fd/2 $R/dev/stderr") ;;
      ProtectKernelTunables=yes) sandbox_ro /proc/sys; sandbox_ro /sys ;;
      ProtectControlGroups=yes) sandbox_ro /sys/fs/cgroup ;;
      NoNewPrivileges=yes) ids+=(--no-new-privs) ;;
      CapabilityBoundingSet=) ids+=(--bounding-set=-all) ;;
      ProtectSystem=* | ProtectHome=* | PrivateTmp=* | PrivateDevices=* | NoNewPrivileges=* | \
      CapabilityBoundingSet=* | ProtectKernelTunables=* | ProtectControlGroups=*)
        if [[ "$value" != no ]]; then fail "$name: $key=$value is not emulated by this test"; fi
        continue ;;
      Protect*=* | Private*=* | Restrict*=* | SystemCall*=* | MemoryDenyWriteExecute=* | LockPersonality=* | \
      RemoveIPC=* | AmbientCapabilities=*)
        skipped+=("$key"); continue ;;
      *) continue ;;
    esac
    applied+=("$key=$value")
  done < <(unit_lines "$unit")
  {
    echo "set -e"
    printf '%s\n' "${sandbox[@]}"
    printf 'umask %q\ncd /\nexec chroot %q setpriv' "${umask:-0022}" "$R"
    printf ' %q' "${ids[@]}" --pdeathsig KILL -- env -i "${envv[@]}" "${argv[@]}"
    echo
  } >"$script"
  echo "$name: ${user:-root}, umask ${umask:-0022}: ${argv[*]}"
  echo "$name: sandbox: ${applied[*]:-none}${skipped:+; not applied here: ${skipped[*]}}"
  # Without --fork: unshare, bash and chroot exec one another, so that the daemon is this
  # script's child and dies with it (--pdeathsig).
  unshare --mount --propagation private -- bash "$script" >"$log" 2>&1 </dev/null &
  started_pid=$!
  pids+=("$started_pid")
  # Its mount namespace, once it has its own: tasks it starts share it (see in_chroot).
  local i ns_self ns_unit
  ns_self=$(readlink /proc/self/ns/mnt)
  for ((i = 0; i < 100; i++)); do
    ns_unit=$(readlink "/proc/$started_pid/ns/mnt" 2>/dev/null) || fail "$name exited at once: $(cat "$log")"
    if [[ "$ns_unit" != "$ns_self" ]]; then break; fi
    sleep 0.05
  done
  [[ "$ns_unit" != "$ns_self" ]] || fail "$name has no mount namespace of its own after 5 s"
  unit_namespaces+=("$ns_unit")
}

# stop_unit NAME PID: SIGTERM (KillSignal=), and it must be gone within the unit's stop timeout.
stop_unit() {
  local name=$1 pid=$2 i t0=$SECONDS
  kill -TERM "$pid" 2>/dev/null || fail "$name (pid $pid) was no longer running before it was stopped"
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && fail "$name did not stop within 15 s of SIGTERM"
  wait "$pid" || fail "$name exited with status $? on SIGTERM"
  echo "$name: stopped ($((SECONDS - t0)) s)"
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
  local limit=$1 what=$2 i
  shift 2
  for ((i = 0; i < limit * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || fail "a daemon exited while waiting for $what"; done
    sleep 0.2
  done
  fail "no $what within $limit s"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ---------------------------------------------------------------------------------------------
step "the admin's steps (docs/operations.md, \"Installing from the .deb\")"
api=$(free_port)
agents=$(free_port)
while [[ "$agents" == "$api" ]]; do agents=$(free_port); done
node=$(sed -n 's/^  - name: \([a-z0-9-]*\)\[\([0-9]*\)-.*/\1\2/p' "$R/etc/hangar/cluster.yaml" | head -1)
[[ -n "$node" ]] || fail "cannot find the first node of the shipped cluster.yaml"
in_root() { chroot "$R" "$@"; }
in_root hangar certs init --dir /etc/hangar/tls >"$work/certs.log" 2>&1
in_root hangar certs issue --controller --dir /etc/hangar/tls >>"$work/certs.log" 2>&1
in_root hangar certs issue --node "$node" --dir /etc/hangar/tls >>"$work/certs.log" 2>&1
in_root chown hangar: /etc/hangar/tls/controller.key
# Only the listen addresses change (free ports on 127.0.0.1 instead of every interface on 8080
# and 8081); everything else is as shipped.
sed -i -e "s|^HANGAR_API=.*|HANGAR_API=127.0.0.1:$api|" -e "s|^HANGAR_AGENTS=.*|HANGAR_AGENTS=127.0.0.1:$agents|" \
  "$R/etc/hangar/controller.env"

step "the controller from its unit's command line"
start_unit hangar-controller
controller_pid=$started_pid
ca="$R/etc/hangar/tls/ca.crt"
wait_for 30 "answer on https://127.0.0.1:$api/healthz" curl -sf --cacert "$ca" "https://127.0.0.1:$api/healthz"
[[ -s "$R/var/lib/hangar/admin.token" ]] || fail "the first start wrote no /var/lib/hangar/admin.token"
for f in /var/lib/hangar:700 /var/lib/hangar/admin.token:600 /var/lib/hangar/state.db:600; do
  [[ "$(rstat "${f%:*}")" == "hangar:hangar ${f##*:}" ]] || fail "${f%:*}: $(rstat "${f%:*}") (want hangar:hangar ${f##*:})"
done
# The plaintext port is refused: TLS is on with the shipped configuration.
if curl -sf "http://127.0.0.1:$api/healthz" >/dev/null 2>&1; then fail "the API answers plaintext HTTP"; fi
admin=$(cat "$R/var/lib/hangar/admin.token")
cli() {
  chroot "$R" env HANGAR_URL="https://127.0.0.1:$api" HANGAR_CA=/etc/hangar/tls/ca.crt HANGAR_TOKEN="$admin" hangar "$@"
}
(umask 077; cli token create --role node --node "$node" >"$R/etc/hangar/node.token") || fail "hangar token create failed"
grep -q '^hgr_' "$R/etc/hangar/node.token" || fail "node.token holds no token: $(cat "$R/etc/hangar/node.token")"
sed -i -e "s|^#\?HANGAR_NODE=.*|HANGAR_NODE=$node|" -e "s|^HANGAR_CONTROLLER=.*|HANGAR_CONTROLLER=127.0.0.1:$agents|" \
  -e "s|^HANGAR_AGENT_ARGS=.*|HANGAR_AGENT_ARGS=--fake-gpus 8|" "$R/etc/hangar/agent.env"

step "the agent from its unit's command line"
start_unit hangar-agent
agent_pid=$started_pid
node_ready() {
  cli nodes -o json | python3 -c '
import json, sys
nodes = {n["name"]: n for n in json.load(sys.stdin)["nodes"]}
n = nodes[sys.argv[1]]
sys.exit(0 if n["state"] == "ready" and n["connected"] and n["gpus"] == 8 else 1)' "$node"
}
wait_for 30 "node $node ready in \`hangar nodes\`" node_ready
cli nodes
# What "nothing left running" below relies on: the daemons are seen as processes in the chroot.
running=" $(in_chroot | tr '\n' ' ') "
[[ "$running" == *" $controller_pid "* && "$running" == *" $agent_pid "* ]] ||
  fail "the daemons ($controller_pid, $agent_pid) are not among the chroot's processes:$running"
# The sandboxes hold, seen from inside each daemon's mount namespace and root.
in_unit() { local pid=$1; shift; nsenter --target "$pid" --mount --root -- "$@"; }
writable() { in_unit "$1" sh -c "touch $2/.deb-test-probe && rm $2/.deb-test-probe" 2>/dev/null; }
writable "$controller_pid" /var/lib/hangar || fail "the controller cannot write its StateDirectory"
for d in / /etc /usr /var/lib /run; do
  if writable "$controller_pid" "$d"; then fail "the controller can write $d (ProtectSystem=strict)"; fi
done
[[ -z "$(in_unit "$controller_pid" ls -A /tmp)" ]] || fail "the controller's /tmp is not private (PrivateTmp=yes)"
mounted_ro() { [[ "$(in_unit "$1" findmnt -n -o OPTIONS --target "$2" | tail -1)" == ro,* ]]; }
for m in /sys /sys/fs/cgroup /proc/sys; do
  mounted_ro "$controller_pid" "$m" || fail "the controller's $m is writable (ProtectKernelTunables=, ProtectControlGroups=)"
done
[[ -z "$(in_unit "$controller_pid" find /root /home -mindepth 1 -maxdepth 1)" ]] || fail "the controller sees /root or /home (ProtectHome=yes)"
[[ "$(in_unit "$controller_pid" ls /dev | tr '\n' ' ')" == "fd full null random shm stderr stdin stdout tty urandom zero " ]] ||
  fail "the controller's /dev: $(in_unit "$controller_pid" ls /dev | tr '\n' ' ') (PrivateDevices=yes)"
writable "$agent_pid" /var/lib/hangar-agent || fail "the agent cannot write its StateDirectory"
writable "$agent_pid" /tmp || fail "the agent cannot write /tmp (it shares the node's)"
for d in /etc /usr; do
  if writable "$agent_pid" "$d"; then fail "the agent can write $d (ProtectSystem=full)"; fi
done
grep -h -E 'controller: API on|agent [^ ]+: [0-9]+ ' "$work/hangar-controller.log" "$work/hangar-agent.log" | sed 's/^\[[^]]*\] //'

step "a job on the installed agent"
cat >"$R/tmp/hello.yaml" <<JOB
name: hello
tasks:
  - name: main
    gpus: 1
    command: [/bin/sh, -c, 'echo "hello from \$(id -un) on \$HANGAR_JOB_ID"']
JOB
# Tasks run as their submitter's Unix account (docs/rbac.md): a user whose token maps to the
# account nobody (the first admin token's user, admin, has no account on the node).
hello_token=$(cli token create --user hello --role user --account nobody 2>/dev/null) || fail "hangar token create --account failed"
job=$(chroot "$R" env HANGAR_URL="https://127.0.0.1:$api" HANGAR_CA=/etc/hangar/tls/ca.crt HANGAR_TOKEN="$hello_token" \
  hangar submit /tmp/hello.yaml -o json | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
job_done() { cli job "$job" -o json | python3 -c 'import json, sys; sys.exit(0 if json.load(sys.stdin)["state"] in ("succeeded", "failed", "cancelled", "timed_out") else 1)'; }
wait_for 30 "end of job $job" job_done
state=$(cli job "$job" -o json | python3 -c 'import json, sys; print(json.load(sys.stdin)["state"])')
[[ "$state" == succeeded ]] || { cli job "$job"; fail "job $job ended $state"; }
out=$(cli logs "$job" 2>&1) || fail "hangar logs $job: $out"
[[ "$out" == *"hello from nobody on $job"* ]] || fail "job $job wrote '$out' (want it to run as nobody)"
echo "job $job: $out"

step "the Grafana dashboard's series are the controller's"
curl -sf --cacert "$ca" -H "Authorization: Bearer $admin" "https://127.0.0.1:$api/metrics?labels=clean" >"$work/metrics-clean.txt"
curl -sf --cacert "$ca" -H "Authorization: Bearer $admin" "https://127.0.0.1:$api/metrics?labels=dcgm" >"$work/metrics-dcgm.txt"
python3 - "$R/usr/share/hangar/grafana/hangar.json" "$work/metrics-clean.txt" "$work/metrics-dcgm.txt" <<'PY'
import json, re, sys
dash = json.load(open(sys.argv[1]))
served = set()
for path in sys.argv[2:]:
    for line in open(path):
        m = re.match(r"(?:# TYPE )?([A-Za-z_:][A-Za-z0-9_:]*)", line)
        if m and not line.startswith("# HELP"):
            served.add(m.group(1))
exprs = []
def walk(node):
    if isinstance(node, dict):
        if isinstance(node.get("expr"), str): exprs.append(node["expr"])
        for k, v in node.items():
            if k == "query" and isinstance(v, dict) and "query" in v: exprs.append(v["query"])
            walk(v)
    elif isinstance(node, list):
        for v in node: walk(v)
walk(dash)
named = set()
for e in exprs:
    named |= set(re.findall(r"\b((?:hangar|DCGM)_[A-Za-z0-9_]+)", e))
missing = sorted(n for n in named if n not in served)
if not exprs or missing:
    sys.exit(f"the dashboard names series the controller does not serve: {missing}")
# Each of the controller's own families, and each DCGM field, has a panel.
families = {re.sub(r"_(bucket|sum|count)$", "", n) for n in served if n.startswith(("hangar_", "DCGM_"))}
unused = sorted(f for f in families if not any(f in e for e in exprs))
if unused:
    sys.exit(f"series the controller serves and the dashboard shows nowhere: {unused}")
print(f"ok: {len(exprs)} queries over {len(named)} series, all served")
PY

step "stop both; nothing left running"
stop_unit hangar-agent "$agent_pid"
stop_unit hangar-controller "$controller_pid"
pids=()
left=$(in_chroot)
[[ -z "$left" ]] || fail "processes left in the chroot: $(ps -o pid=,args= -p ${left// /,})"

step "reinstall keeps an edited conffile; purge removes the package and leaves the state"
chroot "$R" dpkg -i /tmp/hangar.deb >"$work/dpkg-reinstall.log" 2>&1 || fail "reinstalling failed"
grep -q "^HANGAR_API=127.0.0.1:$api$" "$R/etc/hangar/controller.env" || fail "the reinstall overwrote an edited conffile"
chroot "$R" dpkg --purge hangar >"$work/dpkg-purge.log" 2>&1 || fail "dpkg --purge failed"
cat "$work/dpkg-purge.log"
for f in /usr/bin/hangar /lib/systemd/system/hangar-controller.service /lib/systemd/system/hangar-agent.service \
         /etc/hangar/controller.env /etc/hangar/agent.env /etc/hangar/cluster.yaml /usr/share/hangar; do
  [[ ! -e "$R$f" ]] || fail "the purge left $f"
done
chroot "$R" getent passwd hangar >/dev/null || fail "the purge removed the user hangar (postrm leaves it)"
[[ -f "$R/var/lib/hangar/state.db" ]] || fail "the purge removed the controller's store (postrm leaves it)"

[[ "$(host_state)" == "$host_before" ]] || fail "this machine's /etc or /var/lib changed: $(diff <(echo "$host_before") <(host_state))"
echo "deb_test: ok ($((SECONDS)) s)"
