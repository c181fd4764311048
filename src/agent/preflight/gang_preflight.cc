#include "agent/preflight/gang_preflight.h"

#include <gloo/allreduce_ring.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "agent/gpu/validate_program.h"

namespace hangar::agent::preflight {

namespace {

using Clock = std::chrono::steady_clock;

// GB/s with two decimals, or three significant digits below 1 (a loaded loopback's 0.00371).
std::string Bandwidth(double gbs) {
  char buf[64];
  std::snprintf(buf, sizeof buf, gbs >= 1 ? "%.2f" : "%.3g", gbs);
  return buf;
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Gloo's rendezvous over ours: its keys under the gang's store, its waits bounded by the budget.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(RendezvousClient* c, Clock::time_point deadline) : c_(c), deadline_(deadline) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    Status s = c_->Set("gloo/" + key, std::string(data.begin(), data.end()));
    if (!s.ok()) throw gloo::IoException("rendezvous: " + s.message());
  }
  std::vector<char> get(const std::string& key) override {
    auto v = c_->Get("gloo/" + key, deadline_);
    if (!v.ok()) throw gloo::IoException("rendezvous: " + v.status().message());
    return {v->begin(), v->end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    for (const auto& k : keys) (void)get(k);
  }

 private:
  RendezvousClient* c_;
  Clock::time_point deadline_;
};

// The all-reduce: a warm-up, then up to five timed rounds within `until`; the sum is checked on
// every element (each rank adds rank + 1).
struct AllreduceFigure {
  double busbw_gbs = 0;
  std::string what;  // how it was measured, in words
};

StatusOr<AllreduceFigure> Allreduce(const PreflightOptions& o, RendezvousClient* client,
                                    Clock::time_point until) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = o.host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(static_cast<int>(o.rank),
                                                               static_cast<int>(o.world));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    context->setTimeout(std::max(left, std::chrono::milliseconds(1000)));
    GlooStore store(client, until);
    context->connectFullMesh(store, device);
    const size_t count = std::max<size_t>(1, o.allreduce_bytes / sizeof(float));
    std::vector<float> data(count);
    const float expect = static_cast<float>(o.world) * static_cast<float>(o.world + 1) / 2;
    // One all-reduce, its sum checked on every element; its seconds.
    auto one = [&]() -> StatusOr<double> {
      std::fill(data.begin(), data.end(), static_cast<float>(o.rank + 1));
      gloo::AllreduceRing<float> ring(context, {data.data()}, static_cast<int>(count));
      const auto t0 = Clock::now();
      ring.run();
      const double took = SecondsSince(t0);
      for (size_t i = 0; i < count; ++i) {
        if (data[i] != expect) {
          return Status::Internal("the all-reduce's sum is wrong at element " + std::to_string(i) +
                                  ": " + Fixed(data[i], 1) + " instead of " + Fixed(expect, 1));
        }
      }
      return took;
    };
    AllreduceFigure f;
    HANGAR_ASSIGN_OR_RETURN(const double warm, one());
    // How many timed rounds fit what is left of the budget (up to five) is rank 0's to say: every
    // rank must run the same number, or the ones that run more wait for the others to time out.
    // None fit: the warm-up is the figure.
    if (o.rank == 0) {
      const double left_s = std::chrono::duration<double>(until - Clock::now()).count();
      const int fit = warm > 0 ? static_cast<int>(left_s / (warm * 1.5)) : 5;
      HANGAR_RETURN_IF_ERROR(client->Set("gloo-rounds", std::to_string(std::clamp(fit, 0, 5))));
    }
    HANGAR_ASSIGN_OR_RETURN(const std::string fit, client->Get("gloo-rounds", until));
    const int rounds = std::atoi(fit.c_str());
    double total = 0;
    for (int round = 0; round < rounds; ++round) {
      HANGAR_ASSIGN_OR_RETURN(const double took, one());
      total += took;
    }
    const double round_s = rounds > 0 ? total / rounds : warm;
    const double n = o.world;
    f.busbw_gbs =
        round_s > 0 ? 2 * (n - 1) / n * static_cast<double>(o.allreduce_bytes) / round_s / 1e9 : 0;
    const double mib = static_cast<double>(o.allreduce_bytes) / (1 << 20);
    f.what = "all-reduce of " + Fixed(mib, mib < 10 ? 1 : 0) + " MiB across " +
             std::to_string(o.world) + " ranks: " + Bandwidth(f.busbw_gbs) +
             " GB/s bus bandwidth (" + Fixed(round_s * 1000, 1) + " ms a round, " +
             (rounds > 0 ? std::to_string(rounds) + " rounds" : std::string("the warm-up alone")) +
             ", sum checked)";
    return f;
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("the all-reduce failed: ") + e.what());
  }
}

