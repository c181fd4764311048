// JobSpec: what a user asks for, as written in a job file (docs/job-format.md). Cluster-agnostic:
// whether it fits a particular cluster is the scheduler's question (sched::CompileGang).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"
#include "common/time.h"
#include "job/artifact_spec.h"
#include "job/batch_spec.h"
#include "job/container_spec.h"
#include "job/node_list_spec.h"
#include "job/progress_spec.h"

namespace hangar::job {

enum class Tier : uint8_t { kGuaranteed, kOpportunistic };
std::string_view TierName(Tier t);

enum class GpuKind : uint8_t {
  kNone,    // CPU-only task
  kWhole,   // `count` whole GPUs
  kShared,  // a share of one GPU: `milli` < 1000 and `memory_mib` of its memory
  kMig,     // one MIG instance of `mig_profile`: `mig_slices` compute slices of 7, `memory_mib`
};

struct GpuRequest {
  GpuKind kind = GpuKind::kNone;
  int count = 0;            // whole GPUs per replica (1 for shared and MIG)
  int64_t milli = 0;        // per GPU: 1000 for whole, < 1000 for shared
  int64_t memory_mib = 0;   // shared/MIG: GPU memory reserved on the GPU
  std::string mig_profile;  // e.g. "3g.40gb"
  int mig_slices = 0;
};

struct TaskGroupSpec {
  std::string name = "main";
  int replicas = 1;
  // At most this many of the group's replicas on one node (0: no limit). sbatch sets 1 for
  // --nodes=N, so that N nodes are N distinct hosts, as in Slurm.
  int max_per_node = 0;
  GpuRequest gpu;
  std::vector<std::string> gpu_models;  // empty: any model
  int64_t min_gpu_memory_mib = 0;
  int64_t cpu_per_gpu = 0;     // milli-cores per GPU
  int64_t memory_per_gpu = 0;  // MiB per GPU
  int64_t cpu = 0;             // milli-cores per replica, on top of the per-GPU part
  int64_t memory = 0;          // MiB per replica, on top of the per-GPU part
  cluster::Labels node_selector;
  std::vector<std::string> command;  // argv; a single string in YAML becomes {"/bin/sh","-c",s}
  std::vector<std::pair<std::string, std::string>> env;
  // Where the command runs: an absolute path that exists on the nodes (shared storage, or the
  // same checkout everywhere). Empty: a fresh private folder the agent makes per task. With an
  // image: a path inside the container (empty: the image's own).
  std::string workdir;
  // `image:` and its mounts: the task runs in a container (docs/containers.md). Empty: a process.
  ContainerSpec container;
  // `artifacts:` (and the job's): files staged into the node's cache before the task starts,
  // visible read-only in the task (docs/data.md).
  std::vector<ArtifactSpec> artifacts;

