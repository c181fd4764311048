#include "job/job_spec.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "cluster/mig_geometry.h"
#include "common/units.h"
#include "common/yaml_util.h"
#include "job/spec_text.h"

namespace hangar::job {

std::string_view TierName(Tier t) {
  return t == Tier::kGuaranteed ? "guaranteed" : "opportunistic";
}

int64_t TaskGroupSpec::ReplicaMilliGpu() const {
  switch (gpu.kind) {
    case GpuKind::kNone:
      return 0;
    case GpuKind::kWhole:
      return gpu.count * cluster::kMilliPerGpu;
    case GpuKind::kShared:
      return gpu.milli;
    case GpuKind::kMig:
      return gpu.mig_slices * cluster::kMilliPerGpu / cluster::kMigSlicesPerGpu;
  }
  return 0;
}

int JobSpec::TotalReplicas() const {
  int n = 0;
  for (const auto& t : tasks) n += t.replicas;
  return n;
}

int64_t JobSpec::TotalMilliGpu() const {
  int64_t n = 0;
  for (const auto& t : tasks) n += t.ReplicaMilliGpu() * t.replicas;
  return n;
}

namespace {
const std::pair<const char*, int> kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},  {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM},  {"CONT", SIGCONT},
    {"STOP", SIGSTOP}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH}};
}  // namespace

std::optional<int> ParseSignal(std::string_view name) {
  if (name.starts_with("SIG")) name.remove_prefix(3);
  for (auto [n, v] : kSignals) {
    if (name == n) return v;
  }
  int v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
    if (v > 64) return std::nullopt;
  }
  if (name.empty() || v < 1) return std::nullopt;
  return v;
}

std::string SignalName(int sig) {
  for (auto [n, v] : kSignals) {
    if (v == sig) return std::string("SIG") + n;
  }
  return std::to_string(sig);
}

StatusOr<std::pair<int, int64_t>> ParseMigProfile(std::string_view profile) {
  static const std::regex re(R"(^([1-7])g\.([0-9]+)gb$)");
  std::cmatch m;
  std::string p(profile);
  if (!std::regex_match(p.c_str(), m, re)) {
    return Status::InvalidArgument("'" + p +
                                   "' is not a MIG profile; write it like 1g.10gb or 3g.40gb");
  }
  int slices = std::stoi(m[1]);
  if (slices == 5 || slices == 6) {
    return Status::InvalidArgument("'" + p + "': MIG has no " + std::to_string(slices) +
                                   "-slice profile; use 1g, 2g, 3g, 4g or 7g");
  }
  if (!cluster::IsKnownMigProfile(p)) {
    return Status::InvalidArgument("'" + p +
                                   "' is not a MIG profile of any GPU Hangar knows; use one of " +
                                   cluster::KnownMigProfiles());
  }
  return std::pair<int, int64_t>(slices, std::stoll(m[2]) * 1024);
}

std::string RunAs::Describe() const {
  if (!uid) return account.empty() ? "the agent's own user" : "account " + account;
  std::string out = "uid " + std::to_string(*uid) + " gid " + std::to_string(gid);
  for (size_t i = 0; i < groups.size(); ++i)
    out += (i ? "," : " groups ") + std::to_string(groups[i]);
  return out;
}

nlohmann::json RunAs::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  if (uid) {
    j["uid"] = *uid;
    j["gid"] = gid;
    if (!groups.empty()) j["groups"] = groups;
  } else if (!account.empty()) {
    j["account"] = account;
  }
  return j;
}

Status RunAs::Check() const {
  if (!account.empty() && uid) {
    return Status::InvalidArgument(
        "give either an account (a name the nodes resolve) or a uid (with gid and "
        "groups), not both");
  }
  if (!uid && (gid != 0 || !groups.empty())) {
    return Status::InvalidArgument(
        "gid and groups go with a uid; an account's groups come from the nodes' group "
        "database");
  }
  if (groups.size() > kMaxGroups) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxGroups) +
                                   " supplementary groups");
  }
  return Status::Ok();
}

Status RunAs::CheckAccountName(const std::string& name) {
  static const std::regex name_re(R"(^[A-Za-z0-9_][A-Za-z0-9._-]{0,31}$)");
  if (std::regex_match(name, name_re)) return Status::Ok();
  return Status::InvalidArgument("account '" + name +
                                 "' is not a Unix account name (1-32 letters, digits, '.', "
                                 "'_' or '-', not starting with '.' or '-')");
}

