#include "sim/replay/replay_command.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "cluster/cluster_yaml.h"
#include "sim/replay/replay.h"
#include "sim/report/report.h"

namespace hangar::sim {
namespace {

struct ReplayArgs {
  std::string trace, format = "hangar", cluster, philly_vcs, openb_nodes, from, to, policy, json,
                     restore = "30s", grace = "0s";
  bool shared_pool = false;
  std::string share_half_life = "30m";
  std::string las_thresholds;  // GPU-seconds, comma-separated
  std::string jobs_csv;
  std::string report;
  std::string engine = "lean";
  double load = 1.0;
  int threads = 2;
  // The staging model (docs/sim-staging.md).
  bool staging = false, staging_compare = false;
  double origin_mbps = 1000, peer_mbps = 3000, node_cache_gb = 500;
  std::string data_aware = "on", prestage = "on", peer_fanout = "on", datasets = "on";
  int models_per_class = 8, datasets_per_group = 4;
  std::vector<CLI::Option*> staging_options;  // need --staging or --staging-compare
  CLI::Option* data_aware_option = nullptr;
  CLI::Option* prestage_option = nullptr;
};

StatusOr<bool> OnOff(const std::string& flag, const std::string& v) {
  if (v == "on") return true;
  if (v == "off") return false;
  return Status::InvalidArgument(flag + " must be on or off, not '" + v + "'");
}

Status StagingOptions(const ReplayArgs& a, ReplayOptions* opt) {
  const bool on = a.staging || a.staging_compare;
  for (const CLI::Option* o : a.staging_options) {
    if (!on && o->count() > 0)
      return Status::InvalidArgument(o->get_name() + " needs --staging (or --staging-compare)");
  }
  if (a.staging_compare && (a.data_aware_option->count() > 0 || a.prestage_option->count() > 0)) {
    return Status::InvalidArgument(
        "--staging-compare runs with --data-aware and --prestage both on, then both off; "
        "give neither");
  }
  if (!on) return Status::Ok();
  if (!(a.origin_mbps > 0) || !(a.peer_mbps > 0))
    return Status::InvalidArgument("--origin-mbps and --peer-mbps must be above 0");
  if (!(a.node_cache_gb >= 0)) return Status::InvalidArgument("--node-cache-gb must be 0 or more");
  StagingConfig& s = opt->staging;
  s.enabled = true;
  s.origin_bytes_per_s = a.origin_mbps * 1e6;
  s.peer_bytes_per_s = a.peer_mbps * 1e6;
  s.node_cache_bytes = static_cast<int64_t>(a.node_cache_gb * 1e9);
  HANGAR_ASSIGN_OR_RETURN(s.data_aware, OnOff("--data-aware", a.data_aware));
  HANGAR_ASSIGN_OR_RETURN(s.prestage, OnOff("--prestage", a.prestage));
  HANGAR_ASSIGN_OR_RETURN(s.peer_fanout, OnOff("--peer-fanout", a.peer_fanout));
  HANGAR_ASSIGN_OR_RETURN(opt->artifacts.datasets, OnOff("--datasets", a.datasets));
  opt->artifacts.models_per_class = a.models_per_class;
  opt->artifacts.datasets_per_group = a.datasets_per_group;
  if (a.staging_compare) s.data_aware = s.prestage = true;
  return Status::Ok();
}

std::string OnOffText(bool v) { return v ? "on" : "off"; }

// One line per staging configuration, from its StagingSummary.
void PrintStaging(const nlohmann::json& s) {
  std::printf(
      "staging (data-aware %s, pre-staging %s): avg JCT %.0f s, %.1f GPU-hours lost to staging "
      "(%lld of %lld starts staged, avg %.0f s), origin %.0f GB, peers %.0f GB, %lld pre-staged "
      "copies, "
      "%lld evictions\n",
      OnOffText(s["data_aware"].get<bool>()).c_str(), OnOffText(s["prestage"].get<bool>()).c_str(),
      s["avg_jct_s"].get<double>(), s["gpu_hours_lost"].get<double>(),
      static_cast<long long>(s["staged_starts"].get<int64_t>()),
      static_cast<long long>(s["starts_with_objects"].get<int64_t>()),
      s["avg_staging_s"].get<double>(), s["origin_gb"].get<double>(), s["peer_gb"].get<double>(),
      static_cast<long long>(s["prestage_transfers"].get<int64_t>()),
      static_cast<long long>(s["evictions"].get<int64_t>()));
}

// The figures the two configurations of --staging-compare are set side by side by.
nlohmann::json StagingSummary(const nlohmann::json& m) {
  nlohmann::json out = m["staging"];
  for (const char* k : {"jobs", "avg_jct_s", "p50_jct_s", "p99_jct_s", "avg_queue_s",
                        "gpu_util_pct", "makespan_s"}) {
    out[k] = m[k];
  }
  return out;
}

// --staging-compare: the same replay with data-aware placement and pre-staging both off.
Status CompareStaging(std::vector<TraceJob> jobs, const std::vector<ClusterPartition>& partitions,
                      ReplayOptions opt, nlohmann::json* out) {
  opt.staging.data_aware = opt.staging.prestage = false;
  HANGAR_ASSIGN_OR_RETURN(ReplayResult r, RunReplay(std::move(jobs), partitions, opt));
  const nlohmann::json off = ReplayMetrics(r);
  (*out)["staging_compare"] = {{"on", StagingSummary(*out)}, {"off", StagingSummary(off)}};
  return Status::Ok();
}

StatusOr<std::vector<TraceJob>> ReadTrace(const ReplayArgs& a) {
  if (a.format == "hangar") return ReadHangarTrace(a.trace);
  if (a.format == "philly") return ReadPhillyTrace(a.trace);
  if (a.format == "openb") return ReadOpenbTrace(a.trace);
  return Status::InvalidArgument("--format must be hangar, philly or openb, not '" + a.format +
                                 "'");
}

// The openb node list beside the pod list, for --format openb without a cluster option.
std::string OpenbNodesBeside(const std::string& trace) {
  const size_t slash = trace.find_last_of('/');
  return (slash == std::string::npos ? std::string() : trace.substr(0, slash + 1)) +
         "openb_node_list_gpu_node.csv";
}

StatusOr<std::vector<ClusterPartition>> Partitions(const ReplayArgs& a) {
  const int given = !a.cluster.empty() + !a.philly_vcs.empty() + !a.openb_nodes.empty();
  if (given > 1 || (given == 0 && a.format != "openb")) {
    return Status::InvalidArgument(
        "give exactly one of --cluster cluster.yaml, --philly-vcs philly_vc_nodes.csv or "
        "--openb-nodes "
        "openb_node_list_gpu_node.csv");
  }
  if (a.shared_pool && a.philly_vcs.empty()) {
    return Status::InvalidArgument(
        "--shared-pool pools the virtual clusters of --philly-vcs; give --philly-vcs too");
  }
  std::vector<ClusterPartition> out;
  if (given == 0 || !a.openb_nodes.empty()) {
    HANGAR_ASSIGN_OR_RETURN(
        auto topology,
        ReadOpenbCluster(a.openb_nodes.empty() ? OpenbNodesBeside(a.trace) : a.openb_nodes));
    out.push_back({"", topology});
    return out;
  }
  if (!a.cluster.empty()) {
    HANGAR_ASSIGN_OR_RETURN(auto file, cluster::LoadClusterFile(a.cluster));
    out.push_back({"", file.topology});
    return out;
  }
  HANGAR_ASSIGN_OR_RETURN(auto vcs, ReadPhillyPartitions(a.philly_vcs));
  for (const auto& vc : vcs) out.push_back({vc.name, UniformCluster(vc.name, vc.nodes)});
  return out;
}

Status Run(const ReplayArgs& a, const std::map<std::string, EngineFactory>& engines) {
  HANGAR_RETURN_IF_ERROR(CheckWritableFolder(a.json));  // before the run, not after it
  ReplayOptions opt;
  if (a.engine != "lean") {
    auto it = engines.find(a.engine);
    if (it == engines.end()) {
      std::string known = "lean";
      for (const auto& [name, f] : engines) known += ", " + name;
      return Status::InvalidArgument("--engine must be one of " + known + ", not '" + a.engine +
                                     "'");
    }
    opt.engine = it->second;
  }
  HANGAR_ASSIGN_OR_RETURN(opt.policy, MakeReplayPolicy(a.policy));
  HANGAR_ASSIGN_OR_RETURN(opt.restore_cost, ParseDuration(a.restore));
  HANGAR_ASSIGN_OR_RETURN(opt.preemption_grace, ParseDuration(a.grace));
  if (!a.las_thresholds.empty()) {
    auto& t = opt.policy.scheduler.preemption.las_thresholds;
    t.clear();
    HANGAR_ASSIGN_OR_RETURN(auto values, ParseSeedList(a.las_thresholds));
    for (uint64_t v : values) t.push_back(static_cast<int64_t>(v) * 1000);
  }
  opt.load = a.load;
  opt.threads = a.threads;
  opt.shared_pool = a.shared_pool;
  HANGAR_ASSIGN_OR_RETURN(opt.share_half_life, ParseDuration(a.share_half_life));
  if (!a.from.empty()) {
    HANGAR_ASSIGN_OR_RETURN(opt.from, ParseUtcTimestamp(a.from));
  }
  if (!a.to.empty()) {
    HANGAR_ASSIGN_OR_RETURN(opt.to, ParseUtcTimestamp(a.to));
  }
  HANGAR_RETURN_IF_ERROR(StagingOptions(a, &opt));
  HANGAR_ASSIGN_OR_RETURN(auto partitions, Partitions(a));
  HANGAR_ASSIGN_OR_RETURN(auto jobs, ReadTrace(a));
  std::vector<TraceJob> again;
  if (a.staging_compare) again = jobs;
  HANGAR_ASSIGN_OR_RETURN(ReplayResult r, RunReplay(std::move(jobs), partitions, opt));
  nlohmann::json out = ReplayMetrics(r);
  if (a.staging_compare)
    HANGAR_RETURN_IF_ERROR(CompareStaging(std::move(again), partitions, opt, &out));
  out["policy"] = a.policy;
  out["trace"] = a.trace;
  out["load"] = a.load;
  out["from"] = a.from;
  out["to"] = a.to;
  out["restore_cost_s"] = opt.restore_cost / 1000.0;
  out["format"] = a.format;
  out["engine"] = a.engine;
  if (a.shared_pool) out["share_half_life_s"] = opt.share_half_life / 1000.0;
  nlohmann::json timeline = nlohmann::json::array();
  for (const auto& s : r.timeline)
    timeline.push_back({{"t_s", (s.t - r.first_submit) / 1000.0},
                        {"gpu_util_pct", s.gpu_util_pct},
                        {"pending", s.pending}});
  out["timeline"] = timeline;
  std::vector<double> jct;
  for (const auto& o : r.done) jct.push_back((o.end - o.submit) / 1000.0);
  std::sort(jct.begin(), jct.end());
  nlohmann::json cdf = nlohmann::json::array();
  for (int i = 0; i <= 200 && !jct.empty(); ++i) {
    const size_t k = std::min(jct.size() - 1, static_cast<size_t>(i * (jct.size() - 1) / 200));
    cdf.push_back({{"jct_s", jct[k]}, {"fraction", static_cast<double>(k + 1) / jct.size()}});
  }
  out["jct_cdf"] = cdf;
  if (!a.jobs_csv.empty()) {
    std::ofstream f(a.jobs_csv);
    if (!f) return Status::InvalidArgument("cannot write " + a.jobs_csv);
    f << "partition,submit_s,start_s,end_s,runtime_s,gpus,preemptions\n";
    for (const auto& o : r.done) {
      f << partitions[o.partition].name << "," << (o.submit - r.first_submit) / 1000.0 << ","
        << (o.start - r.first_submit) / 1000.0 << "," << (o.end - r.first_submit) / 1000.0 << ","
        << o.runtime / 1000.0 << "," << o.gpus_milli / 1000.0 << "," << o.preemptions << "\n";
    }
  }
  if (!a.report.empty()) HANGAR_RETURN_IF_ERROR(WriteReport(a.report, RenderReplayReport(out)));
  if (!a.json.empty()) HANGAR_RETURN_IF_ERROR(WriteJsonFile(a.json, out));
  std::printf(
      "%s: %lld jobs (%lld never fit), avg JCT %.0f s, p50 %.0f s, p99 %.0f s, avg queue %.0f s, "
      "GPU util %.1f%%, %lld preemptions; %lld cycles in %.3f s\n",
      a.policy.c_str(), static_cast<long long>(r.done.size()), static_cast<long long>(r.never),
      out["avg_jct_s"].get<double>(), out["p50_jct_s"].get<double>(),
      out["p99_jct_s"].get<double>(), out["avg_queue_s"].get<double>(),
      out["gpu_util_pct"].get<double>(), static_cast<long long>(out["preemptions"].get<int64_t>()),
      static_cast<long long>(r.cycles), r.wall_s);
  if (r.queues.size() > 1) {
    std::printf(
        "%s: mean run time %.0f s; %lld jobs asked within their guarantee, %lld started later (max "
        "wait %.0f s); "
        "a queue was denied its guarantee in %lld cycles (%.0f s)\n",
        out["mode"].get<std::string>().c_str(), out["avg_runtime_s"].get<double>(),
        static_cast<long long>(out["asked_within"].get<int64_t>()),
        static_cast<long long>(out["within_late"].get<int64_t>()),
        out["within_wait_max_s"].get<double>(),
        static_cast<long long>(out["denied_cycles"].get<int64_t>()), out["denied_s"].get<double>());
  }
  if (a.staging_compare) {
    PrintStaging(out["staging_compare"]["on"]);
    PrintStaging(out["staging_compare"]["off"]);
  } else if (opt.staging.enabled) {
    PrintStaging(StagingSummary(out));
  }
  return Status::Ok();
}

void RegisterStagingOptions(CLI::App* c, ReplayArgs* a) {
  c->add_flag(
      "--staging", a->staging,
      "Give jobs artifacts by the rule of docs/sim-staging.md and stage them onto node caches");
  c->add_flag("--staging-compare", a->staging_compare,
              "As --staging, twice: data-aware placement and pre-staging both on, then both off; "
              "prints both");
  auto& v = a->staging_options;
  v.push_back(c->add_option("--origin-mbps", a->origin_mbps,
                            "Staging: the origin's egress in MB/s (10^6 bytes/s), "
                            "shared by its readers")
                  ->capture_default_str());
  v.push_back(c->add_option("--peer-mbps", a->peer_mbps, "Staging: MB/s one node reads from a peer")
                  ->capture_default_str());
  v.push_back(c->add_option("--peer-fanout", a->peer_fanout,
                            "Staging: on: copies after the first come from peers")
                  ->capture_default_str());
  v.push_back(c->add_option("--node-cache-gb", a->node_cache_gb,
                            "Staging: each node's cache budget, GB (10^9 bytes)")
                  ->capture_default_str());
  a->data_aware_option =
      c->add_option("--data-aware", a->data_aware,
                    "Staging: on: placement weighs the seconds a node would stage")
          ->capture_default_str();
  a->prestage_option = c->add_option("--prestage", a->prestage,
                                     "Staging: on: reserved and nominated jobs' nodes stage ahead")
                           ->capture_default_str();
  v.push_back(a->data_aware_option);
  v.push_back(a->prestage_option);
  v.push_back(c->add_option("--datasets", a->datasets,
                            "Staging: on: each job needs a dataset beside its model")
                  ->capture_default_str());
  v.push_back(c->add_option("--models-per-class", a->models_per_class,
                            "Staging: models per group and size class")
                  ->capture_default_str());
  v.push_back(
      c->add_option("--datasets-per-group", a->datasets_per_group, "Staging: datasets per group")
          ->capture_default_str());
}

}  // namespace

void RegisterReplayCommand(CLI::App& sim, int* rc, std::map<std::string, EngineFactory> engines) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* c =
      sim.add_subcommand("replay", "Replay a trace in time through the production scheduler");
  c->add_option("--trace", args->trace, "Trace file")->required();
  c->add_option("--format", args->format, "hangar | philly | openb (an openb_pod_list_*.csv)")
      ->capture_default_str();
  c->add_option("--cluster", args->cluster, "cluster.yaml to replay on");
  c->add_option("--philly-vcs", args->philly_vcs,
                "philly_vc_nodes.csv: one partition per virtual cluster");
  c->add_option("--openb-nodes", args->openb_nodes,
                "openb_node_list_gpu_node.csv to replay on (default with --format openb: the one "
                "beside --trace)");
  c->add_flag("--shared-pool", args->shared_pool,
              "With --philly-vcs: one cluster of all VCs' nodes, each VC a queue guaranteed its "
              "size (borrowing on)");
  c->add_option("--share-half-life", args->share_half_life,
                "With --shared-pool: fair share's usage half-life")
      ->capture_default_str();
  c->add_option("--from", args->from, "First submit day (YYYY-MM-DD), included");
  c->add_option("--to", args->to, "Last submit day (YYYY-MM-DD), included");
  c->add_option("--load", args->load, "Divide the gaps between arrivals by F")
      ->capture_default_str();
  c->add_option("--policy", args->policy, "fifo | fifo-backfill | sjf-oracle | las | hangar")
      ->required();
  c->add_option("--restore-cost", args->restore, "Added to a preempted job's run time")
      ->capture_default_str();
  c->add_option("--preemption-grace", args->grace,
                "A victim keeps its GPUs this long to checkpoint, and its preemptor starts after "
                "(as in the controller)")
      ->capture_default_str();
  c->add_option("--las-thresholds", args->las_thresholds,
                "Service levels for las/hangar, in GPU-seconds (e.g. 3600,36000)");
  c->add_option("--threads", args->threads, "Partitions replayed in parallel")
      ->capture_default_str();
  c->add_option("--json", args->json, "Write the metrics here");
  c->add_option("--jobs-csv", args->jobs_csv, "Write one row per finished job here");
  c->add_option("--report", args->report, "Write a self-contained HTML report here");
  c->add_option("--engine", args->engine,
                "lean (the simulator's own owner) or controller (the controller's state machine, "
                "with simulated agents)")
      ->capture_default_str();
  RegisterStagingOptions(c, args.get());
  c->callback([args, rc, engines = std::move(engines)] {
    Status s = Run(*args, engines);
    if (!s.ok()) {
      std::fprintf(stderr, "hangar sim replay: %s\n", s.message().c_str());
      *rc = 2;
    }
  });
}

}  // namespace hangar::sim
