// failover (issue 18): three controllers on a PostgreSQL store of its own (a test server in a temp
// dir), four agents that know all three, and clients submitting jobs all along; the leader is
// killed with SIGKILL N times (a standby takes over; the killed one comes back as a standby).
//   failover [--kills 20] [--controllers 3] [--lease 1500ms] [--renew 300ms] [--preload N]
//            [--standby-follow 250ms] [--json]
// --preload N puts N finished jobs in the store before the controllers start (a store with a
// history); --standby-follow 0 makes the standbys cold (they load the whole store at takeover).
// Each takeover's restore time is read from the new leader's log ("restored N jobs ... in X ms").
// Per kill: takeover = the old leader's last accepted submission -> the new leader's first (each
// acceptance is a commit, answered just after it); api_unavailable = the longest one submission
// took, first try to acceptance, among those under way across the kill (what a client sees: it
// retries the controller list until one accepts). Then the invariant checker over the whole run.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "controller/store/state_store.h"
#include "ha_cluster.h"
#include "job/job_spec.h"

using hangar::MonotonicNanos;
using hangar::testing::HaCluster;

namespace {

struct Accepted {
  int64_t start_ns, done_ns;
  int by;
  uint64_t id;
};

class Clients {
 public:
  Clients(HaCluster* c, int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, c] { Run(c); });
  }
  // A run that fails early returns with the clients still submitting: stop them, so that the
  // cluster's destructor runs and stops its controllers, agents and PostgreSQL.
  ~Clients() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  std::vector<Accepted> all() {
    std::lock_guard<std::mutex> l(mu_);
    return done_;
  }
  int failed() const { return failed_; }

 private:
  void Run(HaCluster* c) {
    while (!stop_) {
      int by = -1;
      const int64_t t0 = MonotonicNanos();
      const uint64_t id = c->Submit(1, 1, 0.2, 30 * hangar::kSecond, &by);
      const int64_t t1 = MonotonicNanos();
      if (id == 0) {
        ++failed_;
      } else {
        std::lock_guard<std::mutex> l(mu_);
        done_.push_back({t0, t1, by, id});
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::atomic<bool> stop_{false};
  std::atomic<int> failed_{0};
  std::mutex mu_;
  std::vector<Accepted> done_;
  std::vector<std::thread> threads_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::max(1.0, std::ceil(p / 100.0 * v.size())));
  return v[std::min(rank, v.size()) - 1];
}

struct Kill {
  int64_t at_ns;
  int old_leader, new_leader;
};

// Takeover and client-seen unavailability of one kill, from the acceptances around it.
std::pair<double, double> Measure(const std::vector<Accepted>& all, const Kill& k) {
  int64_t last_old = 0, first_new = INT64_MAX;
  for (const auto& a : all) {
    if (a.by == k.old_leader && a.done_ns <= k.at_ns) last_old = std::max(last_old, a.done_ns);
    if (a.by == k.new_leader && a.done_ns > k.at_ns) first_new = std::min(first_new, a.done_ns);
  }
  double unavailable = 0;
  for (const auto& a : all) {
    if (a.start_ns <= first_new && a.done_ns >= k.at_ns)
      unavailable = std::max(unavailable, (a.done_ns - a.start_ns) / 1e9);
  }
  return {(first_new - last_old) / 1e9, unavailable};
}

// N finished single-GPU jobs, each with a spec of its own (its name), committed 10,000 at a time.
hangar::Status Preload(const std::string& url, int n) {
  HANGAR_ASSIGN_OR_RETURN(auto store, hangar::controller::OpenStore(url));
  HANGAR_ASSIGN_OR_RETURN(
      hangar::job::JobSpec spec,
      hangar::job::ParseJobSpec(
          "name: x\ntasks:\n  - replicas: 1\n    gpus: 1\n    command: [sleep, \"1\"]\n",
          "preload"));
  hangar::controller::StoreBatch b;
  for (int i = 1; i <= n; ++i) {
    spec.name = "history-" + std::to_string(i);
    hangar::controller::JobRow r;
    r.id = static_cast<uint64_t>(i);
    r.name = spec.name;
    r.queue = spec.queue;
    r.user = spec.user;
    r.state = "succeeded";
    r.SetSpec(hangar::job::JobSpecToJson(spec).dump());
    r.submitted = 1'700'000'000'000 + i;
    r.started = r.submitted + 10;
    r.ended = r.started + 1000;
    r.attempt = 0;
    b.jobs.push_back(std::move(r));
    if (b.jobs.size() == 10000 || i == n) {
      if (i == n) b.values.push_back({"meta", "next_job_id", std::to_string(n + 1), false});
      HANGAR_RETURN_IF_ERROR(store->Commit(b));
      b = {};
    }
  }
  return hangar::Status::Ok();
}

// "restored N jobs from ... in X ms (HOW)" of every takeover, from the controllers' logs.
std::vector<std::pair<double, std::string>> Restores(const std::string& dir, int controllers) {
  std::vector<std::pair<double, std::string>> out;
  const std::regex re(R"(restored \d+ jobs from .* in (\d+) ms \(([^)]*)\))");
  for (int i = 0; i < controllers; ++i) {
    std::ifstream in(dir + "/ctl-" + std::to_string(i) + ".log");
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_search(line, m, re)) out.push_back({std::stod(m[1]), m[2]});
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int kills = 20;
  int preload = 0;
  bool json = false;
  hangar::testing::HaOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--json") {
      json = true;
    } else if (a == "--kills" && more) {
      kills = std::atoi(argv[++i]);
    } else if (a == "--controllers" && more) {
      o.controllers = std::atoi(argv[++i]);
    } else if (a == "--lease" && more) {
      o.lease = argv[++i];
    } else if (a == "--renew" && more) {
      o.renew = argv[++i];
    } else if (a == "--preload" && more) {
      preload = std::atoi(argv[++i]);
    } else if (a == "--standby-follow" && more) {
      o.follow = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: failover [--kills 20] [--controllers 3] [--lease 1500ms] [--renew "
                   "300ms] [--preload N] "
                   "[--standby-follow 250ms] [--json]\n");
      return 2;
    }
  }
  if (kills < 1 || o.controllers < 2) {
    std::fprintf(stderr, "failover: --kills must be at least 1 and --controllers at least 2\n");
    return 2;
  }
  if (preload > 0)
    o.before_controllers = [preload](const std::string& url) { return Preload(url, preload); };
  auto started = HaCluster::Start(o);
  if (!started.ok()) {
    std::fprintf(stderr, "failover: %s\n", started.status().ToString().c_str());
    return 1;
  }
  HaCluster& c = **started;
  Clients clients(&c, 2);
  std::vector<Kill> done;
  const bool warm = o.follow != "0" && o.follow != "0ms";
  for (int k = 0; k < kills; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    // Standbys of a large store are warm before the kill, as they are after minutes of standing by.
    if (warm && preload > 0 && !c.WaitStandbysReady(300 * hangar::kSecond)) {
      std::fprintf(stderr, "failover: the standbys' copies were not ready before kill %d:%s\n",
                   k + 1, c.Describe().c_str());
      return 1;
    }
    const int old = c.Leader();
    if (old < 0) {
      std::fprintf(stderr, "failover: no leader before kill %d:%s\n", k + 1, c.Describe().c_str());
      return 1;
    }
    const int64_t at = MonotonicNanos();
    c.Signal(old, SIGKILL);
    c.WaitExit(old, 5 * hangar::kSecond);
    const int now = c.WaitLeader((preload > 0 ? 120 : 10) * hangar::kSecond);
    if (now < 0 || now == old || !c.StartController(old).ok()) {
      std::fprintf(stderr, "failover: no takeover after kill %d:%s\n", k + 1, c.Describe().c_str());
      return 1;
    }
    done.push_back({at, old, now});
    if (!json) std::fprintf(stderr, "kill %d: ctl-%d -> ctl-%d\n", k + 1, old, now);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  clients.Stop();
  const auto all = clients.all();
  std::vector<double> takeover, unavailable;
  for (const auto& k : done) {
    const auto [t, u] = Measure(all, k);
    takeover.push_back(t);
    unavailable.push_back(u);
  }
  std::vector<uint64_t> ids;
  for (const auto& a : all) ids.push_back(a.id);
  const bool ended = c.WaitEnded(ids, 120 * hangar::kSecond);
  const auto v = c.Check(ids);
  nlohmann::json out = {{"kills", kills},
                        {"controllers", o.controllers},
                        {"lease", o.lease},
                        {"renew", o.renew},
                        {"takeover_p50_s", Percentile(takeover, 50)},
                        {"takeover_p99_s", Percentile(takeover, 99)},
                        {"takeover_max_s", Percentile(takeover, 100)},
                        {"api_unavailable_p50_s", Percentile(unavailable, 50)},
                        {"api_unavailable_p99_s", Percentile(unavailable, 99)},
                        {"jobs_accepted", ids.size()},
                        {"submissions_failed", clients.failed()},
                        {"all_ended", ended},
                        {"jobs_lost", v.jobs_lost},
                        {"jobs_ended_twice", v.jobs_ended_twice},
                        {"double_allocations", v.double_allocations},
                        {"tasks_started_twice", v.tasks_started_twice}};
  // The first controller's start is not a takeover: only restores after a kill count.
  auto restores = Restores(c.dir(), o.controllers);
  std::vector<double> restore_ms;
  int warm_takeovers = 0;
  for (size_t i = 1; i < restores.size(); ++i) {
    restore_ms.push_back(restores[i].first);
    warm_takeovers += restores[i].second.rfind("a standby's copy", 0) == 0;
  }
  out["preloaded_jobs"] = preload;
  out["standby_follow"] = o.follow;
  out["takeover_restore_p50_ms"] = Percentile(restore_ms, 50);
  out["takeover_restore_max_ms"] = Percentile(restore_ms, 100);
  out["takeovers_warm"] = warm_takeovers;
  for (const auto& p : v.problems) std::fprintf(stderr, "failover: %s\n", p.c_str());
  std::printf("%s\n", json ? out.dump().c_str() : out.dump(2).c_str());
  return v.ok() && ended && clients.failed() == 0 ? 0 : 1;
}