StatusOr<RunAs> RunAs::FromJson(const nlohmann::json& j) {
  const std::string form =
      "run_as is {\"account\": NAME} or {\"uid\": N, \"gid\": N, \"groups\": [N, ...]}";
  if (!j.is_object()) return Status::InvalidArgument(form);
  auto id = [&](const char* key) -> StatusOr<std::optional<uint32_t>> {
    if (!j.contains(key)) return std::optional<uint32_t>();
    const auto& v = j[key];
    if (!v.is_number_unsigned() || v.get<uint64_t>() > kMaxId) {
      return Status::InvalidArgument(std::string(key) + " must be a number from 0 to " +
                                     std::to_string(kMaxId));
    }
    return std::optional<uint32_t>(static_cast<uint32_t>(v.get<uint64_t>()));
  };
  RunAs r;
  for (const auto& [key, value] : j.items()) {
    if (key != "account" && key != "uid" && key != "gid" && key != "groups") {
      return Status::InvalidArgument("run_as has no field '" + key + "'; " + form);
    }
  }
  if (j.contains("account")) {
    if (!j["account"].is_string() || j["account"].get<std::string>().empty()) {
      return Status::InvalidArgument("account must be a non-empty string");
    }
    r.account = j["account"].get<std::string>();
  }
  HANGAR_ASSIGN_OR_RETURN(r.uid, id("uid"));
  HANGAR_ASSIGN_OR_RETURN(auto gid, id("gid"));
  if (gid && !r.uid) return Status::InvalidArgument("gid goes with a uid");
  r.gid = gid.value_or(r.uid.value_or(0));
  if (j.contains("groups")) {
    if (!j["groups"].is_array())
      return Status::InvalidArgument("groups must be a list of group ids");
    if (!r.uid)
      return Status::InvalidArgument(
          "groups go with a uid; an account's groups come from the nodes");
    for (const auto& g : j["groups"]) {
      if (!g.is_number_unsigned() || g.get<uint64_t>() > kMaxId) {
        return Status::InvalidArgument("groups must be numbers from 0 to " +
                                       std::to_string(kMaxId));
      }
      r.groups.push_back(static_cast<uint32_t>(g.get<uint64_t>()));
    }
  }
  HANGAR_RETURN_IF_ERROR(r.Check());
  return r;
}

namespace {

// A YAML node (a job file's scalars, maps and lists) as JSON, numbers as numbers.
nlohmann::json YamlToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& kv : n) j[kv.first.as<std::string>("")] = YamlToJson(kv.second);
    return j;
  }
  if (n.IsSequence()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& e : n) j.push_back(YamlToJson(e));
    return j;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string s = n.Scalar();
  if (!s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos) {
    return std::stoull(s);
  }
  return s;
}

class JobParser {
 public:
  // `fresh`: a new submission, held to every rule. A stored spec (JobSpecFromJson) was accepted
  // under the rules of its day and is read as it is, so that a stricter rule never keeps a
  // controller from restoring the jobs it already has.
  JobParser(const YamlSource& src, bool fresh) : src_(src), fresh_(fresh) {}

  StatusOr<JobSpec> Parse(const YAML::Node& root) {
    if (!root.IsMap())
      return src_.Error(root, "a job file is a map with at least 'name' and 'tasks'");
    HANGAR_RETURN_IF_ERROR(CheckAllKeys(root));
    JobSpec spec;
    HANGAR_ASSIGN_OR_RETURN(spec.name, src_.String(root, "name"));
    static const std::regex name_re(R"(^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$)");
    if (!std::regex_match(spec.name, name_re)) {
      return src_.Error(root["name"], "name '" + spec.name +
                                          "' must be 1-63 letters, digits, '.', '_' or '-', "
                                          "starting with a letter or digit");
    }
    HANGAR_ASSIGN_OR_RETURN(auto queue, src_.OptString(root, "queue"));
    if (queue) spec.queue = *queue;
    HANGAR_ASSIGN_OR_RETURN(auto user, src_.OptString(root, "user"));
    if (user) spec.user = *user;
    HANGAR_ASSIGN_OR_RETURN(auto reservation, src_.OptString(root, "reservation"));
    if (reservation) spec.reservation = *reservation;
    if (const YAML::Node run_as = root["run_as"]) {
      auto r = RunAs::FromJson(YamlToJson(run_as));
      if (!r.ok()) return src_.Error(run_as, r.status().message());
      spec.run_as = std::move(*r);
    }
    HANGAR_ASSIGN_OR_RETURN(auto prio, src_.OptInt(root, "priority", -1000000, 1000000));
    if (prio) spec.priority = static_cast<int>(*prio);
    HANGAR_ASSIGN_OR_RETURN(auto tier, src_.OptString(root, "tier"));
    if (tier) {
      if (*tier == "guaranteed")
        spec.tier = Tier::kGuaranteed;
      else if (*tier == "opportunistic")
        spec.tier = Tier::kOpportunistic;
      else
        return src_.Error(root["tier"],
                          "tier must be guaranteed or opportunistic, not '" + *tier + "'");
    }
    HANGAR_ASSIGN_OR_RETURN(spec.time_limit, DurationField(root, "time_limit"));
    if (fresh_ && root["time_limit"] && spec.time_limit <= 0) {
      return src_.Error(
          root["time_limit"],
          "time_limit must be positive, such as 30m or 2h; leave it out for no limit");
    }
    HANGAR_ASSIGN_OR_RETURN(spec.min_run_time, DurationField(root, "min_run_time"));
    HANGAR_ASSIGN_OR_RETURN(auto interactive, src_.OptBool(root, "interactive"));
    spec.interactive = interactive.value_or(false);
    HANGAR_ASSIGN_OR_RETURN(auto terminal, src_.OptBool(root, "terminal"));
    spec.terminal = terminal.value_or(false);
    HANGAR_ASSIGN_OR_RETURN(auto stdin_open, src_.OptBool(root, "stdin"));
    spec.stdin_open = stdin_open.value_or(false);
    if (const YAML::Node cp = root["checkpoint"])
      HANGAR_RETURN_IF_ERROR(ParseCheckpoint(cp, &spec));
    if (const YAML::Node nf = root["on_node_failure"])
      HANGAR_RETURN_IF_ERROR(ParseNodeFailure(nf, &spec));
    if (const YAML::Node pr = root["progress"]) {
      auto p = ProgressSpecFromJson(YamlToJson(pr));
      if (!p.ok()) return src_.Error(pr, p.status().message());
      spec.progress = *p;
    }
    if (const YAML::Node topo = root["topology"])
      HANGAR_RETURN_IF_ERROR(ParseTopology(topo, &spec));
    HANGAR_RETURN_IF_ERROR(ParseBatch(root, &spec));
    HANGAR_RETURN_IF_ERROR(ParseNodeRules(root, &spec));
    const YAML::Node tasks = root["tasks"];
    if (!tasks || !tasks.IsSequence() || tasks.size() == 0) {
      return src_.Error(tasks ? tasks : root,
                        "'tasks' must be a non-empty list of task groups "
                        "(each with replicas, gpus and command)");
    }
    HANGAR_ASSIGN_OR_RETURN(auto workdir, src_.OptString(root, "workdir"));  // the groups' default
    HANGAR_ASSIGN_OR_RETURN(auto image, src_.OptString(root, "image"));
    std::vector<ArtifactSpec> job_artifacts;  // every group's, before its own
    HANGAR_RETURN_IF_ERROR(ParseArtifacts(root, &job_artifacts));
    for (const auto& t : tasks) {
      HANGAR_ASSIGN_OR_RETURN(TaskGroupSpec group, ParseTaskGroup(t));
      if (group.workdir.empty() && workdir) group.workdir = *workdir;
      if (group.container.image.empty() && image) group.container.image = *image;
      group.artifacts.insert(group.artifacts.begin(), job_artifacts.begin(), job_artifacts.end());
      if (Status c = CheckContainer(group); !c.ok()) return src_.Error(t, c.message());
      for (const auto& a : group.artifacts) {
        if (Status c = CheckArtifact(a, !group.container.empty()); !c.ok()) {
          return src_.Error(t, "task group '" + group.name + "': " + c.message());
        }
      }
      for (const auto& other : spec.tasks) {
        if (other.name == group.name) {
          return src_.Error(
              t, "two task groups are named '" + group.name + "'; give each its own name");
        }
      }
      spec.tasks.push_back(std::move(group));
    }
    Status v = ValidateJobSpec(spec);
    if (!v.ok()) return src_.Error(root, v.message());
    return spec;
  }

