#include "job/queue_spec.h"

#include <set>

#include "common/units.h"
#include "common/yaml_util.h"
#include "job/spec_text.h"

namespace hangar::job {

std::string_view IdleActionName(IdlePolicy::Action a) {
  switch (a) {
    case IdlePolicy::Action::kNone:
      return "none";
    case IdlePolicy::Action::kCheckpointRequeue:
      return "checkpoint-requeue";
    case IdlePolicy::Action::kStop:
      return "stop";
    case IdlePolicy::Action::kNotify:
      return "notify";
  }
  return "none";
}

namespace {

class QueueParser {
 public:
  explicit QueueParser(const YamlSource& src) : src_(src) {}

  StatusOr<QueueSpec> Queue(const YAML::Node& n, int depth) {
    HANGAR_RETURN_IF_ERROR(
        src_.CheckKeys(n, "a queue",
                       {"name", "quota", "borrowing_limit", "lending_limit", "weight", "idle",
                        "users", "admins", "allow_root", "children"}));
    QueueSpec q;
    HANGAR_ASSIGN_OR_RETURN(q.name, src_.String(n, "name"));
    HANGAR_RETURN_IF_ERROR(CheckName(n["name"], "queue name", q.name));
    if (!names_.insert(q.name).second)
      return src_.Error(n["name"],
                        "queue '" + q.name + "' is declared twice; queue names are unique");
    if (depth > 8) return src_.Error(n, "queues nest at most 8 deep");
    HANGAR_ASSIGN_OR_RETURN(auto weight, src_.OptInt(n, "weight", 1, 1000));
    if (weight) q.weight = static_cast<int>(*weight);
    if (n["quota"]) {
      HANGAR_ASSIGN_OR_RETURN(q.quota, Amounts(n["quota"], "quota"));
    }
    if (n["borrowing_limit"]) {
      HANGAR_ASSIGN_OR_RETURN(q.borrowing_limit, Amounts(n["borrowing_limit"], "borrowing_limit"));
    }
    if (n["lending_limit"]) {
      HANGAR_ASSIGN_OR_RETURN(q.lending_limit, Amounts(n["lending_limit"], "lending_limit"));
    }
    if (n["idle"]) {
      HANGAR_ASSIGN_OR_RETURN(q.idle, Idle(n["idle"]));
    }
    HANGAR_ASSIGN_OR_RETURN(q.users, Names(n, "users"));
    HANGAR_ASSIGN_OR_RETURN(q.admins, Names(n, "admins"));
    HANGAR_ASSIGN_OR_RETURN(q.allow_root, src_.OptBool(n, "allow_root"));
    if (const YAML::Node kids = n["children"]) {
      if (!kids.IsSequence()) return src_.Error(kids, "children must be a list of queues");
      for (const auto& k : kids) {
        HANGAR_ASSIGN_OR_RETURN(QueueSpec child, Queue(k, depth + 1));
        q.children.push_back(std::move(child));
      }
    }
    return q;
  }

 private:
  StatusOr<ResourceAmounts> Amounts(const YAML::Node& n, const std::string& what) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(n, what, {"gpus", "cpu", "memory"}));
    ResourceAmounts a;
    if (const YAML::Node g = n["gpus"]) {
      if (g.IsMap()) {
        for (const auto& kv : g) {
          auto milli = ParseMilliGpu(kv.second.as<std::string>(""));
          if (!milli.ok())
            return src_.Error(kv.second, what + ".gpus: " + milli.status().message());
          a.gpus_milli_by_model[kv.first.as<std::string>("")] = *milli;
        }
      } else {
        auto milli = ParseMilliGpu(g.as<std::string>(""));
        if (!milli.ok())
          return src_.Error(
              g, what + ".gpus: " + milli.status().message() + " (or a map of model: count)");
        a.gpus_milli = *milli;
      }
    }
    HANGAR_ASSIGN_OR_RETURN(auto cpu, src_.OptString(n, "cpu"));
    if (cpu) {
      auto v = ParseMilliCpu(*cpu);
      if (!v.ok()) return src_.Error(n["cpu"], what + ".cpu: " + v.status().message());
      a.milli_cpu = *v;
    }
    HANGAR_ASSIGN_OR_RETURN(auto mem, src_.OptString(n, "memory"));
    if (mem) {
      auto v = ParseMemoryMiB(*mem);
      if (!v.ok()) return src_.Error(n["memory"], what + ".memory: " + v.status().message());
      a.memory_mib = *v;
    }
    return a;
  }

