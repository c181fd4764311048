#include "sim/goodput_command.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "common/mutex.h"
#include "sim/goodput_run.h"
#include "sim/replay/trace.h"
#include "sim/report/report.h"

namespace hangar::sim {
namespace {

struct GoodputArgs {
  std::string json, trace, from = "2017-10-01", queue_policy = "fifo-backfill";
  std::string work = "14d", checkpoints = "10m,30m", restore = "5m", detect = "10s",
              replace = "15s";
  std::string straggler_detect = "5m", other_restore = "30s", seeds = "1-2",
              policies = "spares,no_spares,naive";
  int job_gpus = 16384, trace_nodes = 64, spares = 16, threads = 2;
  double rate_scale = 1.0, load = 1.0;
};

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= text.size()) {
    const size_t at = std::min(text.find(sep, from), text.size());
    if (at > from) out.push_back(text.substr(from, at - from));
    from = at + 1;
  }
  return out;
}

StatusOr<std::vector<Duration>> DurationList(const std::string& flag, const std::string& text) {
  std::vector<Duration> out;
  for (const std::string& part : Split(text, ',')) {
    auto d = ParseDuration(part);
    if (!d.ok() || *d <= 0)
      return Status::InvalidArgument(flag + ": '" + part +
                                     "' is not a duration above 0 (e.g. 10m)");
    out.push_back(*d);
  }
  if (out.empty()) return Status::InvalidArgument(flag + " names no duration");
  return out;
}

StatusOr<std::vector<RecoveryPolicy>> PolicyList(const std::string& text) {
  std::vector<RecoveryPolicy> out;
  for (const std::string& part : Split(text, ',')) {
    bool known = false;
    for (auto p : {RecoveryPolicy::kSpares, RecoveryPolicy::kNoSpares, RecoveryPolicy::kNaive}) {
      if (part == RecoveryPolicyName(p)) {
        out.push_back(p);
        known = true;
      }
    }
    if (!known) {
      return Status::InvalidArgument(
          "--policies: '" + part +
          "' is no policy; name spares, no_spares or naive, comma-separated");
    }
  }
  return out;
}

Status FillScenario(const GoodputArgs& a, GoodputScenario* s) {
  HANGAR_ASSIGN_OR_RETURN(s->trace,
                          ReadPhillyTrace(a.trace.empty() ? DefaultPhillyTrace() : a.trace));
  HANGAR_ASSIGN_OR_RETURN(Time from, ParseUtcTimestamp(a.from));
  s->start = kNever;
  for (const auto& t : s->trace) {
    if (t.submit >= from) s->start = std::min(s->start, t.submit);
  }
  if (s->start == kNever)
    return Status::InvalidArgument("no job in the trace was submitted on or after " + a.from);
  if (!(a.load > 0)) return Status::InvalidArgument("--load must be above 0");
  // As `hangar sim replay --load`: the gaps between arrivals divided by the load.
  for (auto& t : s->trace) {
    if (t.submit >= s->start)
      t.submit = s->start + static_cast<Time>(static_cast<double>(t.submit - s->start) / a.load);
  }
  HANGAR_ASSIGN_OR_RETURN(s->work, ParseDuration(a.work));
  HANGAR_ASSIGN_OR_RETURN(s->loop.restore, ParseDuration(a.restore));
  HANGAR_ASSIGN_OR_RETURN(s->loop.detect, ParseDuration(a.detect));
  HANGAR_ASSIGN_OR_RETURN(s->loop.replace, ParseDuration(a.replace));
  HANGAR_ASSIGN_OR_RETURN(s->loop.straggler_detect, ParseDuration(a.straggler_detect));
  HANGAR_ASSIGN_OR_RETURN(s->loop.other_restore, ParseDuration(a.other_restore));
  if (!(a.rate_scale > 0)) return Status::InvalidArgument("--rate-scale must be above 0");
  s->loop.rates = ScaledRates(Llama3Rates(), a.rate_scale);
  s->job_gpus = a.job_gpus;
  s->trace_nodes = a.trace_nodes;
  s->spares = a.spares;
  s->queue_policy = a.queue_policy;
  return Status::Ok();
}

struct RunKey {
  size_t interval, policy, seed;
};