 private:
  static constexpr size_t kMaxPathBytes = 4096;  // PATH_MAX

  // A task group's name is shown in tables and makes task ids and folders: a name, not a path.
  Status CheckGroupName(const YAML::Node& t, const std::string& name) {
    static const std::regex name_re(R"(^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$)");
    if (std::regex_match(name, name_re)) return Status::Ok();
    std::string shown = name.size() > 40 ? name.substr(0, 40) + "..." : name;
    return src_.Error(t["name"],
                      "task group name '" + shown + "' (" + std::to_string(name.size()) +
                          " bytes) must be 1-63 letters, digits, '.', '_' or '-', starting with a "
                          "letter or digit");
  }

  static constexpr std::string_view kJobKeys[] = {
      "name",      "queue",         "user",          "priority",     "tier",
      "tasks",     "topology",      "time_limit",    "min_run_time", "checkpoint",
      "workdir",   "run_as",        "array",         "after",        "image",
      "artifacts", "reservation",   "interactive",   "terminal",     "stdin",
      "progress",  "include_nodes", "exclude_nodes", "account",      "on_node_failure",
      "begin",     "hold"};
  static constexpr std::string_view kArtifactKeys[] = {"source", "sha256",   "size",
                                                       "path",   "shard_by", "shards"};
  static constexpr std::string_view kShardKeys[] = {"source", "sha256", "size"};
  static constexpr std::string_view kCheckpointKeys[] = {"signal", "grace"};
  static constexpr std::string_view kNodeFailureKeys[] = {"wait_for_node"};
  static constexpr std::string_view kTopologyKeys[] = {"same", "mode"};
  static constexpr std::string_view kTaskKeys[] = {
      "name",          "replicas",       "gpus",        "gpu_fraction",   "gpu_memory", "mig",
      "gpu_models",    "min_gpu_memory", "cpu_per_gpu", "memory_per_gpu", "cpu",        "memory",
      "node_selector", "command",        "env",         "workdir",        "image",      "mounts",
      "shm_size",      "artifacts",      "max_per_node"};

  // Every unknown key of the job, its checkpoint, topology and task groups in one error, so a
  // spec with several typos is fixed in one round.
  Status CheckAllKeys(const YAML::Node& root) {
    std::vector<std::string> unknown;
    src_.UnknownKeys(root, "the job", kJobKeys, &unknown);
    if (const YAML::Node cp = root["checkpoint"])
      src_.UnknownKeys(cp, "checkpoint", kCheckpointKeys, &unknown);
    if (const YAML::Node topo = root["topology"])
      src_.UnknownKeys(topo, "topology", kTopologyKeys, &unknown);
    ArtifactKeys(root, &unknown);
    if (const YAML::Node tasks = root["tasks"]; tasks && tasks.IsSequence()) {
      for (const auto& t : tasks) {
        src_.UnknownKeys(t, "a task group", kTaskKeys, &unknown);
        if (t.IsMap()) ArtifactKeys(t, &unknown);
      }
    }
    return JoinUnknownKeys(unknown);
  }

