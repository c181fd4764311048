// bench/fleet_scale: one controller (embedded SQLite store) against `hangar swarm` playing a
// 10,240-node x 8-GPU fat-tree over real agent streams, on this machine. Measures:
//   - heartbeats ingested per second, and controller CPU seconds per 10,000 heartbeats;
//   - controller resident memory per node, and per queued job with 100,000 and 1,000,000 queued;
//   - committed placements per second for a stream of 1-GPU jobs, and for 2-node x 8-GPU gangs
//     (a placement counts once it is committed to the store; the store commits before agents are
//     told);
//   - time from 1% of the agents going silent to their nodes marked lost and gangs requeued.
//     The controller runs with --heartbeat-timeout 2500ms (heartbeats every 1 s), stretched by
//     how late heartbeats arrive (controller/state/ingest_lag.h); live nodes marked lost are
//     counted.
//
//   fleet_scale [--nodes N] [--json] [--no-million]   (N: 1024, 2560, 5120 or 10240)
//   (each form also takes --hangar PATH: another build's binary, to compare one after the other)
//   fleet_scale --store postgres[://URL] [--rounds N] [--nodes N] [--json]
//   fleet_scale --compare-tls [--nodes N] [--rounds N] [--json]
// With --compare-tls (issue 16), the same fleet over plaintext and over mutual TLS, each agent on a
// connection of its own in both: registration (the handshakes), heartbeat cost, controller RSS and
// the placement rate (its submissions over HTTPS), and the ratios; N rounds in alternating order.
// With --store, only the placement step, on SQLite and on PostgreSQL in turn (issue 18): the URL's
// database (empty; one round), or with no URL a server of the bench's own
// (controller/store/testing, fsync on), N rounds in alternating order; then what bounds each store,
// measured on the store alone: commits per second of one-row batches, and the time to commit a
// batch of 1,000 job rows.
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "common/net.h"
#include "common/time.h"
#include "controller/store/state_store.h"
#include "controller/store/testing/postgres_server.h"
#include "store_rates.h"