// hangar-validate's JSON answer to `args`, run with this task's GPUs, within `until`.
StatusOr<nlohmann::json> RunValidate(const PreflightOptions& o, std::vector<std::string> args,
                                     Clock::time_point until, bool with_gpus) {
  ValidateRun run;
  // NVML's ordinals, as the task has them.
  if (with_gpus) run.env = {{"CUDA_VISIBLE_DEVICES", o.gpus}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}};
  run.argv = {o.nccl_program};
  run.argv.insert(run.argv.end(), args.begin(), args.end());
  run.scratch_dir = o.scratch_dir;
  std::error_code ec;
  std::filesystem::create_directories(run.scratch_dir, ec);
  run.timeout = std::max<Duration>(
      kSecond, std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
  HANGAR_ASSIGN_OR_RETURN(std::string out, RunValidateProgram(run, nullptr));
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_object()) return Status::Unavailable("hangar-validate printed no JSON object");
  if (j.contains("error")) return Status::Unavailable(j["error"].dump());
  return j;
}

// The all-reduce with NCCL across every GPU of the gang (hangar-validate --nccl-gang): rank 0
// makes the communicator's id, each rank says how many GPUs it brings, and each joins its own as
// the ranks after those of the ranks before it.
StatusOr<AllreduceFigure> NcclAllreduce(const PreflightOptions& o, RendezvousClient* c,
                                        Clock::time_point until) {
  const int mine =
      o.gpus.empty() ? 0 : 1 + static_cast<int>(std::count(o.gpus.begin(), o.gpus.end(), ','));
  HANGAR_RETURN_IF_ERROR(c->Set("nccl/gpus/" + std::to_string(o.rank), std::to_string(mine)));
  if (o.rank == 0) {
    auto id = RunValidate(o, {"--nccl-id"}, until, /*with_gpus=*/false);
    HANGAR_RETURN_IF_ERROR(c->Set("nccl/id", id.ok() ? id->value("nccl_id", std::string())
                                                     : "error: " + id.status().message()));
  }
  HANGAR_ASSIGN_OR_RETURN(std::string id, c->Get("nccl/id", until));
  if (id.empty() || id.rfind("error: ", 0) == 0)
    return Status::Unavailable("rank 0 could not make the NCCL id: " +
                               id.substr(std::min<size_t>(7, id.size())));
  int first = 0, total = 0;
  for (uint32_t r = 0; r < o.world; ++r) {
    HANGAR_ASSIGN_OR_RETURN(std::string n, c->Get("nccl/gpus/" + std::to_string(r), until));
    const int count = std::atoi(n.c_str());
    if (r < o.rank) first += count;
    total += count;
  }
  const uint64_t mib = std::max<uint64_t>(1, o.allreduce_bytes >> 20);
  auto r =
      RunValidate(o,
                  {"--nccl-gang", id, "--nranks", std::to_string(total), "--first-rank",
                   std::to_string(first), "--nccl-mib", std::to_string(mib), "--iterations", "5"},
                  until, /*with_gpus=*/true);
  if (!r.ok()) return Status::Unavailable("the NCCL all-reduce failed: " + r.status().message());
  AllreduceFigure f;
  f.busbw_gbs = r->value("nccl_gang_busbw_gbs", 0.0);
  f.what = "NCCL all-reduce of " + std::to_string(mib) + " MiB across " + std::to_string(total) +
           " GPUs (" + std::to_string(o.world) + " ranks): " + Bandwidth(f.busbw_gbs) +
           " GB/s bus bandwidth";
  return f;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

nlohmann::json PreflightResult::ToJson() const {
  return {{"ok", ok},
          {"failed_ranks", failed_ranks},
          {"summary", summary},
          {"allreduce_busbw_gbs", allreduce_busbw_gbs},
          {"seconds", seconds}};
}

std::vector<std::string> JudgeNodeChecks(const std::vector<nlohmann::json>& checks,
                                         double slow_fraction) {
  std::vector<std::string> why(checks.size());
  static const char* kMetrics[] = {"gemm_tflops", "mem_bw_gbs"};
  std::map<std::string, std::vector<double>> values;
  for (const auto& c : checks) {
    if (!c.is_object() || !c.contains("gpus") || !c["gpus"].is_array()) continue;
    for (const auto& g : c["gpus"]) {
      for (const char* m : kMetrics) {
        if (g.is_object() && g.contains(m) && g[m].is_number())
          values[m].push_back(g[m].get<double>());
      }
    }
  }
  std::map<std::string, double> median;
  for (const auto& [m, v] : values) median[m] = Median(v);
  for (size_t r = 0; r < checks.size(); ++r) {
    const nlohmann::json& c = checks[r];
    if (c.is_null()) continue;
    auto fail = [&](const std::string& w) { why[r] += (why[r].empty() ? "" : "; ") + w; };
    if (!c.is_object()) {
      fail("its node check printed no JSON object");
      continue;
    }
    if (c.contains("error")) fail("its node check failed: " + c["error"].dump());
    if (c.contains("nccl") && c["nccl"].is_string() &&
        c["nccl"].get<std::string>().rfind("failed", 0) == 0)
      fail("its node's NCCL check " + c["nccl"].get<std::string>());
    if (!c.contains("gpus") || !c["gpus"].is_array()) continue;
    for (const auto& g : c["gpus"]) {
      if (!g.is_object()) continue;
      const std::string gpu = "GPU " + (g.contains("index") ? g["index"].dump() : std::string("?"));
      if (g.contains("error")) fail(gpu + ": " + g["error"].get<std::string>());
      for (const char* m : kMetrics) {
        if (!g.contains(m) || !g[m].is_number() || median[m] <= 0) continue;
        const double v = g[m].get<double>();
        if (v < slow_fraction * median[m]) {
          fail(gpu + "'s " + m + " " + Fixed(v, 1) + " is " + Fixed(100 * v / median[m], 0) +
               "% of the gang's median " + Fixed(median[m], 1) + " (below " +
               Fixed(100 * slow_fraction, 0) + "%)");
        }
      }
    }
  }
  return why;
}

namespace {

// Rank 0's server. The port may still be held a moment by what used it last (an earlier
// preflight of the same attempt, orphaned by an agent restart, ends within its budget): it is
// tried until `until`.
StatusOr<std::unique_ptr<RendezvousServer>> Serve(const PreflightOptions& o,
                                                  Clock::time_point until) {
  auto s = RendezvousServer::Listen(o.store_host, o.store_port);
  while (!s.ok() && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    s = RendezvousServer::Listen(o.store_host, o.store_port);
  }
  return s;
}

// Rank 0's verdict from every rank's node check, read until `judge_by`: {"failed": [{"rank",
// "why"}], "nodes_checked"}.
nlohmann::json Judge(const PreflightOptions& o, RendezvousClient& c, Clock::time_point start,
                     Clock::time_point judge_by) {
  std::vector<nlohmann::json> checks(o.world);
  std::vector<uint32_t> absent;
  for (uint32_t r = 0; r < o.world; ++r) {
    auto v = c.Get("check/" + std::to_string(r), judge_by);
    if (!v.ok()) {
      absent.push_back(r);
      continue;
    }
    checks[r] = nlohmann::json::parse(*v, nullptr, false);
  }
  nlohmann::json failed = nlohmann::json::array();
  // When no other rank came at all, the fault is more likely rank 0's own (its address or port
  // unreachable) than every other node's.
  if (o.world >= 3 && absent.size() == o.world - 1) {
    failed.push_back({{"rank", 0},
                      {"why", "no other rank of the gang reached its rendezvous at " +
                                  HostPort(o.store_host, o.store_port)}});
  } else {
    const std::string within =
        Fixed(std::chrono::duration<double>(judge_by - start).count(), 0) + " s";
    for (uint32_t r : absent) {
      failed.push_back(
          {{"rank", r}, {"why", "it did not join the gang's rendezvous within " + within}});
    }
  }
  const std::vector<std::string> why = JudgeNodeChecks(checks, o.slow_fraction);
  for (uint32_t r = 0; r < o.world; ++r) {
    if (!why[r].empty()) failed.push_back({{"rank", r}, {"why", why[r]}});
  }
  int nodes = 0;
  for (const auto& ch : checks) nodes += !ch.is_null();
  return {{"failed", failed}, {"nodes_checked", nodes}};
}

// Says this rank is done with the rendezvous; rank 0 (`server` set) keeps serving until every rank
// has said so, or `until`.
void LeaveRendezvous(const PreflightOptions& o, RendezvousClient& c, bool server,
                     Clock::time_point until) {
  (void)c.Set("done/" + std::to_string(o.rank), "1");
  if (!server) return;
  for (uint32_t r = 0; r < o.world; ++r) (void)c.Get("done/" + std::to_string(r), until);
}

}  // namespace

PreflightResult RunPreflight(const PreflightOptions& o) {
  const auto start = Clock::now();
  const auto budget = std::chrono::milliseconds(o.budget);
  const auto deadline = start + budget;
  PreflightResult out;
  auto finish = [&](PreflightResult r) {
    r.seconds = SecondsSince(start);
    return r;
  };
  if (o.world == 0 || o.rank >= o.world) {
    out.summary =
        "rank " + std::to_string(o.rank) + " is outside a gang of " + std::to_string(o.world);
    return finish(out);
  }
  // Rank 0 serves the rendezvous (for up to 30% of the budget): its node is the one that cannot
  // host it when it cannot listen.
  std::unique_ptr<RendezvousServer> server;
  if (o.rank == 0) {
    auto s = Serve(o, start + budget * 3 / 10);
    if (!s.ok()) {
      out.failed_ranks = {0};
      out.summary = "rank 0 cannot serve the gang's rendezvous: " + s.status().message();
      return finish(out);
    }
    server = std::move(*s);
  }
  auto client = RendezvousClient::Connect(o.store_host, o.store_port, deadline);
  if (!client.ok()) {
    out.summary = "rank " + std::to_string(o.rank) + " could not reach the gang's rendezvous at " +
                  HostPort(o.store_host, o.store_port) + " (rank 0's node) within " +
                  std::to_string(o.budget / kSecond) + " s: " + client.status().message();
    return finish(out);
  }
  RendezvousClient& c = **client;
  Status s = c.Set("check/" + std::to_string(o.rank), o.node_check.dump());
  // Rank 0 judges, by 60% of the budget; the others wait for its verdict until 75%.
  if (s.ok() && server) s = c.Set("verdict", Judge(o, c, start, start + budget * 6 / 10).dump());
  StatusOr<std::string> verdict_text =
      s.ok() ? c.Get("verdict", start + budget * 3 / 4) : StatusOr<std::string>(s);
  if (!verdict_text.ok()) {
    out.summary = "rank " + std::to_string(o.rank) + " had no verdict from rank 0 within " +
                  Fixed(0.75 * static_cast<double>(o.budget) / kSecond, 0) +
                  " s: " + verdict_text.status().message();
    return finish(out);
  }
  const nlohmann::json verdict = nlohmann::json::parse(*verdict_text, nullptr, false);
  std::set<uint32_t> failed;
  std::string reasons;
  for (const auto& f : verdict.is_object() ? verdict.value("failed", nlohmann::json::array())
                                           : nlohmann::json::array()) {
    const uint32_t r = f.value("rank", 0u);
    failed.insert(r);
    reasons += (reasons.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " +
               f.value("why", std::string());
  }
  if (!failed.empty()) {
    out.failed_ranks.assign(failed.begin(), failed.end());
    out.summary = reasons;
    // Rank 0 keeps the rendezvous up a moment for the others to read the verdict.
    LeaveRendezvous(o, c, server != nullptr,
                    std::min(deadline, Clock::now() + std::chrono::seconds(2)));
    return finish(out);
  }
  // On GPU nodes, NCCL across the gang's GPUs; elsewhere Gloo across its tasks.
  auto figure = o.nccl_program.empty() || o.gpus.empty() ? Allreduce(o, &c, deadline)
                                                         : NcclAllreduce(o, &c, deadline);
  LeaveRendezvous(o, c, server != nullptr, deadline);
  if (!figure.ok()) {
    out.summary = figure.status().message();
    return finish(out);
  }
  out.ok = true;
  out.allreduce_busbw_gbs = figure->busbw_gbs;
  out.summary = std::to_string(verdict.is_object() ? verdict.value("nodes_checked", 0) : 0) +
                " node check(s) passed; " + figure->what;
  return finish(out);
}

}  // namespace hangar::agent::preflight