  StatusOr<Duration> DurationField(const YAML::Node& map, const char* key) {
    HANGAR_ASSIGN_OR_RETURN(auto text, src_.OptString(map, key));
    if (!text) return Duration{0};
    auto d = ParseDuration(*text);
    if (!d.ok()) return src_.Error(map[key], std::string(key) + ": " + d.status().message());
    return *d;
  }

  Status ParseCheckpoint(const YAML::Node& cp, JobSpec* spec) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(cp, "checkpoint", kCheckpointKeys));
    HANGAR_ASSIGN_OR_RETURN(auto sig, src_.OptString(cp, "signal"));
    if (sig) {
      auto s = ParseSignal(*sig);
      if (!s)
        return src_.Error(cp["signal"],
                          "'" + *sig + "' is not a signal; use e.g. SIGUSR1 or SIGTERM");
      if (*s == SIGKILL || *s == SIGSTOP) {
        return src_.Error(
            cp["signal"],
            "the checkpoint signal cannot be SIGKILL or SIGSTOP (they cannot be caught)");
      }
      spec->checkpoint.signal = *s;
    }
    HANGAR_ASSIGN_OR_RETURN(auto grace, DurationField(cp, "grace"));
    if (cp["grace"]) spec->checkpoint.grace = grace;
    return Status::Ok();
  }

  // on_node_failure: {wait_for_node: 10m} (NodeFailureSpec).
  Status ParseNodeFailure(const YAML::Node& nf, JobSpec* spec) {
    if (!nf.IsMap()) {
      return src_.Error(nf,
                        "on_node_failure must be a map, such as {wait_for_node: 10m}: how long a "
                        "gang holds its healthy nodes for a replacement of a failed one");
    }
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(nf, "on_node_failure", kNodeFailureKeys));
    HANGAR_ASSIGN_OR_RETURN(auto wait, DurationField(nf, "wait_for_node"));
    if (wait < 0 || wait > NodeFailureSpec::kMaxWait) {
      return src_.Error(nf["wait_for_node"],
                        "on_node_failure.wait_for_node must be from 0 (release the healthy nodes "
                        "and requeue at once) to 24h, such as 10m");
    }
    spec->on_node_failure.wait_for_node = wait;
    return Status::Ok();
  }

  // array: "0-49%8" and after: {ok: [...], any: [...], notok: [...]} (batch_spec.h).
  Status ParseBatch(const YAML::Node& root, JobSpec* spec) {
    HANGAR_ASSIGN_OR_RETURN(auto array, src_.OptString(root, "array"));
    if (array) {
      auto a = ParseArraySpec(*array);
      if (!a.ok()) return src_.Error(root["array"], a.status().message());
      spec->array = std::move(*a);
    }
    if (const YAML::Node after = root["after"]) {
      auto d = DependenciesFromJson(YamlToJson(after));
      if (!d.ok()) return src_.Error(after, d.status().message());
      spec->after = std::move(*d);
    }
    HANGAR_ASSIGN_OR_RETURN(auto begin, src_.OptString(root, "begin"));
    if (begin) {
      auto t = ParseBeginTime(*begin);
      if (!t.ok()) return src_.Error(root["begin"], t.status().message());
      spec->begin = *t;
    }
    HANGAR_ASSIGN_OR_RETURN(auto hold, src_.OptBool(root, "hold"));
    spec->hold = hold.value_or(false);
    return Status::Ok();
  }

  // include_nodes, exclude_nodes (node_list_spec.h) and the accounting label.
  Status ParseNodeRules(const YAML::Node& root, JobSpec* spec) {
    for (auto [key, out] : {std::pair{"include_nodes", &spec->nodes.include},
                            std::pair{"exclude_nodes", &spec->nodes.exclude}}) {
      const YAML::Node n = root[key];
      if (!n) continue;
      auto names = ParseNodeNames(YamlToJson(n), key);
      if (!names.ok()) return src_.Error(n, names.status().message());
      *out = std::move(*names);
    }
    if (Status c = CheckNodeLists(spec->nodes); !c.ok())
      return src_.Error(root["exclude_nodes"], c.message());
    HANGAR_ASSIGN_OR_RETURN(auto account, src_.OptString(root, "account"));
    if (account) {
      static const std::regex account_re(R"(^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$)");
      if (!std::regex_match(*account, account_re)) {
        return src_.Error(root["account"],
                          "account '" + account->substr(0, 80) +
                              "' must be 1-63 letters, digits, '.', '_' or '-', starting with a "
                              "letter or digit");
      }
      spec->account = *account;
    }
    return Status::Ok();
  }

  Status ParseTopology(const YAML::Node& topo, JobSpec* spec) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(topo, "topology", kTopologyKeys));
    HANGAR_ASSIGN_OR_RETURN(std::string same, src_.String(topo, "same"));
    auto level = cluster::ParseLevel(same);
    if (!level || *level == cluster::Level::kCluster) {
      return src_.Error(
          topo["same"],
          "topology.same must be nvlink_domain, node, leaf or spine, not '" + same + "'");
    }
    spec->topology.same = *level;
    HANGAR_ASSIGN_OR_RETURN(auto mode, src_.OptString(topo, "mode"));
    std::string m = mode.value_or("required");
    if (m != "required" && m != "preferred") {
      return src_.Error(topo["mode"],
                        "topology.mode must be required or preferred, not '" + m + "'");
    }
    spec->topology.required = m == "required";
    return Status::Ok();
  }

  StatusOr<int64_t> Quantity(const YAML::Node& map, const char* key,
                             StatusOr<int64_t> (*parse)(std::string_view)) {
    HANGAR_ASSIGN_OR_RETURN(auto text, src_.OptString(map, key));
    if (!text) return int64_t{0};
    auto v = parse(*text);
    if (!v.ok()) return src_.Error(map[key], std::string(key) + ": " + v.status().message());
    return *v;
  }

  Status ParseGpu(const YAML::Node& t, TaskGroupSpec* g) {
    int forms = !!t["gpus"] + !!t["gpu_fraction"] + !!t["mig"];
    if (forms > 1) {
      return src_.Error(t,
                        "a task asks GPUs in one form only: 'gpus' (whole), 'gpu_fraction' "
                        "(a share of one GPU) or 'mig' (a MIG slice)");
    }
    HANGAR_ASSIGN_OR_RETURN(int64_t gpu_mem, Quantity(t, "gpu_memory", ParseMemoryMiB));
    if (t["gpus"]) {
      HANGAR_ASSIGN_OR_RETURN(int64_t n, src_.Int(t, "gpus", 0, cluster::kMaxGpusPerNode));
      if (n > 0) g->gpu = {GpuKind::kWhole, static_cast<int>(n), cluster::kMilliPerGpu, 0, "", 0};
    } else if (t["gpu_fraction"]) {
      HANGAR_ASSIGN_OR_RETURN(int64_t milli, Quantity(t, "gpu_fraction", ParseMilliGpu));
      if (milli <= 0 || milli > 1000) {
        return src_.Error(t["gpu_fraction"],
                          "gpu_fraction must be above 0 and at most 1 (e.g. 0.25 or 250m)");
      }
      if (milli == 1000) {
        g->gpu = {GpuKind::kWhole, 1, cluster::kMilliPerGpu, 0, "", 0};
      } else {
        if (gpu_mem <= 0) {
          return src_.Error(t,
                            "a fractional GPU needs gpu_memory too (e.g. gpu_memory: 20Gi), "
                            "so that tasks sharing a GPU do not run out of its memory");
        }
        g->gpu = {GpuKind::kShared, 1, milli, gpu_mem, "", 0};
      }
    } else if (t["mig"]) {
      HANGAR_ASSIGN_OR_RETURN(std::string profile, src_.String(t, "mig"));
      auto parsed = ParseMigProfile(profile);
      if (!parsed.ok()) return src_.Error(t["mig"], parsed.status().message());
      g->gpu = {GpuKind::kMig, 1, 0, parsed->second, profile, parsed->first};
    }
    if (t["gpu_memory"] && g->gpu.kind == GpuKind::kWhole) {
      return src_.Error(t["gpu_memory"],
                        "gpu_memory goes with gpu_fraction; whole GPUs bring all "
                        "their memory (use min_gpu_memory to ask for bigger GPUs)");
    }
    return Status::Ok();
  }

  StatusOr<TaskGroupSpec> ParseTaskGroup(const YAML::Node& t) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(t, "a task group", kTaskKeys));
    TaskGroupSpec g;
    HANGAR_ASSIGN_OR_RETURN(auto name, src_.OptString(t, "name"));
    if (name) g.name = *name;
    if (fresh_) HANGAR_RETURN_IF_ERROR(CheckGroupName(t, g.name));
    HANGAR_ASSIGN_OR_RETURN(auto replicas, src_.OptInt(t, "replicas", 1, 100000));
    if (replicas) g.replicas = static_cast<int>(*replicas);
    HANGAR_ASSIGN_OR_RETURN(auto per_node, src_.OptInt(t, "max_per_node", 1, 100000));
    if (per_node) g.max_per_node = static_cast<int>(*per_node);
    HANGAR_RETURN_IF_ERROR(ParseGpu(t, &g));
    if (const YAML::Node models = t["gpu_models"]) {
      if (models.IsScalar()) {
        g.gpu_models.push_back(models.Scalar());
      } else if (models.IsSequence()) {
        for (const auto& m : models) g.gpu_models.push_back(m.as<std::string>(""));
      } else {
        return src_.Error(models, "gpu_models must be a list of model names, e.g. [H100-SXM-80GB]");
      }
    }
    HANGAR_ASSIGN_OR_RETURN(g.min_gpu_memory_mib, Quantity(t, "min_gpu_memory", ParseMemoryMiB));
    HANGAR_ASSIGN_OR_RETURN(g.cpu_per_gpu, Quantity(t, "cpu_per_gpu", ParseMilliCpu));
    HANGAR_ASSIGN_OR_RETURN(g.memory_per_gpu, Quantity(t, "memory_per_gpu", ParseMemoryMiB));
    HANGAR_ASSIGN_OR_RETURN(g.cpu, Quantity(t, "cpu", ParseMilliCpu));
    HANGAR_ASSIGN_OR_RETURN(g.memory, Quantity(t, "memory", ParseMemoryMiB));
    if ((g.cpu_per_gpu || g.memory_per_gpu) && g.GpusPerReplica() == 0) {
      return src_.Error(
          t, "cpu_per_gpu and memory_per_gpu need GPUs; for a CPU-only task use cpu and memory");
    }
    if (const YAML::Node sel = t["node_selector"]) {
      if (!sel.IsMap()) return src_.Error(sel, "node_selector must be a map of label: value");
      for (const auto& kv : sel)
        g.node_selector.emplace_back(kv.first.as<std::string>(""), kv.second.as<std::string>(""));
      std::sort(g.node_selector.begin(), g.node_selector.end());
    }
    if (const YAML::Node cmd = t["command"]) {
      if (cmd.IsScalar()) {
        g.command = {"/bin/sh", "-c", cmd.Scalar()};
      } else if (cmd.IsSequence()) {
        for (const auto& a : cmd) g.command.push_back(a.as<std::string>(""));
      } else {
        return src_.Error(cmd,
                          "command must be a string (run by /bin/sh -c) or a list of arguments");
      }
    }
    HANGAR_ASSIGN_OR_RETURN(auto workdir, src_.OptString(t, "workdir"));
    if (workdir) g.workdir = *workdir;
    if (fresh_ && g.workdir.size() > kMaxPathBytes) {
      return src_.Error(t["workdir"], "workdir is " + std::to_string(g.workdir.size()) +
                                          " bytes long; a path is at most " +
                                          std::to_string(kMaxPathBytes));
    }
    HANGAR_RETURN_IF_ERROR(ParseContainer(t, &g));
    HANGAR_RETURN_IF_ERROR(ParseArtifacts(t, &g.artifacts));
    if (const YAML::Node env = t["env"]) {
      if (!env.IsMap()) return src_.Error(env, "env must be a map of NAME: value");
      static const std::regex env_re(R"(^[A-Za-z_][A-Za-z0-9_]*$)");
      for (const auto& kv : env) {
        std::string k = kv.first.as<std::string>("");
        if (!std::regex_match(k, env_re)) {
          return src_.Error(kv.first, "'" + k + "' is not an environment variable name");
        }
        g.env.emplace_back(k, kv.second.as<std::string>(""));
      }
    }
    return g;
  }

  void ArtifactKeys(const YAML::Node& map, std::vector<std::string>* unknown) {
    const YAML::Node list = map["artifacts"];
    if (!list || !list.IsSequence()) return;
    for (const auto& a : list) {
      if (!a.IsMap()) continue;
      src_.UnknownKeys(a, "an artifact", kArtifactKeys, unknown);
      if (const YAML::Node shards = a["shards"]; shards && shards.IsSequence()) {
        for (const auto& s : shards) {
          if (s.IsMap()) src_.UnknownKeys(s, "a shard", kShardKeys, unknown);
        }
      }
    }
  }

  StatusOr<ArtifactObject> ParseArtifactObject(const YAML::Node& m) {
    ArtifactObject o;
    HANGAR_ASSIGN_OR_RETURN(auto source, src_.OptString(m, "source"));
    HANGAR_ASSIGN_OR_RETURN(auto sha, src_.OptString(m, "sha256"));
    HANGAR_ASSIGN_OR_RETURN(auto size, src_.OptString(m, "size"));
    if (source) o.source = *source;
    if (sha) {
      auto d = ParseSha256(*sha);
      if (!d.ok()) return src_.Error(m["sha256"], d.status().message());
      o.digest = *d;
    }
    if (size) {
      auto b = ParseByteSize(*size);
      if (!b.ok()) return src_.Error(m["size"], b.status().message());
      o.bytes = *b;
    }
    return o;
  }

  Status ParseArtifacts(const YAML::Node& map, std::vector<ArtifactSpec>* out) {
    const YAML::Node list = map["artifacts"];
    if (!list) return Status::Ok();
    if (!list.IsSequence())
      return src_.Error(list, "artifacts must be a list of {source, sha256, size, path}");
    for (const auto& m : list) {
      if (!m.IsMap()) return src_.Error(m, "an artifact is a map: {source, sha256, size, path}");
      ArtifactSpec a;
      HANGAR_ASSIGN_OR_RETURN(auto path, src_.OptString(m, "path"));
      HANGAR_ASSIGN_OR_RETURN(auto shard_by, src_.OptString(m, "shard_by"));
      if (path) a.path = *path;
      if (shard_by && *shard_by != "rank")
        return src_.Error(m["shard_by"], "shard_by can only be 'rank'");
      a.shard_by_rank = shard_by.has_value();
      const YAML::Node shards = m["shards"];
      if (shards && !a.shard_by_rank)
        return src_.Error(shards, "shards are split across tasks: add shard_by: rank");
      if (a.shard_by_rank && (!shards || !shards.IsSequence() || m["source"])) {
        return src_.Error(m,
                          "an artifact with shard_by: rank lists its files under shards: [{source, "
                          "sha256, size}, ...]");
      }
      if (shards) {
        for (const auto& s : shards) {
          HANGAR_ASSIGN_OR_RETURN(ArtifactObject o, ParseArtifactObject(s));
          a.objects.push_back(std::move(o));
        }
      } else {
        HANGAR_ASSIGN_OR_RETURN(ArtifactObject o, ParseArtifactObject(m));
        a.objects.push_back(std::move(o));
      }
      out->push_back(std::move(a));
    }
    return Status::Ok();
  }

  Status ParseContainer(const YAML::Node& t, TaskGroupSpec* g) {
    HANGAR_ASSIGN_OR_RETURN(auto image, src_.OptString(t, "image"));
    if (image) g->container.image = *image;
    HANGAR_ASSIGN_OR_RETURN(g->container.shm_size_mib, Quantity(t, "shm_size", ParseMemoryMiB));
    const YAML::Node mounts = t["mounts"];
    if (!mounts) return Status::Ok();
    if (!mounts.IsSequence())
      return src_.Error(mounts,
                        "mounts must be a list like [\"/data:/data\", \"/scratch:/out:rw\"]");
    for (const auto& m : mounts) {
      auto parsed = ParseMount(m.as<std::string>(""));
      if (!parsed.ok()) return src_.Error(m, parsed.status().message());
      g->container.mounts.push_back(*parsed);
    }
    return Status::Ok();
  }

  // A container group names a valid image, and its workdir is a path in the container.
  static Status CheckContainer(const TaskGroupSpec& g) {
    if (g.container.image.empty()) {
      if (!g.container.mounts.empty() || g.container.shm_size_mib) {
        return Status::InvalidArgument("task group '" + g.name +
                                       "': mounts and shm_size are for containers; add image:");
      }
      return Status::Ok();
    }
    auto ref = ParseImageRef(g.container.image);
    if (!ref.ok())
      return Status::InvalidArgument("task group '" + g.name + "': " + ref.status().message());
    if (!g.workdir.empty() && g.workdir.front() != '/') {
      return Status::InvalidArgument("task group '" + g.name + "': workdir '" + g.workdir +
                                     "' is a path inside the container and must be absolute");
    }
    return Status::Ok();
  }

  const YamlSource& src_;
  const bool fresh_;
};