// Every (interval, policy, seed) run, `threads` at a time.
StatusOr<std::vector<std::vector<std::vector<GoodputOutcome>>>> RunAll(
    const GoodputScenario& base, std::shared_ptr<const cluster::Topology> topo,
    const std::vector<Duration>& intervals, const std::vector<RecoveryPolicy>& policies,
    const std::vector<uint64_t>& seeds, int threads) {
  std::vector<RunKey> keys;
  for (size_t i = 0; i < intervals.size(); ++i) {
    for (size_t p = 0; p < policies.size(); ++p) {
      for (size_t s = 0; s < seeds.size(); ++s) keys.push_back({i, p, s});
    }
  }
  // Naive's runs first: they take longest (the scheduler tries the whole gang in every cycle
  // while it waits in the queue), and the threads end closer together when those start first.
  std::stable_sort(keys.begin(), keys.end(), [&](const RunKey& a, const RunKey& b) {
    return (policies[a.policy] == RecoveryPolicy::kNaive) >
           (policies[b.policy] == RecoveryPolicy::kNaive);
  });
  std::vector<std::vector<std::vector<GoodputOutcome>>> out(
      intervals.size(), std::vector<std::vector<GoodputOutcome>>(
                            policies.size(), std::vector<GoodputOutcome>(seeds.size())));
  Mutex mu;  // next, failed and out (locals: the analysis cannot name them in GUARDED_BY)
  size_t next = 0;
  Status failed = Status::Ok();
  auto worker = [&] {
    while (true) {
      RunKey k;
      {
        MutexLock lock(mu);
        if (next == keys.size() || !failed.ok()) return;
        k = keys[next++];
      }
      GoodputScenario s = base;
      s.loop.policy = policies[k.policy];
      s.loop.checkpoint_interval = intervals[k.interval];
      s.loop.seed = seeds[k.seed];
      auto r = RunGoodput(s, topo);
      MutexLock lock(mu);
      if (!r.ok()) {
        failed = r.status();
        return;
      }
      out[k.interval][k.policy][k.seed] = std::move(*r);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(threads, 1); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (!failed.ok()) return failed;
  return out;
}

void PrintInterval(Duration interval, double bound, const nlohmann::json& policies) {
  std::printf("checkpoint every %s: bound ETTR %.2f%%\n", FormatDuration(interval).c_str(),
              100 * bound);
  std::printf("  %-10s %8s %13s %9s %11s %7s %14s %14s\n", "policy", "ETTR", "same-failure",
              "job days", "interrupts", "spares", "other avg JCT", "other p99 JCT");
  for (auto it = policies.begin(); it != policies.end(); ++it) {
    const nlohmann::json& p = it.value();
    std::printf("  %-10s %7.2f%% %12.2f%% %9.2f %11.1f %7.1f %13.0fs %13.0fs\n", it.key().c_str(),
                100 * p["ettr"].get<double>(), 100 * p["bound_ettr_same_failures"].get<double>(),
                p["job_wall_days"].get<double>(), p["interruptions"].get<double>(),
                p["spares_taken"].get<double>(), p["other_jobs"]["avg_jct_s"].get<double>(),
                p["other_jobs"]["p99_jct_s"].get<double>());
  }
}

Status Run(const GoodputArgs& a) {
  HANGAR_RETURN_IF_ERROR(CheckWritableFolder(a.json));  // before the run, not after it
  const int64_t t0 = MonotonicNanos();
  GoodputScenario base;
  HANGAR_RETURN_IF_ERROR(FillScenario(a, &base));
  HANGAR_ASSIGN_OR_RETURN(auto intervals, DurationList("--checkpoint-interval", a.checkpoints));
  HANGAR_ASSIGN_OR_RETURN(auto policies, PolicyList(a.policies));
  HANGAR_ASSIGN_OR_RETURN(auto seeds, ParseSeedList(a.seeds));
  HANGAR_ASSIGN_OR_RETURN(auto topo, GoodputCluster(base));
  HANGAR_ASSIGN_OR_RETURN(auto runs, RunAll(base, topo, intervals, policies, seeds, a.threads));
  const double lambda = JobInterruptionsPerHour(base);
  nlohmann::json out;
  out["by_interval"] = nlohmann::json::array();
  for (size_t i = 0; i < intervals.size(); ++i) {
    nlohmann::json e;
    e["checkpoint_interval_s"] = intervals[i] / kSecond;
    e["bound_ettr"] = BoundEttr(lambda, intervals[i], base.loop.restore);
    GoodputScenario s = base;
    s.loop.checkpoint_interval = intervals[i];
    for (size_t p = 0; p < policies.size(); ++p) {
      e["policies"][std::string(RecoveryPolicyName(policies[p]))] = PolicyJson(runs[i][p], s);
    }
    PrintInterval(intervals[i], e["bound_ettr"].get<double>(), e["policies"]);
    out["by_interval"].push_back(std::move(e));
  }
  // The first interval's figures at the top level.
  out["checkpoint_interval_s"] = out["by_interval"][0]["checkpoint_interval_s"];
  out["bound_ettr"] = out["by_interval"][0]["bound_ettr"];
  out["policies"] = out["by_interval"][0]["policies"];
  nlohmann::json rates;
  for (int k = 0; k < kFailureKinds; ++k) {
    const auto& r = base.loop.rates.kinds[k];
    rates[std::string(FailureKindName(static_cast<FailureKind>(k)))] = {
        {"per_gpu_hour", r.per_gpu_hour}, {"repair_h", static_cast<double>(r.repair) / kHour}};
  }
  out["scenario"] = {{"job_gpus", base.job_gpus},
                     {"work_days", static_cast<double>(base.work) / kDay},
                     {"nodes", topo->nodes().size()},
                     {"trace_nodes", base.trace_nodes},
                     {"spares", base.spares},
                     {"queue_policy", base.queue_policy},
                     {"from", a.from},
                     {"load", a.load},
                     {"seeds", seeds},
                     {"restore_s", base.loop.restore / kSecond},
                     {"detect_s", base.loop.detect / kSecond},
                     {"replace_s", base.loop.replace / kSecond},
                     {"job_interruptions_per_hour", lambda},
                     {"rates", rates}};
  out["wall_s"] = static_cast<double>(MonotonicNanos() - t0) / 1e9;
  if (!a.json.empty()) HANGAR_RETURN_IF_ERROR(WriteJsonFile(a.json, out));
  return Status::Ok();
}

}  // namespace

void RegisterGoodputCommand(CLI::App& sim, int* rc) {
  auto a = std::make_shared<GoodputArgs>();
  CLI::App* c = sim.add_subcommand(
      "goodput", "A large training job and a trace through failures: ETTR by recovery policy");
  c->add_option("--json", a->json, "Write the figures here");
  c->add_option("--trace", a->trace, "Philly trace (default: data/traces/philly/philly.csv)");
  c->add_option("--from", a->from, "The training job starts with the first trace job of this day")
      ->capture_default_str();
  c->add_option("--work", a->work, "The training job's run time without failures")
      ->capture_default_str();
  c->add_option("--job-gpus", a->job_gpus, "The training job's GPUs (8 per node)")
      ->capture_default_str();
  c->add_option("--load", a->load, "Divide the gaps between the trace's arrivals by F")
      ->capture_default_str();
  c->add_option("--trace-nodes", a->trace_nodes, "Nodes for the trace's jobs")
      ->capture_default_str();
  c->add_option("--spares", a->spares,
                "Spare nodes (the spares policy; the others use them as trace nodes)")
      ->capture_default_str();
  c->add_option("--checkpoint-interval", a->checkpoints, "Checkpoint intervals, comma-separated")
      ->capture_default_str();
  c->add_option("--restore", a->restore, "The training job's restore after a restart")
      ->capture_default_str();
  c->add_option("--detect", a->detect, "From a fault to recovery starting")->capture_default_str();
  c->add_option("--replace", a->replace, "Taking a replacement and launching the gang")
      ->capture_default_str();
  c->add_option("--straggler-detect", a->straggler_detect, "From a GPU slowing to its node named")
      ->capture_default_str();
  c->add_option("--other-restore", a->other_restore, "Other jobs' restore after an interruption")
      ->capture_default_str();
  c->add_option("--rate-scale", a->rate_scale, "Multiply every failure rate by this")
      ->capture_default_str();
  c->add_option("--seeds", a->seeds, "Failure seeds (e.g. 1-4); figures are their means")
      ->capture_default_str();
  c->add_option("--policies", a->policies, "Recovery policies to compare")->capture_default_str();
  c->add_option("--queue-policy", a->queue_policy,
                "The scheduler's policy (as `hangar sim replay --policy`)")
      ->capture_default_str();
  c->add_option("--threads", a->threads, "Runs in parallel")->capture_default_str();
  c->callback([a, rc] {
    Status s = Run(*a);
    if (!s.ok()) {
      std::fprintf(stderr, "hangar sim goodput: %s\n", s.message().c_str());
      *rc = 2;
    }
  });
}

}  // namespace hangar::sim
