#include "cli/sbatch_wrapper.h"

#include <algorithm>
#include <cctype>

namespace hangar::cli::sbatch {

namespace {

Status Err(const std::string& what) { return Status::InvalidArgument(what); }

// srun inside a Hangar task: the task is one Slurm node of the job, so srun runs its command here,
// once per task of this node (-n/--ntasks caps the job's tasks, counted in blocks of the tasks per
// node -- SLURM_NTASKS_PER_NODE, else SLURM_TASKS_PER_NODE's count -- by node, as Slurm's block
// distribution does); its other options are read
// and set aside.
constexpr const char* kSrunShim = R"SH(#!/bin/sh
# srun as hangar sbatch provides it (docs/slurm.md): a step across the job's nodes, through the
# node's agent; without one (no agent socket), the command on this node's tasks.
if [ -n "${HANGAR_AGENT_SOCKET:-}" ] && [ -n "${HANGAR_TASK_ID:-}" ]; then
  exec "${HANGAR_BIN:-hangar}" slurm srun "$@"
fi
tpn=${SLURM_TASKS_PER_NODE:-1}; per_node=${SLURM_NTASKS_PER_NODE:-${tpn%%[(,]*}}
node=${SLURM_NODEID:-0}; total=
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    --container-image|--container-image=*)
      echo "srun: error: --container-image: this task cannot reach its node's agent, which runs a step in a container" >&2; exit 1 ;;
    -n|--ntasks) total=$2; shift 2 ;;
    -n*) total=${1#-n}; shift ;;
    --ntasks=*) total=${1#--ntasks=}; shift ;;
    --*=*) shift ;;
    --exclusive|--label|--unbuffered|--kill-on-bad-exit|--overlap|--verbose|--quiet|--no-kill|--pty|--exact|--whole|--overcommit|--multi-prog) shift ;;
    --*) shift 2 ;;
    -l|-u|-v|-K|-k|-O|-Q|-X|-Z) shift ;;
    -?) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "srun: no command given" >&2; exit 2; }
here=$per_node
if [ -n "$total" ]; then
  here=$((total - node * per_node))
  [ "$here" -gt "$per_node" ] && here=$per_node
  [ "$here" -gt 0 ] || exit 0
fi
if [ "$here" -eq 1 ]; then
  export SLURM_PROCID=$((node * per_node)) SLURM_LOCALID=0
  exec "$@"
fi
i=0; pids=
while [ "$i" -lt "$here" ]; do
  (export SLURM_PROCID=$((node * per_node + i)) SLURM_LOCALID=$i; exec "$@") &
  pids="$pids $!"; i=$((i + 1))
done
rc=0
for p in $pids; do wait "$p"; s=$?; [ "$s" -ne 0 ] && rc=$s; done
exit $rc
)SH";

// The task's command: /bin/sh -c WRAPPER NAME SCRIPT. It keeps running while the script handles
// the checkpoint signal and SIGTERM (the agent signals the whole process group; the job ends when
// this process does), so it traps them and only waits.
}  // namespace

bool LoginBashScript(std::string_view script) {
  if (script.substr(0, 2) != "#!") return false;
  std::string_view line =
      script.substr(2, script.find('\n') == std::string_view::npos ? std::string_view::npos
                                                                   : script.find('\n') - 2);
  bool bash = false;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    const std::string_view word = line.substr(i, j - i);
    i = j;
    if (word.empty()) break;
    const size_t slash = word.rfind('/');
    const std::string_view base = slash == std::string_view::npos ? word : word.substr(slash + 1);
    if (!bash) {
      bash = base == "bash";
      continue;
    }
    if (word == "--login") return true;
    if (word.size() > 1 && word[0] == '-' && word[1] != '-' &&
        word.find('l') != std::string_view::npos)
      return true;
  }
  return false;
}