namespace {

namespace fs = std::filesystem;
using hangar::kSecond;
using hangar::Status;

std::string binary = HANGAR_BINARY;  // --hangar: another build's, to compare one after the other

Proc Spawn(const std::vector<std::string>& args, const std::string& log) {
  return ::Spawn(binary, args, log);
}

double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  auto close = s.rfind(')');
  std::istringstream rest(s.substr(close + 2));
  std::string f;
  std::vector<std::string> v;
  while (rest >> f) v.push_back(f);
  return (std::stod(v[11]) + std::stod(v[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double RssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024;
  }
  return 0;
}

bool WaitFor(const std::function<bool()>& pred, hangar::Duration timeout, int step_ms = 50) {
  const auto until = hangar::SystemClock::Default()->Now() + timeout;
  while (hangar::SystemClock::Default()->Now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  }
  return pred();
}

class Bench {
 public:
  Bench(int nodes, std::string dir) : nodes_(nodes), dir_(std::move(dir)) {}
  ~Bench() {
    swarm_.Stop();
    controller_.Stop();
  }

  // tls: the controller serves HTTPS and mutual TLS with certificates made by `hangar certs`
  // (a CA, the controller's, every node's), and the swarm connects each agent over its own
  // mutual-TLS connection. channels: the swarm's connections (0: one per agent).
  void StartController(const std::string& name, int nodes, const std::string& store = "",
                       bool tls = false, const std::string& heartbeat_timeout = "2500ms") {
    const int spines = nodes / 1024 > 0 ? nodes / 1024 : 1;
    const int leaves = nodes / spines / 32;
    std::ofstream(dir_ + "/" + name + ".yaml")
        << "name: " << name
        << "\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, "
        << "cpu: 192, memory: 2Ti}\nfat_tree: {spines: " << spines
        << ", leaves_per_spine: " << std::max(1, leaves)
        << ", nodes_per_leaf: " << (nodes < 32 ? nodes : 32) << "}\n";
    cluster_ = dir_ + "/" + name + ".yaml";
    fs::remove(dir_ + "/ports.json");
    tls_ = tls ? dir_ + "/tls" : "";
    if (tls && !fs::exists(tls_ + "/controller.crt")) {
      for (const auto& args : std::vector<std::vector<std::string>>{
               {"hangar", "certs", "init", "--dir", tls_},
               {"hangar", "certs", "issue", "--controller", "--dir", tls_},
               {"hangar", "certs", "issue", "--nodes-of", cluster_, "--dir", tls_}}) {
        Proc p = Spawn(args, dir_ + "/certs.log");
        int status = 0;
        waitpid(p.pid, &status, 0);
        p.pid = 0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
          std::fprintf(stderr, "hangar certs failed; see %s/certs.log\n", dir_.c_str());
      }
    }
    std::vector<std::string> args = {
        "hangar",
        "controller",
        "--cluster",
        cluster_,
        "--api",
        "127.0.0.1:0",
        "--agents",
        "127.0.0.1:0",
        "--store",
        store.empty() ? "sqlite://" + dir_ + "/" + name + ".db" : store,
        "--port-file",
        dir_ + "/ports.json",
        "--heartbeat-timeout",
        heartbeat_timeout,
        "--auth",
        "none"};
    if (tls) {
      args.insert(args.end(), {"--tls-dir", tls_});
    } else {
      args.push_back("--insecure");
    }
    controller_ = Spawn(args, dir_ + "/" + name + "-controller.log");
    WaitFor([&] { return fs::exists(dir_ + "/ports.json"); }, 20 * kSecond);
    auto j = nlohmann::json::parse(std::ifstream(dir_ + "/ports.json"));
    api_ = j["api"];
    agents_ = j["agents"];
  }

  bool StartSwarm(const std::string& name, int channels = 32) {
    fs::remove(dir_ + "/silence");
    std::vector<std::string> args = {"hangar",
                                     "swarm",
                                     "--controller",
                                     "127.0.0.1:" + std::to_string(agents_),
                                     "--cluster",
                                     cluster_,
                                     "--stats-file",
                                     dir_ + "/swarm.json",
                                     "--silent-fraction",
                                     "0.01",
                                     "--silence-file",
                                     dir_ + "/silence",
                                     "--task-duration",
                                     "3600s",
                                     "--channels",
                                     std::to_string(channels)};
    if (!tls_.empty()) args.insert(args.end(), {"--tls-dir", tls_});
    swarm_ = Spawn(args, dir_ + "/" + name + "-swarm.log");
    return WaitFor([&] { return Metric("hangar_agents_connected") == Count(); }, 180 * kSecond,
                   200);
  }

  // A client of the API: https:// with the bench's CA when the controller runs TLS.
  httplib::Client Client() const {
    httplib::Client c((tls_.empty() ? "http://127.0.0.1:" : "https://127.0.0.1:") +
                      std::to_string(api_));
    if (!tls_.empty()) {
      c.set_ca_cert_path(tls_ + "/ca.crt");
      c.enable_server_certificate_verification(true);
    }
    return c;
  }

  double Metric(const std::string& name, const std::string& labels = "") {
    httplib::Client c = Client();
    c.set_read_timeout(30, 0);
    auto r = c.Get("/metrics?gpus=0&nodes=0");  // counters only: not 650k per-GPU lines per poll
    if (!r) return -1;
    std::istringstream in(r->body);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(name + labels + " ", 0) == 0)
        return std::stod(line.substr(name.size() + labels.size() + 1));
    }
    return -1;
  }

