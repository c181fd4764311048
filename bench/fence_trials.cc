// bench/fence_trials (issue 38): kill -9 of an agent under a running job, N times; do the job's
// attempts ever overlap? A real controller and two agents with fake GPUs (the tests' LocalCluster);
// each trial submits a one-task job that records its own start and then a tick every 50 ms (as
// node_fence_test's), kills the agent of the node it runs on, waits for the next attempt to run on
// the other node, and compares what the two tasks recorded: attempt 0's last tick must come before
// attempt 1's start. The killed agent is started again before the next trial (alternate nodes).
// Prints JSON: trials, overlaps, per trial the recovery time (the kill to the next attempt's own
// start) and the gap (attempt 0's last tick to attempt 1's start), with their p50 and max.
//
//   fence_trials [--trials 20] [-- extra controller flags, e.g. --node-lease 5s]
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "local_cluster.h"

namespace {

using hangar::kSecond;
using hangar::testing::Lines;
using hangar::testing::LocalCluster;
using hangar::testing::ReadFile;

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Interval {
  int64_t start = 0, last = 0;
};

Interval Recorded(const std::string& marks, const std::string& task_id) {
  Interval i;
  const auto start = Lines(ReadFile(marks + "/" + task_id + ".start"));
  const auto ticks = Lines(ReadFile(marks + "/" + task_id + ".ticks"));
  if (!start.empty()) i.start = std::stoll(start.back());
  if (!ticks.empty()) i.last = std::stoll(ticks.back());
  return i;
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  int trials = 20;
  std::vector<std::string> extra;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--trials" && i + 1 < argc) {
      trials = std::stoi(argv[++i]);
    } else if (a == "--") {
      extra.assign(argv + i + 1, argv + argc);
      break;
    } else {
      std::fprintf(stderr, "usage: fence_trials [--trials N] [-- controller flags]\n");
      return 2;
    }
  }
  LocalCluster cluster(
      "node_defaults: {gpus: 1, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: "
      "64Gi}\n"
      "nodes: [{name: node-1}, {name: node-2}]\n",
      extra);
  const std::string marks = cluster.dir() + "/marks";
  std::filesystem::create_directories(marks);
  chmod(marks.c_str(), 0777);
  cluster.StartController();
  cluster.StartAllAgents({"node-1", "node-2"});
  if (!cluster.WaitForAgents(2, 30 * kSecond)) {
    std::fprintf(stderr, "the agents did not register; see %s\n", cluster.dir().c_str());
    return 1;
  }
  const std::string script = "f=" + marks +
                             "/$HANGAR_TASK_ID; date +%s%N > $f.start; "
                             "while :; do date +%s%N >> $f.ticks; sleep 0.05; done";
  const std::string spec =
      nlohmann::json{{"name", "ticker"},
                     {"tasks", {{{"gpus", 1}, {"command", {"/bin/sh", "-c", script}}}}}}
          .dump();
  nlohmann::json runs = nlohmann::json::array();
  std::vector<double> recovery, gap;
  int overlaps = 0, failed = 0;
  for (int t = 0; t < trials; ++t) {
    int status = 0;
    const uint64_t id = cluster.Post("/v1/jobs", spec, &status).value("id", 0ull);
    const std::string first_task = std::to_string(id) + ".0.0",
                      second_task = std::to_string(id) + ".1.0";
    if (status != 201 || !cluster.WaitForJobState(id, "running", 30 * kSecond) ||
        !LocalCluster::WaitFor([&] { return Recorded(marks, first_task).last > 0; },
                               10 * kSecond)) {
      std::fprintf(stderr, "trial %d: job %lu did not start; see %s\n", t, id,
                   cluster.dir().c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const std::string victim = cluster.Job(id)["task_list"][0].value("node", "");
    const int64_t killed = WallNs();
    cluster.KillAgent(victim, SIGKILL);
    const bool moved =
        LocalCluster::WaitFor([&] { return Recorded(marks, second_task).last > 0; }, 90 * kSecond);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const Interval a = Recorded(marks, first_task), b = Recorded(marks, second_task);
    nlohmann::json run = {{"job", id}, {"killed_node", victim}};
    if (!moved) {
      ++failed;
      run["error"] = "the next attempt did not start within 90 s";
    } else {
      const bool overlap = a.last >= b.start;
      overlaps += overlap;
      const double rec = static_cast<double>(b.start - killed) / 1e6,
                   g = static_cast<double>(b.start - a.last) / 1e6;
      recovery.push_back(rec);
      gap.push_back(g);
      run.update({{"overlap", overlap}, {"recovery_ms", rec}, {"gap_ms", g}});
    }
    runs.push_back(run);
    std::fprintf(stderr, "trial %d: %s\n", t, run.dump().c_str());
    cluster.Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", &status);
    cluster.StartAgent(victim);
    if (!cluster.WaitForAgents(2, 30 * kSecond)) {
      std::fprintf(stderr, "trial %d: agent %s did not come back\n", t, victim.c_str());
      return 1;
    }
  }
  nlohmann::json out = {{"trials", trials},
                        {"overlaps", overlaps},
                        {"no_next_attempt", failed},
                        {"controller_flags", extra},
                        {"recovery_ms", {{"p50", Pct(recovery, 0.5)}, {"max", Pct(recovery, 1.0)}}},
                        {"gap_ms", {{"min", Pct(gap, 0.0)}, {"p50", Pct(gap, 0.5)}}},
                        {"runs", runs}};
  std::printf("%s\n", out.dump(2).c_str());
  return overlaps == 0 && failed == 0 ? 0 : 1;
}
