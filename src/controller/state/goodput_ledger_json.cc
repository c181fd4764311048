// GoodputLedger's views (the API's JSON, Prometheus text) and its stored form.
#include <cstdio>

#include "controller/state/goodput_ledger.h"

namespace hangar::controller {

namespace {

constexpr double kHourMs = 3600.0 * 1000.0;

double GpuHours(int64_t gpu_ms) { return static_cast<double>(gpu_ms) / kHourMs; }

double Ratio(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

nlohmann::json OrNull(Time t) { return t >= 0 ? nlohmann::json(t) : nlohmann::json(nullptr); }

nlohmann::json CauseJson(const GoodputLedger::CauseCost& c) {
  return {{"count", c.count},
          {"lost_work_ms", c.lost},
          {"restart_ms", c.restart},
          {"requeue_wait_ms", c.wait},
          {"gpu_hours", GpuHours(c.gpu_ms)}};
}

nlohmann::json PartsJson(const GoodputLedger::Split& s) {
  nlohmann::json parts = nlohmann::json::object();
  for (int p = 0; p < GoodputLedger::kParts; ++p) {
    const auto part = static_cast<GoodputLedger::Part>(p);
    parts[std::string(GoodputLedger::PartName(part))] = {{"ms", s.ms[p]},
                                                         {"gpu_hours", GpuHours(s.gpu_ms[p])}};
  }
  return parts;
}

// The causes' costs with the open wait or restart of the latest interruption counted so far.
std::map<std::string, GoodputLedger::CauseCost> CausesSoFar(const GoodputLedger::Job& j,
                                                            const GoodputLedger::Split& so_far) {
  auto causes = j.by_cause;
  if (j.interruptions.empty()) return causes;
  const auto& last = j.interruptions.back();
  GoodputLedger::CauseCost& c = causes[last.cause];
  const Duration wait =
      so_far.ms[GoodputLedger::kRequeueWait] - j.closed.ms[GoodputLedger::kRequeueWait];
  const Duration restart =
      so_far.ms[GoodputLedger::kRestart] - j.closed.ms[GoodputLedger::kRestart];
  c.wait += wait;
  c.restart += restart;
  c.gpu_ms += so_far.gpu_ms[GoodputLedger::kRequeueWait] -
              j.closed.gpu_ms[GoodputLedger::kRequeueWait] +
              so_far.gpu_ms[GoodputLedger::kRestart] - j.closed.gpu_ms[GoodputLedger::kRestart];
  return causes;
}

}  // namespace

nlohmann::json GoodputLedger::Json(JobId job, Time now) const {
  const Job* j = Find(job);
  if (!j || j->first_start < 0) return nullptr;
  const Split s = SplitOf(*j, now);
  nlohmann::json by_cause = nlohmann::json::object();
  int64_t count = 0;
  for (const auto& [cause, c] : CausesSoFar(*j, s)) {
    by_cause[cause] = CauseJson(c);
    count += c.count;
  }
  nlohmann::json recent = nlohmann::json::array();
  for (const auto& i : j->interruptions) {
    // The latest one's wait or restart may still be under way: counted so far.
    const bool last = &i == &j->interruptions.back();
    recent.push_back(
        {{"attempt", i.attempt},
         {"at_ms", i.at},
         {"cause", i.cause},
         {"why", i.why},
         {"lost_work_ms", i.lost},
         {"lost_basis", i.lost_basis},
         {"restart_ms", i.restart + (last ? s.ms[kRestart] - j->closed.ms[kRestart] : 0)},
         {"requeue_wait_ms",
          i.wait + (last ? s.ms[kRequeueWait] - j->closed.ms[kRequeueWait] : 0)}});
  }
  nlohmann::json out = {{"first_start_ms", j->first_start},
                        {"ended_ms", OrNull(j->ended)},
                        {"wall_ms", s.wall()},
                        {"ettr", Ratio(s.ms[kProductive], s.wall())},
                        {"gpu_hours", GpuHours(s.gpu_wall())},
                        {"parts", PartsJson(s)},
                        {"interruptions", count},
                        {"by_cause", std::move(by_cause)},
                        {"recent", std::move(recent)}};
  if (j->open) {
    out["attempt"] = {{"attempt", j->current.attempt},
                      {"placed_ms", j->current.placed},
                      {"productive_since_ms", OrNull(j->current.ProductiveFrom())},
                      {"last_checkpoint_ms", OrNull(j->current.last_checkpoint)}};
  }
  return out;
}

nlohmann::json GoodputLedger::ClusterJson(Time now) const {
  Split total = ended_;
  auto causes = ended_causes_;
  int64_t interrupted = ended_interrupted_;
  for (JobId id : under_way_) {
    const Job& j = jobs_.at(id);
    const Split s = SplitOf(j, now);
    total.Add(s);
    for (const auto& [cause, c] : CausesSoFar(j, s)) causes[cause].Add(c);
    if (!j.by_cause.empty()) ++interrupted;
  }
  nlohmann::json by_cause = nlohmann::json::object();
  for (const auto& [cause, c] : causes) by_cause[cause] = CauseJson(c);
  return {{"jobs", ended_jobs_ + static_cast<int64_t>(under_way_.size())},
          {"jobs_under_way", under_way_.size()},
          {"jobs_interrupted", interrupted},
          {"ettr", Ratio(total.gpu_ms[kProductive], total.gpu_wall())},
          {"gpu_hours", GpuHours(total.gpu_wall())},
          {"parts", PartsJson(total)},
          {"by_cause", std::move(by_cause)}};
}

std::string GoodputLedger::RenderMetrics(Time now) const {
  const nlohmann::json c = ClusterJson(now);
  std::string out =
      "# HELP hangar_goodput_gpu_seconds GPU-seconds of the jobs the controller holds, by where "
      "they went (productive, setup, restart, lost_work, requeue_wait)\n"
      "# TYPE hangar_goodput_gpu_seconds gauge\n";
  char line[256];
  for (const auto& [part, v] : c["parts"].items()) {
    std::snprintf(line, sizeof line, "hangar_goodput_gpu_seconds{part=\"%s\"} %.6f\n", part.c_str(),
                  v["gpu_hours"].get<double>() * 3600.0);
    out += line;
  }
  std::snprintf(line, sizeof line,
                "# HELP hangar_goodput_ettr Productive GPU time over all GPU time of the jobs "
                "held (effective training time ratio)\n"
                "# TYPE hangar_goodput_ettr gauge\nhangar_goodput_ettr %.6f\n",
                c["ettr"].get<double>());
  out += line;
  out +=
      "# HELP hangar_goodput_interruptions Interruptions of the jobs held, by cause\n"
      "# TYPE hangar_goodput_interruptions gauge\n";
  for (const auto& [cause, v] : c["by_cause"].items()) {
    std::snprintf(line, sizeof line, "hangar_goodput_interruptions{cause=\"%s\"} %lld\n",
                  cause.c_str(), static_cast<long long>(v["count"].get<int64_t>()));
    out += line;
  }
  out +=
      "# HELP hangar_job_ettr A started, unfinished job's effective training time ratio so far\n"
      "# TYPE hangar_job_ettr gauge\n";
  for (JobId id : under_way_) {
    const Split s = SplitOf(jobs_.at(id), now);
    std::snprintf(line, sizeof line, "hangar_job_ettr{job=\"%llu\"} %.6f\n",
                  static_cast<unsigned long long>(id), Ratio(s.ms[kProductive], s.wall()));
    out += line;
  }
  return out;
}

nlohmann::json GoodputLedger::Stored(JobId job) const {
  const Job* j = Find(job);
  if (!j || j->first_start < 0) return nullptr;
  nlohmann::json interruptions = nlohmann::json::array();
  for (const auto& i : j->interruptions) {
    interruptions.push_back({i.attempt, i.at, i.cause, i.why, i.milli_gpu, i.lost, i.restart,
                             i.wait, i.lost_basis, i.productive_from, i.last_progress, i.first_step,
                             i.last_step, i.step_time_us});
  }
  nlohmann::json causes = nlohmann::json::object();
  for (const auto& [cause, c] : j->by_cause)
    causes[cause] = {c.count, c.lost, c.restart, c.wait, c.gpu_ms};
  const Attempt& a = j->current;
  nlohmann::json out = {
      {"first_start", j->first_start},     {"ended", j->ended},
      {"waiting_since", j->waiting_since}, {"ms", j->closed.ms},
      {"gpu_ms", j->closed.gpu_ms},        {"interruptions", std::move(interruptions)},
      {"by_cause", std::move(causes)}};
  if (j->open) {
    out["current"] = {a.attempt,    a.milli_gpu,      a.expects_progress, a.placed,
                      a.running,    a.first_progress, a.last_progress,    a.last_checkpoint,
                      a.first_step, a.last_step,      a.step_time_us};
  }
  return out;
}

void GoodputLedger::Restore(JobId job, const nlohmann::json& s) {
  if (!s.is_object() || !s.contains("first_start")) return;
  Forget(job);
  Job& j = jobs_[job];
  try {
    j.first_start = s.at("first_start").get<Time>();
    j.ended = s.at("ended").get<Time>();
    j.waiting_since = s.at("waiting_since").get<Time>();
    j.closed.ms = s.at("ms").get<std::array<Duration, kParts>>();
    j.closed.gpu_ms = s.at("gpu_ms").get<std::array<int64_t, kParts>>();
    for (const auto& v : s.at("interruptions")) {
      Interruption i;
      v.at(0).get_to(i.attempt), v.at(1).get_to(i.at), v.at(2).get_to(i.cause);
      v.at(3).get_to(i.why), v.at(4).get_to(i.milli_gpu), v.at(5).get_to(i.lost);
      v.at(6).get_to(i.restart), v.at(7).get_to(i.wait), v.at(8).get_to(i.lost_basis);
      v.at(9).get_to(i.productive_from), v.at(10).get_to(i.last_progress);
      v.at(11).get_to(i.first_step), v.at(12).get_to(i.last_step), v.at(13).get_to(i.step_time_us);
      j.interruptions.push_back(std::move(i));
    }
    for (const auto& [cause, v] : s.at("by_cause").items()) {
      CauseCost& c = j.by_cause[cause];
      v.at(0).get_to(c.count), v.at(1).get_to(c.lost), v.at(2).get_to(c.restart);
      v.at(3).get_to(c.wait), v.at(4).get_to(c.gpu_ms);
    }
    if (s.contains("current")) {
      const auto& v = s["current"];
      Attempt& a = j.current;
      v.at(0).get_to(a.attempt), v.at(1).get_to(a.milli_gpu), v.at(2).get_to(a.expects_progress);
      v.at(3).get_to(a.placed), v.at(4).get_to(a.running), v.at(5).get_to(a.first_progress);
      v.at(6).get_to(a.last_progress), v.at(7).get_to(a.last_checkpoint);
      v.at(8).get_to(a.first_step), v.at(9).get_to(a.last_step), v.at(10).get_to(a.step_time_us);
      j.open = true;
    }
  } catch (const nlohmann::json::exception&) {
    jobs_.erase(job);  // a damaged record: the job's goodput is not known, the rest restores
    return;
  }
  if (j.ended >= 0) {
    Tally(j, 1);
  } else {
    under_way_.insert(job);
  }
}

}  // namespace hangar::controller