  // In requests of at most 10,000 copies, the API's cap on ?count= (one commit each).
  bool SubmitArray(const std::string& spec, long count) {
    httplib::Client c = Client();
    c.set_read_timeout(600, 0);
    c.set_tcp_nodelay(true);
    for (long left = count; left > 0;) {
      const long n = std::min<long>(left, 10'000);
      auto r = c.Post("/v1/jobs?count=" + std::to_string(n), spec, "application/yaml");
      if (!r || r->status != 201) return false;
      left -= n;
    }
    return true;
  }

  double Count() const { return nodes_; }
  int api() const { return api_; }
  pid_t controller_pid() const { return controller_.pid; }
  Proc& controller() { return controller_; }
  Proc& swarm() { return swarm_; }
  const std::string& dir() const { return dir_; }

 private:
  int nodes_;
  std::string dir_, cluster_, tls_;
  Proc controller_, swarm_;
  int api_ = 0, agents_ = 0;
};

// CPU seconds of a PostgreSQL server: its postmaster and the children alive now (the
// controller's connection is one of them, for the whole run).
double ServerCpuSeconds(pid_t postmaster) {
  double total = CpuSeconds(postmaster);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state, ppid;
    rest >> state >> ppid;
    if (ppid == std::to_string(postmaster)) total += CpuSeconds(std::stoi(pid));
  }
  return total;
}

struct PlacementRun {
  double per_s = 0, seconds = 0, controller_cpu_s = 0, server_cpu_s = 0;
  bool complete = true;  // every job was placed within the wait
};

// A stream of 1-GPU jobs, one per GPU of the fleet, each placement counted once committed.
PlacementRun PlaceSingles(Bench& b, long singles, pid_t server) {
  PlacementRun run;
  const double placed0 = b.Metric("hangar_placements_total");
  const double cpu0 = CpuSeconds(b.controller_pid()),
               server0 = server > 0 ? ServerCpuSeconds(server) : 0;
  const int64_t ts = hangar::MonotonicNanos();
  b.SubmitArray("name: one\ntasks:\n  - {gpus: 1, command: [sleep, \"20\"]}\n", singles);
  WaitFor([&] { return b.Metric("hangar_placements_total") - placed0 >= singles; }, 300 * kSecond,
          20);
  run.seconds = (hangar::MonotonicNanos() - ts) / 1e9;
  const double placed = std::max(0.0, b.Metric("hangar_placements_total") - placed0);
  run.complete = placed >= singles;
  if (!run.complete) {
    // A controller that stopped (its log says why) is not a slow one: no rate is made of it.
    std::fprintf(
        stderr,
        "only %.0f of %ld jobs were placed within 300 s (the controller %s); see its log in %s\n",
        placed, singles, kill(b.controller_pid(), 0) == 0 ? "still runs" : "has exited",
        b.dir().c_str());
  }
  run.per_s = std::min<double>(placed, singles) / run.seconds;
  run.controller_cpu_s = CpuSeconds(b.controller_pid()) - cpu0;
  run.server_cpu_s = server > 0 ? ServerCpuSeconds(server) - server0 : 0;
  return run;
}