  StatusOr<IdlePolicy> Idle(const YAML::Node& n) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(n, "idle", {"gpu_util_below", "for", "action"}));
    IdlePolicy p;
    HANGAR_ASSIGN_OR_RETURN(int64_t below, src_.Int(n, "gpu_util_below", 0, 100));
    p.gpu_util_below = static_cast<int>(below);
    HANGAR_ASSIGN_OR_RETURN(std::string dur, src_.String(n, "for"));
    auto d = ParseDuration(dur);
    if (!d.ok()) return src_.Error(n["for"], "idle.for: " + d.status().message());
    p.for_duration = *d;
    HANGAR_ASSIGN_OR_RETURN(std::string action, src_.String(n, "action"));
    if (action == "checkpoint-requeue")
      p.action = IdlePolicy::Action::kCheckpointRequeue;
    else if (action == "stop")
      p.action = IdlePolicy::Action::kStop;
    else if (action == "notify")
      p.action = IdlePolicy::Action::kNotify;
    else
      return src_.Error(
          n["action"],
          "idle.action must be checkpoint-requeue, stop or notify, not '" + action + "'");
    return p;
  }

  StatusOr<std::vector<std::string>> Names(const YAML::Node& n, const char* key) {
    std::vector<std::string> out;
    const YAML::Node list = n[key];
    if (!list) return out;
    if (!list.IsSequence())
      return src_.Error(list, std::string(key) + " must be a list of user names");
    for (const auto& u : list) {
      out.push_back(u.as<std::string>(""));
      HANGAR_RETURN_IF_ERROR(CheckName(u, std::string(key) + " entry", out.back()));
    }
    return out;
  }

  // Queue and user names are shown in tables and logs: plain text of a sane length.
  Status CheckName(const YAML::Node& at, const std::string& what, const std::string& name) {
    constexpr size_t kMaxName = 128;
    if (name.size() > kMaxName) {
      return src_.Error(at, what + " is " + std::to_string(name.size()) +
                                " bytes long; a name is at most " + std::to_string(kMaxName));
    }
    if (Status plain = CheckPlainText(what, name); !plain.ok()) {
      return src_.Error(at, plain.message());
    }
    return Status::Ok();
  }

  const YamlSource& src_;
  std::set<std::string> names_;
};

// In the units people write (16 GPUs, 256 cores, "2Ti", "30m"), so that `hangar queues` and
// GET /v1/queues read like the file applied; ParseQueues reads this form back (the store keeps it).
nlohmann::json Count(int64_t milli) {
  if (milli % 1000 == 0) return milli / 1000;
  return std::stod(FormatMilli(milli));
}

nlohmann::json AmountsJson(const ResourceAmounts& a) {
  nlohmann::json j = nlohmann::json::object();
  if (a.gpus_milli) j["gpus"] = Count(*a.gpus_milli);
  if (!a.gpus_milli_by_model.empty()) {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [k, v] : a.gpus_milli_by_model) m[k] = Count(v);
    j["gpus"] = m;
  }
  if (a.milli_cpu) j["cpu"] = Count(*a.milli_cpu);
  if (a.memory_mib) j["memory"] = FormatMemoryMiB(*a.memory_mib);
  return j;
}

nlohmann::json QueueJson(const QueueSpec& q) {
  nlohmann::json j = {{"name", q.name}, {"weight", q.weight}};
  if (!q.quota.empty()) j["quota"] = AmountsJson(q.quota);
  if (!q.borrowing_limit.empty()) j["borrowing_limit"] = AmountsJson(q.borrowing_limit);
  if (!q.lending_limit.empty()) j["lending_limit"] = AmountsJson(q.lending_limit);
  if (q.idle.gpu_util_below >= 0) {
    j["idle"] = {{"gpu_util_below", q.idle.gpu_util_below},
                 {"for", FormatDuration(q.idle.for_duration)},
                 {"action", std::string(IdleActionName(q.idle.action))}};
  }
  if (!q.users.empty()) j["users"] = q.users;
  if (!q.admins.empty()) j["admins"] = q.admins;
  if (q.allow_root) j["allow_root"] = *q.allow_root;
  if (!q.children.empty()) {
    j["children"] = nlohmann::json::array();
    for (const auto& c : q.children) j["children"].push_back(QueueJson(c));
  }
  return j;
}

}  // namespace

StatusOr<std::vector<QueueSpec>> ParseQueues(std::string_view text,
                                             const std::string& source_name) {
  YamlSource src(source_name);
  HANGAR_ASSIGN_OR_RETURN(YAML::Node root, ParseOneDocument(src, text));
  HANGAR_RETURN_IF_ERROR(CheckNoDuplicateKeys(src, root));
  if (!root.IsMap() || !root["queues"])
    return src.Error(root, "a queues file is a map with 'queues': a list of queues");
  HANGAR_RETURN_IF_ERROR(src.CheckKeys(root, "the queues file", {"queues"}));
  const YAML::Node list = root["queues"];
  if (!list.IsSequence() || list.size() == 0)
    return src.Error(list, "'queues' must be a non-empty list");
  QueueParser p(src);
  std::vector<QueueSpec> out;
  for (const auto& n : list) {
    HANGAR_ASSIGN_OR_RETURN(QueueSpec q, p.Queue(n, 0));
    out.push_back(std::move(q));
  }
  return out;
}

nlohmann::json QueuesToJson(const std::vector<QueueSpec>& queues) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& q : queues) list.push_back(QueueJson(q));
  return {{"queues", list}};
}

namespace {

// The nearest allow_root on the path to `name` below `queues`, `inherited` when none says;
// nullopt when `name` is not there.
std::optional<bool> FindAllowsRoot(const std::vector<QueueSpec>& queues, std::string_view name,
                                   bool inherited) {
  for (const auto& q : queues) {
    const bool here = q.allow_root.value_or(inherited);
    if (q.name == name) return here;
    if (auto below = FindAllowsRoot(q.children, name, here)) return below;
  }
  return std::nullopt;
}

}  // namespace

bool AllowsRoot(const std::vector<QueueSpec>& queues, std::string_view name) {
  return FindAllowsRoot(queues, name, false).value_or(false);
}

std::vector<QueueSpec> DefaultQueues() {
  QueueSpec q;
  q.name = "default";
  return {q};
}

}  // namespace hangar::job