StatusOr<JobSpec> ParseJobText(std::string_view text, const std::string& source_name, bool fresh) {
  YamlSource src(source_name);
  if (!fresh) {
    HANGAR_ASSIGN_OR_RETURN(YAML::Node root, src.Parse(text));
    return JobParser(src, false).Parse(root);
  }
  HANGAR_ASSIGN_OR_RETURN(YAML::Node root, ParseOneDocument(src, text));
  HANGAR_RETURN_IF_ERROR(CheckNoDuplicateKeys(src, root));
  HANGAR_RETURN_IF_ERROR(CheckJobText(src, root));
  return JobParser(src, true).Parse(root);
}

}  // namespace

Status ValidateJobSpec(const JobSpec& spec) {
  if (spec.tasks.empty()) return Status::InvalidArgument("a job needs at least one task group");
  if (spec.queue.empty()) return Status::InvalidArgument("queue must not be empty");
  HANGAR_RETURN_IF_ERROR(CheckNodeLists(spec.nodes));
  int64_t replicas = 0;
  for (const auto& t : spec.tasks) {
    if (t.replicas < 1)
      return Status::InvalidArgument("task group '" + t.name + "' needs replicas >= 1");
    replicas += t.replicas;
    if (t.gpu.kind == GpuKind::kNone && t.cpu <= 0) {
      return Status::InvalidArgument("task group '" + t.name +
                                     "' asks for no GPU and no CPU; give it gpus or cpu");
    }
    if (t.gpu.kind == GpuKind::kShared && (t.gpu.milli <= 0 || t.gpu.milli >= 1000)) {
      return Status::InvalidArgument("task group '" + t.name +
                                     "': a GPU share must be below 1000m");
    }
  }
  if (replicas > 100000) return Status::InvalidArgument("a job may have at most 100,000 tasks");
  if (static_cast<int64_t>(spec.nodes.include.size()) > replicas) {
    return Status::InvalidArgument(
        "include_nodes names " + std::to_string(spec.nodes.include.size()) +
        " nodes but the job has " + std::to_string(replicas) +
        " replicas, and each named node must hold one; ask for at least " +
        std::to_string(spec.nodes.include.size()) + " replicas or name fewer nodes");
  }
  return Status::Ok();
}