// --store: the placement step on SQLite, then on PostgreSQL, then each store alone.
int CompareStores(int nodes, std::string url, int rounds, bool json, const std::string& dir,
                  nlohmann::json& out) {
  std::unique_ptr<hangar::controller::testing::PostgresServer> server;
  if (url == "postgres" || url == "postgresql") {
    auto started = hangar::controller::testing::PostgresServer::Start({.fsync = true});
    if (!started.ok()) return std::fprintf(stderr, "%s\n", started.status().ToString().c_str()), 1;
    server = std::move(started).value();
    for (const char* db : {"fleet", "rates"}) {
      if (Status s = server->CreateDatabase(db); !s.ok())
        return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
    }
    url = server->Url("fleet");
  } else {
    auto given = hangar::controller::OpenStore(url);
    auto contents = given.ok() ? (*given)->Load() : given.status();
    if (!contents.ok())
      return std::fprintf(stderr, "%s\n", contents.status().ToString().c_str()), 1;
    if (!contents->jobs.empty() || !contents->nodes.empty()) {
      return std::fprintf(
                 stderr,
                 "the database of %s holds a cluster already; give the bench an empty one\n",
                 hangar::controller::ShownStoreUrl(url).c_str()),
             2;
    }
  }
  out["postgres"] = hangar::controller::ShownStoreUrl(url);
  // Rounds alternate the order (SQLite first, then PostgreSQL first, ...) so that a machine whose
  // load drifts does not favour one store; each run has a store of its own, empty.
  if (!server) rounds = 1;
  const long singles = static_cast<long>(nodes) * 8;
  std::map<std::string, std::vector<PlacementRun>> runs;
  for (int r = 0; r < rounds; ++r) {
    const std::vector<std::string> order = r % 2 == 0
                                               ? std::vector<std::string>{"sqlite", "postgres"}
                                               : std::vector<std::string>{"postgres", "sqlite"};
    for (const std::string& store : order) {
      const std::string name = store + std::to_string(r);
      std::string store_url;
      if (store == "postgres") {
        store_url = url;
        if (server && r > 0) {
          if (Status s = server->CreateDatabase(name); !s.ok())
            return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
          store_url = server->Url(name);
        }
      }
      Bench b(nodes, dir);
      b.StartController(name, nodes, store_url);
      if (!b.StartSwarm(name))
        return std::fprintf(stderr, "the swarm did not register; see %s\n", dir.c_str()), 1;
      std::this_thread::sleep_for(std::chrono::seconds(3));
      const PlacementRun run =
          PlaceSingles(b, singles, store == "postgres" && server ? server->pid() : -1);
      if (!run.complete) return 1;
      runs[store].push_back(run);
      if (!json) {
        std::printf(
            "%s: %ld 1-GPU jobs placed in %.2f s: %.0f committed placements/s (controller %.1f CPU "
            "s%s)\n",
            store.c_str(), singles, run.seconds, run.per_s, run.controller_cpu_s,
            store == "postgres" && server
                ? (", server " + std::to_string(run.server_cpu_s) + " CPU s").c_str()
                : "");
      }
    }
  }
  for (const auto& [store, list] : runs) {
    double per_s = 0, cpu = 0, server_cpu = 0;
    for (const auto& run : list) {
      out["placements_per_s_" + store + "_runs"].push_back(run.per_s);
      per_s += run.per_s / list.size();
      cpu += run.controller_cpu_s / list.size();
      server_cpu += run.server_cpu_s / list.size();
    }
    out["placements_per_s_" + store] = per_s;  // the mean over the rounds
    out["controller_cpu_s_" + store] = cpu;
    if (store == "postgres" && server) out["postgres_server_cpu_s"] = server_cpu;
  }
  out["rounds"] = rounds;
  out["postgres_vs_sqlite"] =
      out["placements_per_s_postgres"].get<double>() / out["placements_per_s_sqlite"].get<double>();
  const std::string rates_pg = server ? server->Url("rates") : "";
  for (const auto& [store, store_url] :
       {std::pair<std::string, std::string>{"sqlite", "sqlite://" + dir + "/rates.db"},
        {"postgres", rates_pg}}) {
    if (store_url.empty())
      continue;  // a URL of the operator's: one database, used by the controller
    auto rates = hangar::bench::MeasureStoreRates(store_url);
    if (!rates.ok()) return std::fprintf(stderr, "%s\n", rates.status().ToString().c_str()), 1;
    out["one_row_commits_per_s_" + store] = rates->one_row_commits_per_s;
    out["batch_1000_commit_ms_" + store] = rates->batch_1000_ms;
    if (!json) {
      std::printf("%s alone: %.0f one-row commits/s; %.2f ms to commit 1,000 job rows\n",
                  store.c_str(), rates->one_row_commits_per_s, rates->batch_1000_ms);
    }
  }
  return 0;
}

// --compare-tls: the same fleet over plaintext and over mutual TLS, one connection per agent in
// both (as real agents have), so that the difference is what TLS costs.
struct TransportRun {
  double register_s = 0, register_cpu_s = 0, heartbeats_per_s = 0, cpu_s_per_10k_heartbeats = 0,
         rss_mib = 0;
  PlacementRun place;
};

