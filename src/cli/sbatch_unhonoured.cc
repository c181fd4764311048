#include "cli/sbatch_unhonoured.h"

namespace hangar::cli::sbatch {

namespace {

constexpr const char* kNoBinding =
    "Hangar does not bind a task's threads to cores or sockets; the task sees the CPUs it asked";
constexpr const char* kNoMail =
    "Hangar sends no mail; follow the job with `hangar events job/ID` or `hangar jobs`";
constexpr const char* kNothingHere = "it has no effect on a Hangar job";

using A = ArgKind;

constexpr UnhonouredDirective kUnhonoured[] = {
    // Accepted, with a warning.
    {"mail-type", 0, A::kValue, false, kNoMail},
    {"mail-user", 0, A::kValue, false, kNoMail},
    {"hint", 0, A::kValue, false, kNoBinding},
    {"threads-per-core", 0, A::kValue, false, kNoBinding},
    {"ntasks-per-core", 0, A::kValue, false, kNoBinding},
    {"ntasks-per-socket", 0, A::kValue, false, kNoBinding},
    {"sockets-per-node", 0, A::kValue, false, kNoBinding},
    {"cores-per-socket", 0, A::kValue, false, kNoBinding},
    {"extra-node-info", 'B', A::kValue, false, kNoBinding},
    {"mem-bind", 0, A::kValue, false, kNoBinding},
    {"gpu-bind", 0, A::kValue, false,
     "each task of `srun` sees all of its node's GPUs of the job (CUDA_VISIBLE_DEVICES); pick one "
     "with SLURM_LOCALID"},
    {"distribution", 'm', A::kValue, false,
     "srun starts a node's tasks in blocks (node r runs tasks r*n to r*n+n-1), Slurm's default"},
    {"switches", 0, A::kValue, false,
     "Hangar places a gang on the smallest fabric domain that fits it anyway"},
    {"contiguous", 0, A::kFlag, false,
     "Hangar places a gang on the smallest fabric domain that fits it anyway"},
    {"spread-job", 0, A::kFlag, false, kNothingHere},
    {"use-min-nodes", 0, A::kFlag, false, kNothingHere},
    {"licenses", 'L', A::kValue, false, "Hangar keeps no licence counts; none is reserved"},
    {"comment", 0, A::kValue, false, kNothingHere},
    {"wckey", 0, A::kValue, false, kNothingHere},
    {"verbose", 'v', A::kFlag, false, kNothingHere},
    {"quiet", 'Q', A::kFlag, false, kNothingHere},
    {"parsable", 0, A::kFlag, false, "give --parsable to `hangar sbatch` itself"},
    {"propagate", 0, A::kOptionalValue, false,
     "a Hangar task gets the node's resource limits, not the submitter's"},
    {"kill-on-invalid-dep", 0, A::kValue, false,
     "a Hangar job whose dependency can no longer be met is cancelled"},
    {"gpu-freq", 0, A::kValue, false, "Hangar leaves GPU clocks as the node has them"},
    {"cpu-freq", 0, A::kValue, false, "Hangar leaves CPU frequencies as the node has them"},
    {"acctg-freq", 0, A::kValue, false, "Hangar samples GPU use at its own interval"},
    {"network", 0, A::kValue, false,
     "Hangar sets NCCL's network (rails, HCAs) for the job's GPUs itself"},
    {"gres-flags", 0, A::kValue, false, kNothingHere},
    {"prefer", 0, A::kValue, false, "a preference is not a requirement; Hangar picks the nodes"},
    {"no-kill", 'k', A::kOptionalValue, false,
     "a Hangar gang whose node fails is requeued whole (with the checkpoint signal first)"},
    {"no-requeue", 0, A::kFlag, false,
     "Hangar requeues a job that a preemption or a drain stopped (HANGAR_RESTART_COUNT says "
     "which run it is)"},
    {"profile", 0, A::kValue, false, "Hangar's per-job accounting is `hangar history`"},
    {"overcommit", 'O', A::kFlag, false, "Hangar gives each job what it asked"},
    {"oversubscribe", 's', A::kFlag, false,
     "Hangar shares nodes between jobs already; GPUs are shared only through a job file's "
     "gpu_fraction"},
    {"get-user-env", 0, A::kOptionalValue, false,
     "a Hangar task does not load the submitter's login environment; set what it needs with "
     "--export=NAME=value"},
    {"deadline", 0, A::kValue, false,
     "Hangar does not cancel a job that would end late; --time bounds it"},
    {"priority", 0, A::kValue, false, "a job's priority comes from --qos and --nice here"},
    {"wait", 'W', A::kFlag, false,
     "hangar sbatch returns at once; follow the job with `hangar logs -f ID`"},
    {"clusters", 'M', A::kValue, false, "Hangar submits to the one cluster --server names"},
    {"delay-boot", 0, A::kValue, false, "Hangar does not reboot nodes for jobs"},
    {"reboot", 0, A::kFlag, false, "Hangar does not reboot nodes for jobs"},
    {"core-spec", 'S', A::kValue, false, kNoBinding},
    {"thread-spec", 0, A::kValue, false, kNoBinding},
    {"mcs-label", 0, A::kValue, false, kNothingHere},
    {"power", 0, A::kValue, false, kNothingHere},
    {"tmp", 0, A::kValue, false,
     "Hangar does not reserve local disk; the node's scratch is shared"},
    {"mincpus", 0, A::kValue, false, "give --cpus-per-task for the CPUs each task needs"},
    {"wait-all-nodes", 0, A::kValue, false, "a Hangar gang starts when all of its nodes are ready"},
    {"time-min", 0, A::kValue, false, "the job asks its whole --time"},
    {"gpus-per-socket", 0, A::kValue, false, kNoBinding},
    {"cluster-constraint", 0, A::kValue, false, "Hangar submits to the one cluster --server names"},
    {"ignore-pbs", 0, A::kFlag, false, kNothingHere},
    {"batch", 0, A::kValue, false, "the script runs on the job's first node"},
    // Refused: the job would do something else than the script asks.
    {"wrap", 0, A::kValue, true,
     "--wrap is a command-line option (hangar sbatch --wrap=COMMAND); in a script, write the "
     "command "
     "itself"},
    {"test-only", 0, A::kFlag, true, "use `hangar sbatch --dry-run`"},
    {"uid", 0, A::kValue, true, "a Hangar job runs as the account of the token that submits it"},
    {"gid", 0, A::kValue, true, "a Hangar job runs as the account of the token that submits it"},
    {"input", 'i', A::kValue, true,
     "a Hangar task's standard input is empty; redirect it in the script (< FILE)"},
    {"container", 0, A::kValue, true,
     "give the image in a job file (image:, docs/containers.md); an OCI bundle path is not read"},
    {"export-file", 0, A::kValue, true, "give values as --export=NAME=value,NAME2=value2"},
    {"x11", 0, A::kOptionalValue, true, "Hangar forwards no X11 display"},
    {"nodefile", 'F', A::kValue, true, "Hangar chooses the nodes; give --nodes"},
};

}  // namespace

const UnhonouredDirective* FindUnhonoured(std::string_view name, char short_name) {
  for (const auto& u : kUnhonoured) {
    if ((short_name && u.short_name == short_name) || (!short_name && name == u.name)) return &u;
  }
  return nullptr;
}

}  // namespace hangar::cli::sbatch