  int GpusPerReplica() const { return gpu.kind == GpuKind::kNone ? 0 : gpu.count; }
  int64_t ReplicaMilliCpu() const { return cpu + cpu_per_gpu * GpusPerReplica(); }
  int64_t ReplicaMemoryMiB() const { return memory + memory_per_gpu * GpusPerReplica(); }
  int64_t ReplicaMilliGpu() const;  // whole: count*1000; shared: milli; MIG: slices*1000/7
};

struct TopologyConstraint {
  cluster::Level same = cluster::Level::kCluster;  // kCluster: no constraint
  bool required = false;
};

struct CheckpointSpec {
  int signal = 10;  // SIGUSR1
  Duration grace = 5 * kMinute;
};

// What a running gang does when one of its nodes fails or is drained and no spare or free node can
// replace it in place (docs/goodput.md): `on_node_failure: {wait_for_node: 10m}` holds its healthy
// nodes for it up to that long, until a node (the failed one repaired, a freed one, a spare) can
// take the failed node's tasks; 0, the default, releases them and requeues the job whole.
struct NodeFailureSpec {
  static constexpr Duration kMaxWait = 24 * 60 * kMinute;
  Duration wait_for_node = 0;
};

// The Unix account a job's tasks run as (docs/rbac.md). Set by the controller from the
// submitting token (never from what a job file says); empty with `--auth none`, where tasks run
// as the agent's own user.
struct RunAs {
  static constexpr uint32_t kMaxId = 4294967294u;  // (uid_t)-1 means "unchanged" to the kernel
  static constexpr size_t kMaxGroups = 256;
  std::string account;           // a name every node resolves (passwd and group databases); or
  std::optional<uint32_t> uid;   // numbers, used as they are, without an account on the node:
  uint32_t gid = 0;              //   the primary group
  std::vector<uint32_t> groups;  //   and the supplementary groups
  bool empty() const { return account.empty() && !uid; }
  bool IsRoot() const { return uid ? *uid == 0 : account == "root"; }
  // "account alice", "uid 61001 gid 61001 groups 61010,61011"
  std::string Describe() const;
  nlohmann::json ToJson() const;  // {} when empty
  // From {"account": NAME} or {"uid": N, "gid": N, "groups": [...]} (gid defaults to uid).
  static StatusOr<RunAs> FromJson(const nlohmann::json& j);
  // A name goes without numbers, and gid and groups with a uid.
  Status Check() const;
  // Whether `name` is one a node could have: 1-32 letters, digits, '.', '_' or '-'.
  static Status CheckAccountName(const std::string& name);
};

struct JobSpec {
  std::string name;
  std::string queue = "default";
  std::string user;  // set by the server from the caller's identity
  RunAs run_as;      // likewise
  int priority = 0;
  Tier tier = Tier::kGuaranteed;
  std::vector<TaskGroupSpec> tasks;
  TopologyConstraint topology;
  Duration time_limit = 0;    // 0: none
  Duration min_run_time = 0;  // not preempted before this much run time
  CheckpointSpec checkpoint;
  NodeFailureSpec on_node_failure;
  ProgressSpec progress;  // hang and straggler detection from the tasks' reports (progress_spec.h)
  ArraySpec array;        // empty: one job (batch_spec.h)
  Dependencies after;     // jobs that must end (a certain way) before this one starts
  // `begin:` not started before this time (Unix ms; 0: as soon as it can), as sbatch --begin.
  Time begin = 0;
  // `hold: true`: submitted held, started once `hangar release ID` (sbatch --hold).
  bool hold = false;
  std::string reservation;  // runs inside this reservation's window, on its nodes ("": none)
  NodeListSpec nodes;       // include_nodes / exclude_nodes (node_list_spec.h)
  // A label the job is accounted under (`hangar history`, sacct's Account), as Slurm's
  // --account; it does not choose the queue.
  std::string account;
  // A session (`hangar run`, docs/interactive.md): shown as `interactive`; with `terminal`, its
  // one task runs under a pseudo-terminal its agent keeps, for `hangar attach`.
  bool interactive = false;
  bool terminal = false;
  // Without `terminal`: the task's stdin is a pipe its agent keeps, which `hangar run -i` (an
  // attach session) feeds and closes; else stdin is empty.
  bool stdin_open = false;

  int TotalReplicas() const;
  int64_t TotalMilliGpu() const;
};

// Parses a job file (YAML, or JSON, which is YAML too). `source_name` is what errors call it.
// Every error is "source:line: what is wrong; what to write instead".
StatusOr<JobSpec> ParseJobSpec(std::string_view text, const std::string& source_name);
StatusOr<JobSpec> LoadJobFile(const std::string& path);

// Checks the rules that hold on any cluster (positive counts, one GPU form per task, ...).
Status ValidateJobSpec(const JobSpec& spec);
// Makes relative workdirs absolute against `base` (the job file's folder): `hangar submit`
// does this before it sends the spec, so `workdir: .` is where the job file is.
void ResolveWorkdirs(JobSpec* spec, const std::string& base);
// What the controller accepts: every workdir absolute (a relative one means nothing on a node).
Status RequireAbsoluteWorkdirs(const JobSpec& spec);

// JSON round trip, for the store and the API.
nlohmann::json JobSpecToJson(const JobSpec& spec);
StatusOr<JobSpec> JobSpecFromJson(const nlohmann::json& j);

// "SIGUSR1" or "USR1" or "10" to 10.
std::optional<int> ParseSignal(std::string_view name);
std::string SignalName(int sig);
// "3g.40gb" to compute slices (3) and memory (40 GiB); the name must be a profile of some MIG
// part (cluster/mig_geometry.h).
StatusOr<std::pair<int, int64_t>> ParseMigProfile(std::string_view profile);

}  // namespace hangar::job
