// HaCluster's submissions, store queries and the invariant checker (ha_cluster.h).
#include <httplib.h>
#include <libpq-fe.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "agent/task_journal.h"
#include "ha_cluster.h"

namespace hangar::testing {
namespace {

const char* kEnded = "('succeeded','failed','cancelled','timed_out')";

std::string Ids(const std::vector<uint64_t>& ids) {
  std::string s = "'{";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "}'::bigint[]";
}

// Rows of `sql` as text.
std::vector<std::vector<std::string>> Rows(const std::string& url, const std::string& sql) {
  std::vector<std::vector<std::string>> out;
  PGconn* c = PQconnectdb(url.c_str());
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
      for (int i = 0; i < PQntuples(r); ++i) {
        out.emplace_back();
        for (int k = 0; k < PQnfields(r); ++k) out.back().push_back(PQgetvalue(r, i, k));
      }
    }
    PQclear(r);
  }
  PQfinish(c);
  return out;
}

struct Span {
  int64_t start = 0, end = INT64_MAX;  // ns; INT64_MAX: no end seen (live, or killed)
  std::string task;                    // "job/task/attempt"
};

}  // namespace

uint64_t HaCluster::Submit(int replicas, int gpus, double seconds, Duration timeout, int* by) {
  const std::string fields =
      "$HANGAR_NODE $HANGAR_JOB_ID $HANGAR_TASK_INDEX $HANGAR_ATTEMPT $CUDA_VISIBLE_DEVICES";
  const std::string marks = dir_ + "/marks";
  const std::string sh = "echo start " + fields + " $(date +%s%N) >> " + marks + "; sleep " +
                         std::to_string(seconds) + "; echo end " + fields + " $(date +%s%N) >> " +
                         marks;
  const std::string yaml = "name: ha\ntasks:\n  - replicas: " + std::to_string(replicas) +
                           "\n    gpus: " + std::to_string(gpus) +
                           "\n    command: [\"/bin/sh\", \"-c\", \"" + sh + "\"]\n";
  std::random_device rd;
  const std::string key = std::to_string(rd()) + std::to_string(rd()) + std::to_string(rd());
  const int64_t until = MonotonicNanos() + timeout * 1'000'000;
  static thread_local int hint = 0;
  for (int i = hint; MonotonicNanos() < until; i = (i + 1) % controllers()) {
    httplib::Client c("127.0.0.1", api_ports_[i]);
    c.set_connection_timeout(0, 300'000);
    c.set_read_timeout(1, 0);
    auto r =
        c.Post("/v1/jobs", httplib::Headers{{"Idempotency-Key", key}}, yaml, "application/yaml");
    if (r && (r->status == 201 || r->status == 200)) {
      auto j = nlohmann::json::parse(r->body, nullptr, false);
      hint = i;
      if (by) *by = i;
      return j.is_object() ? j.value("id", uint64_t{0}) : 0;
    }
    if (r && r->status != 503) return 0;  // refused: not a failover matter
    const std::string leader = r ? r->get_header_value("X-Hangar-Leader") : "";
    bool followed = false;
    for (int k = 0; k < controllers() && !leader.empty(); ++k) {
      if (api(k) == leader && k != i) {
        i = k - 1 + controllers();  // the loop's step lands on k
        followed = true;
      }
    }
    if (!followed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

nlohmann::json HaCluster::Get(const std::string& path) {
  const int l = Leader();
  if (l < 0) return nullptr;
  httplib::Client c("127.0.0.1", api_ports_[l]);
  c.set_read_timeout(5, 0);
  auto r = c.Get(path);
  return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
}

bool HaCluster::WaitEnded(const std::vector<uint64_t>& ids, Duration timeout) {
  if (ids.empty()) return true;
  const int64_t until = MonotonicNanos() + timeout * 1'000'000;
  const std::string sql =
      "SELECT count(*) FROM jobs WHERE id = ANY(" + Ids(ids) + ") AND state IN " + kEnded;
  for (;;) {
    auto rows = Rows(url_, sql);
    if (!rows.empty() && std::stoul(rows[0][0]) == ids.size()) return true;
    if (MonotonicNanos() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Invariants HaCluster::Check(const std::vector<uint64_t>& accepted) {
  Invariants v;
  auto note = [&v](const std::string& s) {
    if (v.problems.size() < 10) v.problems.push_back(s);
  };
  // Every accepted job ended, exactly once (its row, and its ending events).
  std::map<uint64_t, std::string> state;
  for (const auto& r :
       Rows(url_, "SELECT id, state FROM jobs WHERE id = ANY(" + Ids(accepted) + ")")) {
    state[std::stoull(r[0])] = r[1];
  }
  std::map<std::string, int> endings;
  for (const auto& r :
       Rows(url_,
            "SELECT subject, count(*) FROM events WHERE kind = 'job' AND (message = 'succeeded' "
            "OR message = 'cancelled' OR message LIKE 'failed:%' OR message LIKE 'timed out:%') "
            "GROUP BY subject")) {
    endings[r[0]] = std::stoi(r[1]);
  }
  for (uint64_t id : accepted) {
    const std::string s = state.count(id) ? state[id] : "missing";
    const int n = endings["job/" + std::to_string(id)];
    if (s != "succeeded" || n == 0) {
      ++v.jobs_lost;
      note("job " + std::to_string(id) + " is " + s + " with " + std::to_string(n) + " endings");
    } else if (n > 1) {
      ++v.jobs_ended_twice;
      note("job " + std::to_string(id) + " ended " + std::to_string(n) + " times");
    }
  }
  // The tasks' own marks: each (job, task) starts once; a GPU of a node has one live task at a
  // time.
  std::map<std::string, Span> spans;  // by node/job/task/attempt
  std::map<std::string, int> starts;  // by job/task
  std::map<std::string, std::vector<std::string>> gpus_of;
  std::ifstream in(dir_ + "/marks");
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string what, node, job, task, attempt, gpus;
    int64_t ns = 0;
    if (!(f >> what >> node >> job >> task >> attempt >> gpus >> ns)) continue;
    const std::string key = node + "/" + job + "/" + task + "/" + attempt;
    if (what == "start") {
      spans[key].start = ns;
      spans[key].task = job + "/" + task;
      if (++starts[job + "/" + task] == 2) {
        ++v.tasks_started_twice;
        note("task " + job + "/" + task + " started twice (again on " + node + ", attempt " +
             attempt + ")");
      }
      std::stringstream g(gpus);
      for (std::string one; std::getline(g, one, ',');) gpus_of[key].push_back(node + "#" + one);
    } else if (what == "end") {
      spans[key].end = ns;
    }
  }
  // A task killed before its end mark: the agent's record of when it ended.
  for (const auto& node : o_.nodes) {
    for (const auto& r : agent::LatestTaskRecords(dir_ + "/agents/" + node)) {
      const std::string key = node + "/" + std::to_string(r.value("job_id", 0)) + "/" +
                              std::to_string(r.value("index", 0)) + "/" +
                              std::to_string(r.value("attempt", 0));
      auto it = spans.find(key);
      if (it != spans.end() && it->second.end == INT64_MAX && r.value("ended", false)) {
        it->second.end = r.value("ended_at", int64_t{0}) * 1'000'000;
      }
    }
  }
  std::map<std::string, std::vector<Span>> by_gpu;
  for (const auto& [key, span] : spans) {
    for (const auto& g : gpus_of[key]) by_gpu[g].push_back(span);
  }
  for (auto& [gpu, list] : by_gpu) {
    std::sort(list.begin(), list.end(),
              [](const Span& a, const Span& b) { return a.start < b.start; });
    for (size_t i = 1; i < list.size(); ++i) {
      if (list[i].start < list[i - 1].end) {
        ++v.double_allocations;
        note("GPU " + gpu + " held by " + list[i - 1].task + " and " + list[i].task + " at once");
      }
    }
  }
  return v;
}

std::string HaCluster::Describe() {
  std::string out;
  for (int i = 0; i < controllers(); ++i) {
    const bool alive = Alive(i);
    out += "\n--- controller " + std::to_string(i) +
           (alive ? " (running)" : " (exited, status " + std::to_string(exit_status_[i]) + ")") +
           ":\n";
    std::ifstream in(dir_ + "/ctl-" + std::to_string(i) + ".log");
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    for (size_t k = lines.size() > 8 ? lines.size() - 8 : 0; k < lines.size(); ++k)
      out += lines[k] + "\n";
  }
  return out;
}

}  // namespace hangar::testing