StatusOr<JobSpec> ParseJobSpec(std::string_view text, const std::string& source_name) {
  return ParseJobText(text, source_name, true);
}

StatusOr<JobSpec> LoadJobFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open the job file; check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseJobSpec(ss.str(), path);
}

namespace {

nlohmann::json ArtifactsJson(const std::vector<ArtifactSpec>& list) {
  auto object = [](const ArtifactObject& o) {
    return nlohmann::json{
        {"source", o.source}, {"sha256", o.digest}, {"size", std::to_string(o.bytes)}};
  };
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : list) {
    nlohmann::json j = {{"path", a.path}};
    if (a.shard_by_rank) {
      j["shard_by"] = "rank";
      j["shards"] = nlohmann::json::array();
      for (const auto& o : a.objects) j["shards"].push_back(object(o));
    } else if (!a.objects.empty()) {
      j.update(object(a.objects.front()));
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

nlohmann::json JobSpecToJson(const JobSpec& spec) {
  using nlohmann::json;
  json j;
  j["name"] = spec.name;
  j["queue"] = spec.queue;
  if (!spec.user.empty()) j["user"] = spec.user;
  if (!spec.run_as.empty()) j["run_as"] = spec.run_as.ToJson();
  j["priority"] = spec.priority;
  j["tier"] = std::string(TierName(spec.tier));
  if (spec.time_limit) j["time_limit"] = std::to_string(spec.time_limit) + "ms";
  if (spec.min_run_time) j["min_run_time"] = std::to_string(spec.min_run_time) + "ms";
  j["checkpoint"] = {{"signal", SignalName(spec.checkpoint.signal)},
                     {"grace", std::to_string(spec.checkpoint.grace) + "ms"}};
  if (spec.topology.same != cluster::Level::kCluster) {
    j["topology"] = {{"same", std::string(cluster::LevelName(spec.topology.same))},
                     {"mode", spec.topology.required ? "required" : "preferred"}};
  }
  if (spec.on_node_failure.wait_for_node) {
    j["on_node_failure"] = {
        {"wait_for_node", std::to_string(spec.on_node_failure.wait_for_node) + "ms"}};
  }
  if (!spec.progress.empty()) j["progress"] = ProgressSpecToJson(spec.progress);
  if (!spec.array.empty()) j["array"] = spec.array.text;
  if (!spec.after.empty()) j["after"] = spec.after.ToJson();
  if (spec.begin > 0) j["begin"] = FormatUtcTimestamp(spec.begin);
  if (spec.hold) j["hold"] = true;
  if (!spec.reservation.empty()) j["reservation"] = spec.reservation;
  if (!spec.nodes.include.empty()) j["include_nodes"] = NodeNamesText(spec.nodes.include);
  if (!spec.nodes.exclude.empty()) j["exclude_nodes"] = NodeNamesText(spec.nodes.exclude);
  if (!spec.account.empty()) j["account"] = spec.account;
  if (spec.interactive) j["interactive"] = true;
  if (spec.terminal) j["terminal"] = true;
  if (spec.stdin_open) j["stdin"] = true;
  json tasks = json::array();
  for (const auto& t : spec.tasks) {
    json g;
    g["name"] = t.name;
    g["replicas"] = t.replicas;
    if (t.max_per_node) g["max_per_node"] = t.max_per_node;
    switch (t.gpu.kind) {
      case GpuKind::kNone:
        break;
      case GpuKind::kWhole:
        g["gpus"] = t.gpu.count;
        break;
      case GpuKind::kShared:
        g["gpu_fraction"] = std::to_string(t.gpu.milli) + "m";
        g["gpu_memory"] = std::to_string(t.gpu.memory_mib) + "Mi";
        break;
      case GpuKind::kMig:
        g["mig"] = t.gpu.mig_profile;
        break;
    }
    if (!t.gpu_models.empty()) g["gpu_models"] = t.gpu_models;
    if (t.min_gpu_memory_mib) g["min_gpu_memory"] = std::to_string(t.min_gpu_memory_mib) + "Mi";
    if (t.cpu_per_gpu) g["cpu_per_gpu"] = std::to_string(t.cpu_per_gpu) + "m";
    if (t.memory_per_gpu) g["memory_per_gpu"] = std::to_string(t.memory_per_gpu) + "Mi";
    if (t.cpu) g["cpu"] = std::to_string(t.cpu) + "m";
    if (t.memory) g["memory"] = std::to_string(t.memory) + "Mi";
    if (!t.node_selector.empty()) {
      json sel = json::object();
      for (const auto& [k, v] : t.node_selector) sel[k] = v;
      g["node_selector"] = sel;
    }
    if (!t.command.empty()) g["command"] = t.command;
    if (!t.workdir.empty()) g["workdir"] = t.workdir;
    if (!t.container.image.empty()) g["image"] = t.container.image;
    if (t.container.shm_size_mib) g["shm_size"] = std::to_string(t.container.shm_size_mib) + "Mi";
    if (!t.container.mounts.empty()) {
      json mounts = json::array();
      for (const auto& m : t.container.mounts) mounts.push_back(MountText(m));
      g["mounts"] = mounts;
    }
    if (!t.artifacts.empty()) g["artifacts"] = ArtifactsJson(t.artifacts);
    if (!t.env.empty()) {
      json env = json::object();
      for (const auto& [k, v] : t.env) env[k] = v;
      g["env"] = env;
    }
    tasks.push_back(std::move(g));
  }
  j["tasks"] = std::move(tasks);
  return j;
}

Status RequireAbsoluteWorkdirs(const JobSpec& spec) {
  for (const auto& t : spec.tasks) {
    if (!t.workdir.empty() && t.workdir.front() != '/') {
      return Status::InvalidArgument(
          "task group '" + t.name + "': workdir '" + t.workdir +
          "' must be an absolute path on the nodes (`hangar submit` makes a relative one "
          "absolute against the job file's folder)");
    }
  }
  return Status::Ok();
}

void ResolveWorkdirs(JobSpec* spec, const std::string& base) {
  for (auto& t : spec->tasks) {
    if (t.workdir.empty() || t.workdir.front() == '/' || !t.container.empty()) continue;
    // A job file named without a folder (`hangar submit job.yaml`) is in the current one.
    t.workdir = (std::filesystem::absolute(base.empty() ? "." : base) / t.workdir)
                    .lexically_normal()
                    .string();
    if (t.workdir.size() > 1 && t.workdir.back() == '/') t.workdir.pop_back();
  }
}

StatusOr<JobSpec> JobSpecFromJson(const nlohmann::json& j) {
  return ParseJobText(j.dump(), "stored job", false);
}

}  // namespace hangar::job