std::string Wrapper(const WrapperInputs& w) {
  std::string s =
      "# hangar sbatch: runs the batch script ($1) as Slurm's batch step would (docs/slurm.md)\n";
  s += "trap : " + w.trap_signals + "\n";
  // Slurm runs the script once, on the allocation's first node; the others are held for its
  // steps (srun) until it ends, when the controller stops them (SIGTERM: they exit 0).
  s += "if [ \"${RANK:-0}\" != 0 ]; then\n"
       "  trap 'exit 0' TERM\n"
       "  while :; do sleep 3600 & wait $!; done\n"
       "fi\n";
  s += "export SLURM_JOB_ID=\"$HANGAR_JOB_ID\" SLURM_JOBID=\"$HANGAR_JOB_ID\" "
       "SLURM_NODEID=\"${RANK:-0}\" "
       "SLURM_LOCALID=0\n";
  s += "SLURM_PROCID=$((${RANK:-0} * " + std::to_string(w.tasks_per_node) +
       ")); export SLURM_PROCID\n";
  s += "if [ -n \"${HANGAR_ARRAY_INDEX:-}\" ]; then\n"
       "  export SLURM_ARRAY_JOB_ID=\"$HANGAR_ARRAY_JOB_ID\" "
       "SLURM_ARRAY_TASK_ID=\"$HANGAR_ARRAY_INDEX\"\n"
       "fi\n";
  // Slurm's node name, as the steps' tasks get it (the agent's HANGAR_NODE), not the host's.
  s += "if [ -n \"${HANGAR_NODE:-}\" ]; then hangar_node=$HANGAR_NODE; else "
       "hangar_node=$(uname -n); hangar_node=${hangar_node%%.*}; fi\n";
  s += "hangar_user=$(id -un 2>/dev/null)\n";
  s += "export SLURMD_NODENAME=\"$hangar_node\"\n";
  // The job's nodes in Slurm's host list form (the agent's HANGAR_JOB_NODES), which scripts read
  // with `scontrol show hostnames`.
  s += "export SLURM_JOB_NODELIST=\"${HANGAR_JOB_NODES:-$hangar_node}\" "
       "SLURM_NODELIST=\"${HANGAR_JOB_NODES:-$hangar_node}\"\n";
  for (int c = 0; w.components > 1 && c < w.components; ++c) {
    const std::string n = std::to_string(c);
    s += "export SLURM_JOB_NODELIST_HET_GROUP_" + n + "=\"${HANGAR_GROUP_NODES_" + n +
         ":-}\" SLURM_NODELIST_HET_GROUP_" + n + "=\"${HANGAR_GROUP_NODES_" + n + ":-}\"\n";
  }
  s += "hangar_dir=$(mktemp -d \"${TMPDIR:-/tmp}/hangar-sbatch.XXXXXX\") || exit 1\n";
  s += "printf '%s' \"$1\" > \"$hangar_dir/slurm_script\" || exit 1\n";
  s += "cat > \"$hangar_dir/srun\" <<'HANGAR_SRUN'\n" + std::string(kSrunShim) + "HANGAR_SRUN\n";
  // Slurm's other commands, as the script calls them: Hangar's (docs/slurm-commands.md).
  s +=
      "for hangar_tool in scontrol squeue sacct scancel sinfo; do\n"
      "  printf '#!/bin/sh\\nexec \"${HANGAR_BIN:-hangar}\" slurm %s \"$@\"\\n' \"$hangar_tool\" > "
      "\"$hangar_dir/$hangar_tool\" && chmod 700 \"$hangar_dir/$hangar_tool\"\n"
      "done\n";
  s += "chmod 700 \"$hangar_dir/slurm_script\" \"$hangar_dir/srun\"\n";
  s += "PATH=\"$hangar_dir:$PATH\"; export PATH\n";
  if (w.login_bash) {
    // A login shell's /etc/profile resets PATH: bash finds Slurm's commands as functions first,
    // which the environment carries through /etc/profile to the script and the bash under it.
    s += "HANGAR_SLURM_COMMANDS=\"$hangar_dir\"; export HANGAR_SLURM_COMMANDS\n";
    s += "env";
    for (const char* tool : {"srun", "scontrol", "squeue", "sacct", "scancel", "sinfo"}) {
      s += std::string(" 'BASH_FUNC_") + tool + "%%=() { \"$HANGAR_SLURM_COMMANDS/" + tool +
           "\" \"$@\"; }'";
    }
    s += " ";
  }
  s += "\"$hangar_dir/slurm_script\" " + w.redirect + "\n";
  s += "hangar_rc=$?\nrm -rf \"$hangar_dir\"\n";
  // The held nodes go, and the steps still running end, as the script's end ends them in Slurm.
  s += "if [ \"${WORLD_SIZE:-1}\" -gt 1 ] && [ -n \"${HANGAR_AGENT_SOCKET:-}\" ]; then\n"
       "  \"${HANGAR_BIN:-hangar}\" slurm srun --hangar-release-allocation\n"
       "fi\n";
  s += "exit $hangar_rc\n";
  return s;
}

StatusOr<std::string> OutputPatternToShell(std::string_view pattern, const std::string& job_name) {
  std::string out = "\"";
  auto literal = [&](char c) {
    if (c == '"' || c == '\\' || c == '$' || c == '`') out += '\\';
    out += c;
  };
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      literal(pattern[i]);
      continue;
    }
    size_t j = i + 1;
    int width = 0;
    // Past 10 digits of padding it is refused below; the count stops growing there (a long run of
    // digits overflowed it: found by the sbatch fuzz target).
    while (j < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[j])))
      width = std::min(width * 10 + (pattern[j++] - '0'), 11);
    if (j >= pattern.size())
      return Err("'" + std::string(pattern) + "' ends in a lone %; write %% for a percent sign");
    const char c = pattern[j];
    std::string var;
    if (c == 'j')
      var = "${HANGAR_JOB_ID}";
    else if (c == 'A')
      var = "${HANGAR_ARRAY_JOB_ID:-$HANGAR_JOB_ID}";
    else if (c == 'a')
      var = "${HANGAR_ARRAY_INDEX:-4294967294}";  // Slurm's NO_VAL outside an array
    else if (c == 'n')
      var = "${SLURM_NODEID}";
    else if (c == 'N')
      var = "${hangar_node}";
    else if (c == 'u')
      var = "${hangar_user}";
    else if (c == 't')  // the batch script is its node's first task
      var = "${SLURM_PROCID}";
    else if (c == 's' || c == 'J') {  // the batch step's id, as Slurm names it
      if (c == 'J') out += "${HANGAR_JOB_ID}.";
      out += "batch";
      i = j;
      continue;
    } else if (c == 'x') {
      for (char n : job_name) literal(n);
      i = j;
      continue;
    } else if (c == '%' && width == 0) {
      out += '%';
      i = j;
      continue;
    } else {
      return Err("'%" + std::string(1, c) + "' in '" + std::string(pattern) +
                 "' is not a pattern sbatch fills (%j %A %a %x %N %n %u %t %s %J and %%); write "
                 "%% for a percent sign");
    }
    if (width > 10) return Err("zero-padding to more than 10 digits; Slurm allows at most 10");
    out += width ? "$(printf %0" + std::to_string(width) + "d \"" + var + "\")" : var;
    i = j;
  }
  return out + "\"";
}

}  // namespace hangar::cli::sbatch
