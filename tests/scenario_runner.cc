#include "scenario_runner.h"

#include <cstdio>
#include <sstream>

#include "cluster/cluster_yaml.h"
#include "common/yaml_util.h"
#include "job/job_spec.h"
#include "job/queue_spec.h"
#include "sim/controller/controller_engine.h"
#include "sim/engine/simulator.h"

namespace hangar::testing {
namespace {

std::string Seconds(Time t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%6llds", static_cast<long long>(t / kSecond));
  return buf;
}

// "node-1:0-7" or "node-1:3(250m)": where a task's GPUs are.
std::string Where(const cluster::Topology& t, const cluster::GangAssignment& a,
                  const cluster::TaskPlacement& task) {
  std::string out = t.nodes()[task.node].name;
  auto grants = a.GrantsOf(task);
  if (grants.empty()) return out + ":cpu";
  out += ":";
  const auto idx = [&](const cluster::GpuGrant& g) { return t.gpus()[g.gpu].index; };
  if (grants.size() == 1 && grants[0].milli < 1000) {
    return out + std::to_string(idx(grants[0])) + "(" + std::to_string(grants[0].milli) + "m)";
  }
  for (size_t i = 0; i < grants.size();) {
    size_t k = i;
    while (k + 1 < grants.size() && idx(grants[k + 1]) == idx(grants[k]) + 1) ++k;
    if (i) out += ",";
    out += std::to_string(idx(grants[i]));
    if (k > i) out += "-" + std::to_string(idx(grants[k]));
    i = k + 1;
  }
  return out;
}

Status ParseSchedulerConfig(const YamlSource& src, const YAML::Node& n, sched::SchedulerConfig* c) {
  HANGAR_RETURN_IF_ERROR(src.CheckKeys(
      n, "scheduler",
      {"queue_policy", "placement_policy", "backfill", "strict_order", "preemption"}));
  HANGAR_ASSIGN_OR_RETURN(auto pre, src.OptString(n, "preemption"));
  if (pre) {
    if (*pre == "none") {
      c->preemption.mode = sched::PreemptionMode::kNone;
    } else if (*pre == "priority") {
      c->preemption.mode = sched::PreemptionMode::kPriority;
    } else if (*pre == "no-reclaim") {
      c->preemption.reclaim_quota = false;
    } else if (*pre == "las") {
      c->preemption.mode = sched::PreemptionMode::kLas;
    } else if (*pre == "gittins") {
      c->preemption.mode = sched::PreemptionMode::kGittins;
    } else {
      return src.Error(n["preemption"],
                       "preemption must be none, priority, no-reclaim, las or gittins");
    }
  }
  HANGAR_ASSIGN_OR_RETURN(auto q, src.OptString(n, "queue_policy"));
  if (q) c->queue_policy = *q;
  HANGAR_ASSIGN_OR_RETURN(auto p, src.OptString(n, "placement_policy"));
  if (p) c->placement_policy = *p;
  HANGAR_ASSIGN_OR_RETURN(auto b, src.OptString(n, "backfill"));
  if (b) c->backfill = *b == "none" ? sched::BackfillMode::kNone : sched::BackfillMode::kEasy;
  HANGAR_ASSIGN_OR_RETURN(auto s, src.OptBool(n, "strict_order"));
  if (s) c->strict_order = *s;
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> RunScenario(const std::string& dir, Owner owner) {
  HANGAR_ASSIGN_OR_RETURN(auto cluster_file, cluster::LoadClusterFile(dir + "/cluster.yaml"));
  auto topo = cluster_file.topology;
  const std::string jobs_path = dir + "/jobs.yaml";
  HANGAR_ASSIGN_OR_RETURN(YAML::Node root, YamlSource::LoadFile(jobs_path));
  YamlSource src(jobs_path);
  HANGAR_RETURN_IF_ERROR(
      src.CheckKeys(root, "jobs.yaml", {"scheduler", "queues", "share_half_life", "jobs"}));
  sim::SimConfig config;
  if (root["scheduler"])
    HANGAR_RETURN_IF_ERROR(ParseSchedulerConfig(src, root["scheduler"], &config.scheduler));
  // The owner learns Gittins ranks from the jobs that finish, as both owners do for this policy.
  config.gittins_ranks = config.scheduler.queue_policy == "gittins" ||
                         config.scheduler.preemption.mode == sched::PreemptionMode::kGittins;
  HANGAR_ASSIGN_OR_RETURN(auto half_life, src.OptString(root, "share_half_life"));
  if (half_life) {
    HANGAR_ASSIGN_OR_RETURN(config.share_half_life, ParseDuration(*half_life));
  }
  if (root["queues"]) {
    YAML::Emitter e;
    e << YAML::BeginMap << YAML::Key << "queues" << YAML::Value << root["queues"] << YAML::EndMap;
    HANGAR_ASSIGN_OR_RETURN(auto specs, job::ParseQueues(e.c_str(), src.Where(root["queues"])));
    HANGAR_ASSIGN_OR_RETURN(config.queues, sched::queue::QueueTree::Build(specs, *topo));
    config.queue_specs = specs;
  }
  std::unique_ptr<sim::Engine> simulator;
  if (owner == Owner::kController) {
    HANGAR_ASSIGN_OR_RETURN(simulator, sim::MakeControllerEngine(topo, config));
  } else {
    HANGAR_ASSIGN_OR_RETURN(simulator, sim::Simulator::Create(topo, config));
  }
  uint64_t row = 0;
  for (const auto& j : root["jobs"]) {
    HANGAR_RETURN_IF_ERROR(src.CheckKeys(j, "a job", {"at", "runtime", "spec"}));
    HANGAR_ASSIGN_OR_RETURN(int64_t at, src.Int(j, "at", 0, 1'000'000'000));
    HANGAR_ASSIGN_OR_RETURN(int64_t runtime, src.Int(j, "runtime", 0, 1'000'000'000));
    YAML::Emitter e;
    e << j["spec"];
    HANGAR_ASSIGN_OR_RETURN(job::JobSpec spec, job::ParseJobSpec(e.c_str(), src.Where(j["spec"])));
    HANGAR_ASSIGN_OR_RETURN(sched::GangRequest req, sched::CompileGang(spec, *topo));
    sim::SimJob sj;
    sj.id = ++row;
    sj.name = spec.name;
    sj.request = std::make_shared<sched::GangRequest>(std::move(req));
    sj.submit = at * kSecond;
    sj.runtime = runtime * kSecond;
    sj.time_limit = spec.time_limit;
    sj.priority = spec.priority;
    sj.tier = spec.tier;
    sj.min_run_time = spec.min_run_time;
    if (config.queues) {
      const int q = config.queues->FindLeaf(spec.queue);
      if (q < 0)
        return src.Error(j["spec"],
                         "queue '" + spec.queue + "' is not a leaf queue of this scenario");
      sj.queue = static_cast<uint32_t>(q);
    }
    sj.seq = row;
    simulator->AddJob(std::move(sj));
  }
  std::ostringstream log;
  sim::SimObserver obs;
  obs.on_start = [&](Time t, const sim::SimJob& j, const sched::Placement& p) {
    log << Seconds(t) << "  start  " << j.name << " on";
    for (const auto& task : p.assignment.tasks) log << " " << Where(*topo, p.assignment, task);
    log << "  (" << cluster::LevelName(p.locality) << (p.backfilled ? ", backfilled" : "")
        << (p.borrowing ? ", borrowing" : "") << ")\n";
  };
  obs.on_finish = [&](Time t, const sim::SimJob& j) {
    log << Seconds(t) << "  end    " << j.name << "\n";
  };
  obs.on_wait = [&](Time t, const sim::SimJob& j, const sched::Verdict& v) {
    const sched::Reason& r = v.reason;
    std::string why = v.detail.empty() ? r.ToString(*topo) : v.detail;
    // Reservation times are absolute; print them as scenario seconds.
    if (r.rule == sched::Rule::kNotNowReserved) {
      why = "fits only on nodes reserved for job " + std::to_string(r.other) +
            (r.at == kNever ? "" : " (starts by " + std::to_string(r.at / kSecond) + "s)");
    }
    log << Seconds(t) << "  wait   " << j.name << ": " << why << "\n";
  };
  obs.on_preempt = [&](Time t, const sim::SimJob& j, const sched::Preemption& p) {
    log << Seconds(t) << "  preempt " << j.name << ": " << p.why << "\n";
  };
  simulator->set_observer(obs);
  HANGAR_RETURN_IF_ERROR(simulator->Run());
  for (size_t i = 0; i < simulator->jobs().size(); ++i) {
    if (simulator->results()[i].never)
      log << "     -   never  " << simulator->jobs()[i].name << "\n";
  }
  return log.str();
}

}  // namespace hangar::testing