bool MeasureTransport(int nodes, const std::string& dir, bool tls, int round, TransportRun* run) {
  const std::string name = (tls ? "tls" : "plain") + std::to_string(round);
  Bench b(nodes, dir);
  // A heartbeat timeout of 30 s: while 10,240 agents register at once, this one machine does both
  // ends of every TLS handshake, and the swarm's heartbeats fall seconds behind (on separate
  // machines they would not); with 2.5 s most nodes were marked lost mid-registration.
  b.StartController(name, nodes, "", tls, "30s");
  const double cpu_r0 = CpuSeconds(b.controller_pid());
  const int64_t t_reg = hangar::MonotonicNanos();
  if (!b.StartSwarm(name, 0)) return false;
  run->register_s = (hangar::MonotonicNanos() - t_reg) / 1e9;
  run->register_cpu_s = CpuSeconds(b.controller_pid()) - cpu_r0;
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double hb0 = b.Metric("hangar_agent_heartbeats_total"),
               cpu0 = CpuSeconds(b.controller_pid());
  const int64_t t0 = hangar::MonotonicNanos();
  std::this_thread::sleep_for(std::chrono::seconds(10));
  const double hb1 = b.Metric("hangar_agent_heartbeats_total"),
               cpu1 = CpuSeconds(b.controller_pid());
  run->heartbeats_per_s = (hb1 - hb0) / ((hangar::MonotonicNanos() - t0) / 1e9);
  run->cpu_s_per_10k_heartbeats = (cpu1 - cpu0) / (hb1 - hb0) * 10000;
  run->rss_mib = RssBytes(b.controller_pid()) / 1048576;
  run->place = PlaceSingles(b, static_cast<long>(nodes) * 8, -1);
  return run->place.complete;
}

int CompareTls(int nodes, int rounds, bool json, const std::string& dir, nlohmann::json& out) {
  std::map<std::string, std::vector<TransportRun>> runs;
  for (int r = 0; r < rounds; ++r) {
    for (bool tls : r % 2 == 0 ? std::vector<bool>{false, true} : std::vector<bool>{true, false}) {
      TransportRun run;
      if (!MeasureTransport(nodes, dir, tls, r, &run)) {
        return std::fprintf(
                   stderr, "the swarm did not register, or not every job was placed (%s); see %s\n",
                   tls ? "TLS" : "plaintext", dir.c_str()),
               1;
      }
      const std::string key = tls ? "tls" : "plaintext";
      runs[key].push_back(run);
      if (!json) {
        std::printf(
            "%-9s %d agents registered in %.2f s (controller %.2f CPU s); %.0f heartbeats/s at "
            "%.3f CPU s per "
            "10,000; RSS %.0f MiB; %ld 1-GPU jobs placed in %.2f s: %.0f committed placements/s "
            "(controller "
            "%.1f CPU s)\n",
            key.c_str(), nodes, run.register_s, run.register_cpu_s, run.heartbeats_per_s,
            run.cpu_s_per_10k_heartbeats, run.rss_mib, static_cast<long>(nodes) * 8,
            run.place.seconds, run.place.per_s, run.place.controller_cpu_s);
        std::fflush(stdout);
      }
    }
  }
  for (const auto& [key, list] : runs) {
    nlohmann::json m = {{"register_s", 0.0},
                        {"register_controller_cpu_s", 0.0},
                        {"heartbeats_per_s", 0.0},
                        {"cpu_s_per_10k_heartbeats", 0.0},
                        {"controller_rss_mib", 0.0},
                        {"placements_per_s", 0.0},
                        {"placement_controller_cpu_s", 0.0}};
    for (const auto& run : list) {
      const double k = 1.0 / list.size();
      m["register_s"] = m["register_s"].get<double>() + k * run.register_s;
      m["register_controller_cpu_s"] =
          m["register_controller_cpu_s"].get<double>() + k * run.register_cpu_s;
      m["heartbeats_per_s"] = m["heartbeats_per_s"].get<double>() + k * run.heartbeats_per_s;
      m["cpu_s_per_10k_heartbeats"] =
          m["cpu_s_per_10k_heartbeats"].get<double>() + k * run.cpu_s_per_10k_heartbeats;
      m["controller_rss_mib"] = m["controller_rss_mib"].get<double>() + k * run.rss_mib;
      m["placements_per_s"] = m["placements_per_s"].get<double>() + k * run.place.per_s;
      m["placement_controller_cpu_s"] =
          m["placement_controller_cpu_s"].get<double>() + k * run.place.controller_cpu_s;
      m["placements_per_s_runs"].push_back(run.place.per_s);
    }
    out[key] = m;
  }
  const auto &p = out["plaintext"], &t = out["tls"];
  out["rounds"] = rounds;
  out["connections"] = "one per agent";
  out["tls_cost"] = {{"placements_per_s_ratio",
                      t["placements_per_s"].get<double>() / p["placements_per_s"].get<double>()},
                     {"heartbeat_cpu_ratio", t["cpu_s_per_10k_heartbeats"].get<double>() /
                                                 p["cpu_s_per_10k_heartbeats"].get<double>()},
                     {"register_cpu_ms_per_agent", (t["register_controller_cpu_s"].get<double>() -
                                                    p["register_controller_cpu_s"].get<double>()) *
                                                       1000 / nodes},
                     {"rss_added_mib", t["controller_rss_mib"].get<double>() -
                                           p["controller_rss_mib"].get<double>()}};
  if (!json) {
    const auto& c = out["tls_cost"];
    std::printf(
        "TLS cost (mean of %d round(s)): %.2fx the placement rate; %.2fx the controller CPU per "
        "heartbeat; "
        "%+.3f ms of controller CPU per agent to register (the handshakes); %+.0f MiB RSS\n",
        rounds, c["placements_per_s_ratio"].get<double>(), c["heartbeat_cpu_ratio"].get<double>(),
        c["register_cpu_ms_per_agent"].get<double>(), c["rss_added_mib"].get<double>());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 10240;
  bool json = false, million = true, compare_tls = false;
  std::string store;
  int rounds = 1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--nodes") && i + 1 < argc)
      nodes = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--store") && i + 1 < argc)
      store = argv[++i];
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--json"))
      json = true;
    else if (!std::strcmp(argv[i], "--no-million"))
      million = false;
    else if (!std::strcmp(argv[i], "--compare-tls"))
      compare_tls = true;
    else if (!std::strcmp(argv[i], "--hangar") && i + 1 < argc)
      binary = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: fleet_scale [--hangar PATH] [--nodes N] [--json] [--no-million] "
                   "[--store postgres[://URL] [--rounds N]]\n"
                   "       fleet_scale --compare-tls [--nodes N] [--rounds N] [--json]\n");
      return 2;
    }
  }
  char tmpl[] = "/tmp/hangar-fleet-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  nlohmann::json out = {{"nodes", nodes}, {"gpus", nodes * 8}};
  auto say = [&](const char* fmt, auto... a) {
    if (!json) {
      std::printf(fmt, a...);
      std::fflush(stdout);
    }
  };

  if (compare_tls) {
    const int rc = CompareTls(nodes, rounds, json, dir, out);
    if (rc == 0 && !std::getenv("HANGAR_KEEP_BENCH_DIR")) fs::remove_all(dir);
    if (rc == 0 && json) std::printf("%s\n", out.dump(2).c_str());
    return rc;
  }
  if (!store.empty()) {
    if (store.rfind("postgres", 0) != 0)
      return std::fprintf(stderr, "--store takes postgres or a postgres:// URL\n"), 2;
    const int rc = CompareStores(nodes, store, rounds, json, dir, out);
    if (rc == 0 && !std::getenv("HANGAR_KEEP_BENCH_DIR")) fs::remove_all(dir);
    if (rc == 0 && json) std::printf("%s\n", out.dump(2).c_str());
    return rc;
  }

  // Baseline: a controller for a one-node cluster with its one agent.
  double rss_small = 0;
  {
    Bench small(32, dir);
    small.StartController("small", 32);
    if (!small.StartSwarm("small"))
      return std::fprintf(stderr, "baseline swarm did not register\n"), 1;
    std::this_thread::sleep_for(std::chrono::seconds(3));
    rss_small = RssBytes(small.controller_pid());
  }
  Bench b(nodes, dir);
  b.StartController("fleet", nodes);
  const int64_t t_reg = hangar::MonotonicNanos();
  if (!b.StartSwarm("fleet"))
    return std::fprintf(stderr, "the swarm did not register; see %s\n", dir.c_str()), 1;
  say("%d agents registered in %.1f s\n", nodes, (hangar::MonotonicNanos() - t_reg) / 1e9);

  // 1. Heartbeats: steady state over 15 s.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double hb0 = b.Metric("hangar_agent_heartbeats_total"),
               cpu0 = CpuSeconds(b.controller_pid());
  const int64_t t0 = hangar::MonotonicNanos();
  std::this_thread::sleep_for(std::chrono::seconds(15));
  const double hb1 = b.Metric("hangar_agent_heartbeats_total"),
               cpu1 = CpuSeconds(b.controller_pid());
  const double secs = (hangar::MonotonicNanos() - t0) / 1e9;
  out["heartbeats_per_s"] = (hb1 - hb0) / secs;
  out["controller_cpu_pct_heartbeats"] = 100 * (cpu1 - cpu0) / secs;
  out["cpu_s_per_10k_heartbeats"] = (cpu1 - cpu0) / (hb1 - hb0) * 10000;
  say("heartbeats: %.0f/s ingested, controller at %.1f%% of one core (%.3f CPU s per 10,000)\n",
      out["heartbeats_per_s"].get<double>(), out["controller_cpu_pct_heartbeats"].get<double>(),
      out["cpu_s_per_10k_heartbeats"].get<double>());

  // 2. Memory per node.
  const double rss_fleet = RssBytes(b.controller_pid());
  out["controller_rss_mib"] = rss_fleet / 1048576;
  out["bytes_per_node"] = (rss_fleet - rss_small) / (nodes - 32);
  say("memory: controller RSS %.0f MiB, %.0f bytes per node (baseline: a 32-node controller, %.0f "
      "MiB)\n",
      rss_fleet / 1048576, out["bytes_per_node"].get<double>(), rss_small / 1048576);

  // 3. Placements: 1-GPU jobs, then 2-node x 8-GPU gangs, each committed before it is reported.
  const long singles = static_cast<long>(nodes) * 8;
  const PlacementRun place = PlaceSingles(b, singles, -1);
  if (!place.complete) return 1;
  out["placements_per_s"] = place.per_s;
  say("placements: %ld 1-GPU jobs submitted and placed in %.2f s: %.0f committed placements/s\n",
      singles, place.seconds, out["placements_per_s"].get<double>());
  WaitFor([&] { return b.Metric("hangar_gpus", "{state=\"allocated\"}") == 0; }, 120 * kSecond,
          200);
  const double placed1 = b.Metric("hangar_placements_total");
  const long gangs = nodes / 2;
  const int64_t tg = hangar::MonotonicNanos();
  b.SubmitArray("name: gang\ntasks:\n  - {replicas: 2, gpus: 8, command: [sleep, \"3600\"]}\n",
                gangs);
  if (!WaitFor([&] { return b.Metric("hangar_placements_total") - placed1 >= gangs; },
               300 * kSecond, 20)) {
    return std::fprintf(stderr,
                        "not every gang was placed within 300 s; see the controller's log in %s\n",
                        dir.c_str()),
           1;
  }
  const double gang_s = (hangar::MonotonicNanos() - tg) / 1e9;
  out["gang_placements_per_s"] = gangs / gang_s;
  say("placements: %ld 2-node x 8-GPU gangs in %.2f s: %.0f committed gang placements/s\n", gangs,
      gang_s, out["gang_placements_per_s"].get<double>());

  // 4. Failure detection: 1% of the agents go silent; when was each marked lost (its gang
  //    requeued in the same commit), counted from its last heartbeat?
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double lost_before = b.Metric("hangar_nodes_lost_total");  // live nodes marked lost so far
  out["live_nodes_lost_under_load"] = lost_before;
  say("live nodes marked lost during the placement bursts: %.0f\n", lost_before);
  std::ofstream(dir + "/silence") << "now\n";
  WaitFor(
      [&] {
        return fs::exists(dir + "/swarm.json") &&
               nlohmann::json::parse(std::ifstream(dir + "/swarm.json"), nullptr, false)
                       .value("silenced", 0) > 0;
      },
      10 * kSecond);
  auto sw = nlohmann::json::parse(std::ifstream(dir + "/swarm.json"));
  std::set<std::string> silent_nodes;
  for (const auto& n : sw["silent_nodes"]) silent_nodes.insert(n.get<std::string>());
  std::map<std::string, hangar::Time> last_beat;
  for (const auto& [node, t] : sw["silent_last_heartbeat_ms"].items())
    last_beat["node/" + node] = t.get<hangar::Time>();
  std::vector<double> detect_each;  // per silent node: marked lost, minus its last heartbeat
  hangar::Time last_lost = 0;
  size_t lost = 0, live_lost = 0;
  WaitFor(
      [&] {
        httplib::Client c = b.Client();
        auto r = c.Get("/v1/events?subject=node/&limit=10000");
        if (!r) return false;
        lost = 0;
        live_lost = 0;
        detect_each.clear();
        const auto events = nlohmann::json::parse(r->body);
        for (const auto& e : events["events"]) {
          const std::string subject = e["subject"], message = e["message"];
          if (message.rfind("lost:", 0) == 0 && silent_nodes.count(subject.substr(5))) {
            ++lost;
            last_lost = std::max<hangar::Time>(last_lost, e["time_ms"]);
            if (last_beat.count(subject))
              detect_each.push_back((e["time_ms"].get<hangar::Time>() - last_beat[subject]) /
                                    1000.0);
          } else if (message.rfind("lost:", 0) == 0) {
            ++live_lost;  // a node that kept beating, marked lost
          }
        }
        return lost >= silent_nodes.size();
      },
      60 * kSecond, 200);
  if (lost < silent_nodes.size()) {
    std::fprintf(stderr, "only %zu of %zu silent nodes were marked lost within 60 s; see %s\n",
                 lost, silent_nodes.size(), dir.c_str());
  }
  // The slowest detection, each node counted from its own last heartbeat; and the median.
  std::sort(detect_each.begin(), detect_each.end());
  const double detect = detect_each.empty() ? -1 : detect_each.back();
  out["lost_detect_s"] = detect;
  out["lost_detect_p50_s"] = detect_each.empty() ? -1 : detect_each[detect_each.size() / 2];
  out["lost_detect_from_silencing_s"] = (last_lost - sw["silenced_at_ms"].get<int64_t>()) / 1000.0;
  out["silent_nodes"] = silent_nodes.size();
  out["silent_nodes_lost"] = lost;
  out["live_nodes_lost"] = live_lost;
  say("failure detection: %zu of %zu silent nodes marked lost (their gangs requeued), each counted "
      "from its own last heartbeat: median %.2f s, slowest %.2f s; %zu live nodes marked lost\n",
      lost, silent_nodes.size(), out["lost_detect_p50_s"].get<double>(), detect, live_lost);

  // 5. Memory per queued job (the cluster is full of gangs: these wait).
  const double rss_q0 = RssBytes(b.controller_pid());
  std::vector<long> sizes = {100000};
  if (million) sizes.push_back(1000000);
  long queued = 0;
  for (long target : sizes) {
    while (queued < target) {
      const long chunk = std::min<long>(100000, target - queued);
      b.SubmitArray("name: waiter\ntasks:\n  - {gpus: 8, command: [sleep, \"60\"]}\n", chunk);
      queued += chunk;
    }
    std::this_thread::sleep_for(std::chrono::seconds(3));
    const double per_job = (RssBytes(b.controller_pid()) - rss_q0) / queued;
    out["bytes_per_queued_job_" + std::to_string(target)] = per_job;
    out["bytes_per_queued_job"] = per_job;
    say("memory: %ld jobs queued, %.0f bytes per queued job\n", queued, per_job);
  }
  b.swarm().Stop();
  b.controller().Stop();
  if (!std::getenv("HANGAR_KEEP_BENCH_DIR")) fs::remove_all(dir);
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
