#include "controller/controller_command.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cluster/cluster_yaml.h"
#include "cluster/preflight_yaml.h"
#include "cluster/spares_yaml.h"
#include "common/dev_token.h"
#include "common/tls_files.h"
#include "controller/agent_hub.h"
#include "controller/agent_listener.h"
#include "controller/http_api.h"
#include "controller/leadership.h"
#include "controller/metrics.h"
#include "controller/service/service_controller.h"
#include "controller/session_server.h"
#include "controller/standby.h"
#include "controller/state_owner.h"
#include "controller/step_relay.h"
#include "controller/store/store_disk.h"
#include "controller/warm_standby.h"

namespace hangar::controller {
namespace {

struct Flags {
  std::string api = "127.0.0.1:8080";
  std::string agents = "127.0.0.1:8081";
  std::string sessions =
      "auto";  // interactive sessions' gRPC port: auto (the API's host, any port), off, HOST:PORT
  std::string store = "sqlite://./hangar-state/state.db";
  bool store_new = false;  // begin again over a damaged or emptied store (store_integrity.h)
  std::string cluster;
  std::string heartbeat_timeout = "3s";
  std::string reconnect_grace = "auto";
  std::string heartbeat_interval = "1s";
  std::string node_lease = "10s";
  // The agent channel against floods: connections held at once ("auto": what the descriptor limit
  // leaves after the API's), and how long a connection may take to say HTTP/2 hello.
  std::string agent_max_connections = "auto";
  std::string agent_handshake_timeout = "10s";
  std::vector<std::string> queues = {"default"};
  std::string placement = "hangar";
  std::string queue_policy = "priority";
  std::string preemption = "priority";
  std::string min_run = "0s";
  std::string share_half_life = "30m";
  std::string auth = "tokens";
  std::string stop_grace = "10s";
  std::string admin_token_file;
  std::vector<std::string>
      api_hosts;  // Host names the API answers to (request_guard.h); empty: any
  std::string secrets_key;
  std::string checkpoint_root = "/tmp/hangar/checkpoints";
  std::string port_file;
  // TLS: HTTPS on the API and mutual TLS on the agent channel, or --insecure.
  std::string tls_dir;
  TlsFiles tls;
  bool insecure = false;
  std::string metrics_labels = "clean";
  bool gittins_by_predecessor = true;
  // Limits against hostile clients: the REST API's connections, and what one user
  // may have queued.
  int http_max_connections = HttpLimits{}.max_connections;
  int http_max_connections_per_client = HttpLimits{}.max_connections_per_client;
  int http_max_workers = HttpLimits{}.max_workers;
  int http_max_streams = StreamLimits{}.max_streams;
  int http_max_streams_per_client = StreamLimits{}.max_streams_per_client;
  std::string http_header_timeout = "10s";
  std::string http_idle_timeout = "10s";
  std::string http_body_timeout = "60s";
  long max_queued_per_user = ControllerOptions{}.max_queued_per_user;
  std::string max_spec_bytes_per_user = "1Gi";  // SpecBook::kDefaultMaxBytesPerUser
  std::string keep_finished = "30d";
  // Leader election on a PostgreSQL store.
  std::string name;       // default: HOSTNAME:API_PORT
  std::string advertise;  // the API URL clients are sent to; default: the bound --api address
  std::string lease = "1500ms";
  std::string lease_renew = "300ms";
  std::string lease_poll = "100ms";
  std::string standby_follow = "250ms";  // how often a standby catches up with the store; 0: cold
  // The cluster's history for the dashboard's charts (history.h).
  std::string history_interval = "60s", history_samples = "48h", history_hourly = "30d";
  // Services (docs/services.md): HAProxy's runtime API and endpoints, and the replicas' ports.
  std::string service_lb;
  std::string service_ports = "24000-28999";
  bool service_ports_local = false;
};

// The REST API's connection limits from the flags.
StatusOr<HttpLimits> ApiLimits(const Flags& f) {
  HttpLimits l;
  if (f.http_max_connections < 1 || f.http_max_connections_per_client < 1) {
    return Status::InvalidArgument(
        "--http-max-connections and --http-max-connections-per-client must be at least 1");
  }
  l.max_connections = f.http_max_connections;
  l.max_connections_per_client = f.http_max_connections_per_client;
  if (f.http_max_workers < 1 || f.http_max_streams < 1 || f.http_max_streams_per_client < 1) {
    return Status::InvalidArgument(
        "--http-max-workers, --http-max-streams and --http-max-streams-per-client must be "
        "at least 1");
  }
  l.max_workers = f.http_max_workers;
  l.streams.max_streams = f.http_max_streams;
  l.streams.max_streams_per_client = f.http_max_streams_per_client;
  const std::pair<const std::string*, Duration*> timeouts[] = {
      {&f.http_header_timeout, &l.header_timeout},
      {&f.http_idle_timeout, &l.idle_timeout},
      {&f.http_body_timeout, &l.body_timeout}};
  for (const auto& [text, out] : timeouts) {
    auto d = ParseDuration(*text);
    if (!d.ok() || *d <= 0) {
      return Status::InvalidArgument(
          "--http-header-timeout, --http-idle-timeout and --http-body-timeout take a "
          "duration such as 10s or 500ms, not '" +
          *text + "'");
    }
    *out = *d;
  }
  return l;
}

// The TLS material, or nothing with --insecure; a controller with neither refuses to start.
StatusOr<TlsFiles> ControllerTls(const Flags& f) {
  HANGAR_ASSIGN_OR_RETURN(TlsFiles tls, ResolveTls(f.tls_dir, "controller", f.tls));
  if (!tls.empty() && f.insecure)
    return Status::InvalidArgument("--insecure and TLS files together: choose one");
  if (tls.empty() && !f.insecure) {
    return Status::InvalidArgument(
        "the controller serves TLS: give it --tls-dir DIR (made with `hangar certs init --dir DIR` "
        "and `hangar certs "
        "issue --controller --dir DIR`), or --insecure for plaintext on a trusted network (hangar "
        "dev does, on loopback)");
  }
  return tls;
}

std::atomic<bool> g_stop{false};

using HostPort = std::pair<std::string, int>;

// The key that seals job environments in the store (secret_sealer.h): --secrets-key, else for
// SQLite STORE.key beside the database (made on the first start). A PostgreSQL store is shared
// by several controllers, which must use one key: it is never made for them.
StatusOr<std::shared_ptr<const SecretSealer>> OpenSecretsKey(const Flags& f) {
  const bool sqlite = f.store.rfind("sqlite://", 0) == 0;
  if (f.secrets_key.empty() && !sqlite) {
    if (f.store.rfind("memory://", 0) != 0) {
      spdlog::warn(
          "controller: job environments are stored as given (not sealed): give every controller of "
          "this "
          "store the same --secrets-key FILE (docs/operations.md)");
    }
    return std::shared_ptr<const SecretSealer>();
  }
  const std::string path = f.secrets_key.empty() ? f.store.substr(9) + ".key" : f.secrets_key;
  HANGAR_ASSIGN_OR_RETURN(auto sealer,
                          SecretSealer::FromKeyFile(path, /*create=*/f.secrets_key.empty()));
  spdlog::info("controller: job environments are sealed in the store with the secrets key {} ({})",
               sealer->key_id(), path);
  return sealer;
}

bool IsPostgresUrl(const std::string& url) {
  return url.rfind("postgres://", 0) == 0 || url.rfind("postgresql://", 0) == 0;
}

// The agent channel's credentials: mutual TLS (an agent shows a certificate from the cluster CA,
// whose name is its node), or plaintext.
StatusOr<std::shared_ptr<grpc::ServerCredentials>> AgentCredentials(const TlsFiles& tls) {
  if (tls.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  HANGAR_ASSIGN_OR_RETURN(o.pem_root_certs, ReadPem(tls.ca));
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  HANGAR_ASSIGN_OR_RETURN(pair.private_key, ReadPem(tls.key));
  HANGAR_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(tls.cert));
  o.pem_key_cert_pairs.push_back(pair);
  return grpc::SslServerCredentials(o);
}

void WritePortFile(const std::string& path, int api, int agents, const char* role) {
  if (path.empty()) return;
  std::ofstream(path + ".tmp") << nlohmann::json{{"api", api},
                                                 {"agents", agents},
                                                 {"pid", ::getpid()},
                                                 {"role", role}}
                                      .dump()
                               << "\n";
  std::rename((path + ".tmp").c_str(), path.c_str());
}

StatusOr<LeaseOptions> LeaseFlags(const Flags& f) {
  LeaseOptions o;
  o.url = f.store;
  HANGAR_ASSIGN_OR_RETURN(o.ttl, ParseDuration(f.lease));
  HANGAR_ASSIGN_OR_RETURN(o.renew_every, ParseDuration(f.lease_renew));
  HANGAR_ASSIGN_OR_RETURN(o.poll_every, ParseDuration(f.lease_poll));
  return o;
}

// A controller on a PostgreSQL store stands by until it takes the lease: its servers
// answer on the API and agent ports (a standby points to the leader, never acts), and are closed
// when it leads; `api` and `agents` get the ports bound, for the leader's servers. Returns the
// lease, renewing.
StatusOr<std::unique_ptr<LeaseKeeper>> StandBy(const Flags& f, const TlsFiles& tls,
                                               const HttpLimits& limits, HostPort* api,
                                               HostPort* agents, const WarmStandby& warm) {
  HANGAR_ASSIGN_OR_RETURN(LeaseOptions o, LeaseFlags(f));
  HANGAR_ASSIGN_OR_RETURN(auto creds, AgentCredentials(tls));
  char host[256] = "controller";
  ::gethostname(host, sizeof(host) - 1);
  StandbyServers standby(f.name.empty() ? std::string(host) : f.name, tls, limits);
  standby.SetFollowing([&warm] { return warm.Following(); });
  HANGAR_ASSIGN_OR_RETURN(const auto ports, standby.Start(*api, *agents, creds));
  api->second = ports.first;
  agents->second = ports.second;
  o.name = f.name.empty() ? std::string(host) + ":" + std::to_string(ports.first) : f.name;
  standby.SetName(o.name);
  o.api = !f.advertise.empty() ? f.advertise
                               : (tls.empty() ? "http://" : "https://") + api->first + ":" +
                                     std::to_string(api->second);
  HANGAR_RETURN_IF_ERROR(CheckLeaseOptions(o));
  if (warm.following()) o.ready = [&warm] { return warm.ready(); };
  spdlog::info("controller {}: standby (API {}, agents on port {}); waiting for the lease of {}",
               o.name, o.api, ports.second, ShownStoreUrl(f.store));
  auto keeper = std::make_unique<LeaseKeeper>(o);
  HANGAR_ASSIGN_OR_RETURN(
      const int64_t epoch,
      keeper->Acquire(g_stop, [&standby](const LeaderInfo& l) { standby.SetLeader(l); }));
  standby.Stop();
  keeper->StartRenewing();
  spdlog::info("controller {}: leads at epoch {} (lease {} ms, renewed every {} ms)", o.name, epoch,
               o.ttl, o.renew_every);
  return keeper;
}

// What a controller leads with: its store, the store's rows restored into `state`, and on
// PostgreSQL the lease, taken after standing by with a warm copy of the store (warm_standby.h).
// `single` is a single-owner store, already open. A standby stopped before it led returns no store.
struct Leading {
  std::unique_ptr<LeaseKeeper> lease;
  std::unique_ptr<StateStore> store;
  StoreContents contents;
  std::string store_id;
};

StatusOr<Leading> TakeCharge(const Flags& f, const TlsFiles& tls, const HttpLimits& limits,
                             HostPort* api, HostPort* agents, std::unique_ptr<StateStore> single,
                             ClusterState* state, Clock* clock) {
  Leading l;
  int64_t load_ns = 0;
  std::string how = "loaded whole";
  if (IsPostgresUrl(f.store)) {
    HANGAR_ASSIGN_OR_RETURN(const Duration follow, ParseDuration(f.standby_follow));
    WarmStandby warm(f.store, follow, state, f.name.empty() ? "controller" : f.name);
    auto standby = StandBy(f, tls, limits, api, agents, warm);
    if (!standby.ok() && g_stop) {
      spdlog::info("controller: stopping (a standby)");
      return l;
    }
    HANGAR_ASSIGN_OR_RETURN(l.lease, std::move(standby));
    load_ns = MonotonicNanos();
    HANGAR_ASSIGN_OR_RETURN(WarmStandby::Handover h, warm.Take());
    if (h.warm)
      how =
          "a standby's copy, " + std::to_string(h.rows_at_takeover) + " job rows read at takeover";
    l.store = std::move(h.store);
    l.contents = std::move(h.contents);
    HANGAR_RETURN_IF_ERROR(l.store->AdoptLease(l.lease->Me().epoch));
  } else {
    l.store = std::move(single);
    load_ns = MonotonicNanos();
    HANGAR_ASSIGN_OR_RETURN(l.contents, l.store->Load());
  }
  const int64_t rebuild_ns = MonotonicNanos();
  HANGAR_RETURN_IF_ERROR(state->Restore(l.contents, clock->Now()));
  const double restore_ms = (MonotonicNanos() - load_ns) / 1e6;
  how += ", " + std::to_string((MonotonicNanos() - rebuild_ns) / 1'000'000) +
         " ms of it rebuilding the state";
  HANGAR_RETURN_IF_ERROR(
      AwaitRoomToCommit(*l.store, clock->Now(), g_stop, 10 * kSecond, [](const Status& s) {
        spdlog::error(
            "{}; the controller waits for room before it serves (trying again every 10 s)",
            s.message());
      }));
  HANGAR_ASSIGN_OR_RETURN(l.store_id, EnsureStoreId(*l.store, l.contents));
  spdlog::info(
      "restored {} jobs from {} (store {}) in {:.0f} ms ({}); nodes have {} to reconnect before "
      "their work "
      "is requeued",
      l.contents.jobs.size(), l.store->Describe(), l.store_id, restore_ms, how,
      FormatDuration(state->ReconnectGrace()));
  return l;
}

StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& s, const char* what) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos)
    return Status::InvalidArgument(std::string(what) + " '" + s +
                                   "' must be host:port, e.g. 127.0.0.1:8080");
  try {
    return std::make_pair(s.substr(0, colon), std::stoi(s.substr(colon + 1)));
  } catch (...) {
    return Status::InvalidArgument(std::string(what) + " '" + s + "' has no valid port");
  }
}

// With networks.management in cluster.yaml, the controller listens there (or on
// loopback) only: never on every interface, which would put it on the data network too.
Status OnManagementNetwork(const std::string& network, std::string host, const char* flag) {
  if (network.empty()) return Status::Ok();
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string ip = AgentHub::CanonicalAddress(host == "localhost" ? "127.0.0.1" : host);
  if (ip.rfind("127.", 0) == 0 || ip == "::1") return Status::Ok();
  const std::string fix = std::string("; give ") + flag +
                          " an address of this host in networks.management " + network +
                          " (cluster.yaml), or a loopback one (docs/networks.md)";
  if (ip == "0.0.0.0" || ip == "::" || host.empty()) {
    return Status::InvalidArgument(std::string(flag) + " " + (host.empty() ? "*" : host) +
                                   " listens on every interface, the data network's too" + fix);
  }
  if (ip.empty())
    return Status::InvalidArgument(std::string(flag) + " " + host + " is not an IP address" + fix);
  if (!cluster::AddressInNetwork(ip, network)) {
    return Status::InvalidArgument(std::string(flag) + " " + host +
                                   " is outside the management network" + fix);
  }
  return Status::Ok();
}

// After a large purge, on the state thread (whose arena held the forgotten jobs): the freed heap
// goes back to the kernel. malloc_trim gives back the free pages inside every arena but not the
// free top of a thread's arena, which glibc keeps up to M_TOP_PAD (above): with no pad for a
// moment, freeing a block of this thread's lets its arena shrink its top; then the pad is kept
// again. The cost (a few ms) is paid once per large purge, not on the hot path.
void GiveBackHeap() {
  ::mallopt(M_TOP_PAD, 0);
  void* block = ::malloc(128 * 1024);  // under M_MMAP_THRESHOLD: from this thread's arena
  ::free(block);
  ::mallopt(M_TOP_PAD, 64 << 20);
  ::malloc_trim(0);
}

// The state machine's options from the flags and the cluster file.
StatusOr<ControllerOptions> OptionsFrom(const Flags& f, const cluster::ClusterFile& cluster_file) {
  ControllerOptions opt;
  if (f.max_queued_per_user < 1)
    return Status::InvalidArgument("--max-queued-per-user must be at least 1");
  opt.max_queued_per_user = f.max_queued_per_user;
  auto spec_bytes = job::ParseByteSize(f.max_spec_bytes_per_user);
  if (!spec_bytes.ok() || *spec_bytes < 1) {
    return Status::InvalidArgument("--max-spec-bytes-per-user must be a size such as 1Gi or 256Mi");
  }
  opt.max_spec_bytes_per_user = *spec_bytes;
  if (f.keep_finished != "forever") {
    auto keep = ParseDuration(f.keep_finished);
    if (!keep.ok() || *keep <= 0)
      return Status::InvalidArgument(
          "--keep-finished must be a duration such as 30d or 12h, or forever");
    opt.keep_finished = *keep;
  }
  opt.after_large_purge = GiveBackHeap;
  HANGAR_ASSIGN_OR_RETURN(opt.heartbeat_timeout, ParseDuration(f.heartbeat_timeout));
  if (f.reconnect_grace != "auto") {
    HANGAR_ASSIGN_OR_RETURN(opt.reconnect_grace, ParseDuration(f.reconnect_grace));
  }
  HANGAR_ASSIGN_OR_RETURN(opt.heartbeat_interval, ParseDuration(f.heartbeat_interval));
  HANGAR_ASSIGN_OR_RETURN(opt.node_lease, ParseDuration(f.node_lease));
  if (opt.node_lease != 0 && opt.node_lease < 2 * opt.heartbeat_interval) {
    return Status::InvalidArgument(
        "--node-lease " + f.node_lease + " is shorter than two heartbeats (--heartbeat-interval " +
        f.heartbeat_interval +
        "): every node would stop its tasks between two of them; give it "
        "at least 2 heartbeats (10s is the default), or 0 to fence no node");
  }
  opt.queues = f.queues;
  // Absolute: agents create it and tasks write there from their own working directories.
  opt.checkpoint_root = std::filesystem::absolute(f.checkpoint_root).lexically_normal().string();
  opt.baselines = cluster_file.baselines;                  // config drift (docs/health.md)
  opt.mounts_allowed = cluster_file.mounts_allowed;        // container tasks (docs/containers.md)
  opt.mig_fixed_layouts = cluster_file.mig_fixed_layouts;  // docs/mig.md
  opt.data = cluster_file.data;                            // artifacts (docs/data.md)
  opt.gpu_models = cluster_file.gpu_models;  // CPU and memory per GPU (docs/cluster-format.md)
  opt.gpu_types = cluster_file.gpu_types;    // Slurm's GPU type names (docs/cluster-format.md)
  // Hot spares (docs/goodput.md); LoadClusterFile checked the block already.
  HANGAR_ASSIGN_OR_RETURN(opt.spares, cluster::LoadSpares(f.cluster, *cluster_file.topology));
  HANGAR_ASSIGN_OR_RETURN(opt.preflight, cluster::LoadPreflight(f.cluster));  // the gang preflight
  HANGAR_ASSIGN_OR_RETURN(opt.share_half_life, ParseDuration(f.share_half_life));
  HANGAR_ASSIGN_OR_RETURN(opt.stop_grace, ParseDuration(f.stop_grace));
  opt.gittins_by_predecessor = f.gittins_by_predecessor;
  return opt;
}

// The scheduler's policies from the flags.
StatusOr<sched::SchedulerConfig> SchedulerConfigFrom(const Flags& f) {
  sched::SchedulerConfig sc;
  sc.placement_policy = f.placement;
  sc.queue_policy = f.queue_policy;
  // The simulator's oracles are told each job's true run time; a live cluster cannot be.
  if (f.queue_policy == "sjf-oracle" || f.queue_policy == "sjf_oracle") {
    return Status::InvalidArgument(
        "--queue-policy sjf-oracle needs every job's true run time, which only `hangar sim` knows; "
        "use sjf "
        "(shortest time_limit first), las or gittins (ranks learned from finished jobs)");
  }
  if (f.preemption == "none") {
    sc.preemption.mode = sched::PreemptionMode::kNone;
  } else if (f.preemption == "priority") {
    sc.preemption.mode = sched::PreemptionMode::kPriority;
  } else if (f.preemption == "quota-only") {
    sc.preemption.mode = sched::PreemptionMode::kNone;  // guarantees are still reclaimed
  } else if (f.preemption == "las") {
    sc.preemption.mode = sched::PreemptionMode::kLas;
  } else if (f.preemption == "gittins") {
    sc.preemption.mode = sched::PreemptionMode::kGittins;
    sc.preemption.gittins_margin =
        3.0;  // as `hangar sim replay --policy hangar` (docs/benchmarks.md)
  } else {
    return Status::InvalidArgument(
        "--preemption must be priority, las, gittins, quota-only or none");
  }
  sc.preemption.reclaim_quota = f.preemption != "none";
  HANGAR_ASSIGN_OR_RETURN(sc.preemption.min_run_before_preempt, ParseDuration(f.min_run));
  return sc;
}

// RBAC: with tokens, the first start makes an admin token and writes it (mode 0600) for the
// operator; every later token is made with `hangar token create`. None with --auth none.
StatusOr<std::unique_ptr<TokenBook>> OpenTokens(const Flags& f, const StoreContents& contents,
                                                StateStore* store, Clock* clock) {
  std::unique_ptr<TokenBook> tokens;
  if (f.auth == "tokens") {
    tokens = std::make_unique<TokenBook>();
    tokens->Load(contents.values);
    std::string token_file = f.admin_token_file;
    if (token_file.empty() && f.store.rfind("sqlite://", 0) == 0) {
      token_file =
          (std::filesystem::path(f.store.substr(9)).parent_path() / "admin.token").string();
    }
    if (tokens->size() == 0) {
      if (token_file.empty()) {
        return Status::InvalidArgument(
            "with --auth tokens the first start needs --admin-token-file PATH, where the "
            "controller writes the first admin token");
      }
      auto [record, secret] = TokenBook::Mint("admin", Role::kAdmin, "", clock->Now());
      StoreBatch b;
      b.values.push_back({"token", record.id, record.ToJson(true).dump(), false});
      HANGAR_RETURN_IF_ERROR(store->Commit(b));
      tokens->Put(record);
      const int fd = ::open(token_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0)
        return Status::Unavailable("cannot write " + token_file + ": " + std::strerror(errno));
      const std::string line = secret + "\n";
      const bool wrote = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
      ::close(fd);
      if (!wrote) return Status::Unavailable("cannot write " + token_file);
      spdlog::info("made the first admin token; it is in {} (export HANGAR_TOKEN=$(cat {}))",
                   token_file, token_file);
    }
  } else if (f.auth == "dev") {
    spdlog::info(
        "--auth dev: every call but the dashboard's files, /healthz and /metrics needs the token "
        "in {}, "
        "and only loopback names reach the API",
        f.admin_token_file);
  } else if (f.auth != "none") {
    return Status::InvalidArgument("--auth must be tokens, none or dev");
  } else {
    spdlog::warn(
        "--auth none: anyone who can reach the API is an admin; use --auth tokens beyond a laptop");
  }
  return tokens;
}

// What every API request passes before routing. `--auth dev` (what `hangar dev` runs): the one
// token in --admin-token-file, which `hangar dev` makes at each start, and loopback names only.
StatusOr<RequestGuardOptions> GuardOptions(const Flags& f, bool tls) {
  RequestGuardOptions g;
  g.hosts = f.api_hosts;
  g.tls = tls;
  if (f.auth != "dev") return g;
  if (f.admin_token_file.empty()) {
    return Status::InvalidArgument(
        "--auth dev needs --admin-token-file PATH, the file of the one token it takes "
        "(`hangar dev` writes one at each start)");
  }
  HANGAR_ASSIGN_OR_RETURN(g.dev_token, dev_token::ReadPrivateFile(f.admin_token_file));
  if (g.dev_token.size() < 32) {
    return Status::InvalidArgument(f.admin_token_file +
                                   " holds no token of 32 characters or more; `hangar dev` "
                                   "writes one at each start");
  }
  g.dev_token_file = f.admin_token_file;
  g.loopback_hosts = true;
  return g;
}

// Process-wide settings for a long-lived server: the allocator's thresholds and open files.
void TuneProcessForServing() {
  // Buffers of 256 KiB and more (request bodies up to 1 MiB, /metrics text, listings) are mapped
  // and unmapped whole. glibc's default raises this threshold after the first such free, and from
  // then on keeps them in its per-thread arenas: with many API threads, hostile 1 MiB bodies grew
  // the controller by ~1 MiB per arena and never gave it back (docs/benchmarks.md).
  ::mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  // Setting that threshold also freezes glibc's trim threshold at 128 KiB: every free that left
  // more than that at the top of a heap gave it back to the kernel (brk, or MADV_DONTNEED in the
  // threads' arenas), and the next cycle's allocations faulted it in again; page faults are dear
  // under a hypervisor. Placing 81,920 jobs at 10,240 nodes on PostgreSQL took the controller
  // 25-34 CPU-s with it, 17-19 with the heap kept (docs/benchmarks.md, 2026-12-05). A heap now
  // keeps what it freed (up to 1 GiB at its top: the controller's high-water mark is what it
  // needs anyway) and grows 64 MiB at a time; big buffers still go back, by the threshold above.
  ::mallopt(M_TOP_PAD, 64 << 20);
  // Two heaps for all threads (glibc's default is eight per core). Each heap keeps the pad above
  // at its top, and malloc_trim never gives back the top of a thread's heap: with a heap per API
  // worker, the workers that parsed large submissions kept 20-27 MiB for good after the jobs were
  // gone (1.74-1.91x the starting RSS; 1.13x with two heaps, docs/benchmarks.md). The threads
  // allocate through their own caches (tcache) first, so two heaps cost no measurable placement
  // speed on two cores (bench/fleet_scale).
  ::mallopt(M_ARENA_MAX, 2);
  // Every API connection is a file descriptor: as many as the hard limit allows.
  if (rlimit nofile{};
      ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }
}

// The agent channel: gRPC, on connections the controller accepts itself (AgentListener).
struct AgentServer {
  std::unique_ptr<AgentListener> listener;
  std::unique_ptr<grpc::Server> server;
  void Stop() {
    listener->Stop();  // first: what it would hand the server after its shutdown would leak
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
};

StatusOr<int> AgentMaxConnections(const Flags& f) {
  if (f.agent_max_connections != "auto") {
    try {
      const int n = std::stoi(f.agent_max_connections);
      if (n >= 1) return n;
    } catch (...) {
    }
    return Status::InvalidArgument(
        "--agent-max-connections must be a positive number or auto, not '" +
        f.agent_max_connections + "'");
  }
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur == RLIM_INFINITY) return 1 << 20;
  // The API's connections, and room for the store, logs, the metrics and everything else.
  return AgentListener::DefaultMaxConnections(static_cast<int64_t>(nofile.rlim_cur),
                                              f.http_max_connections + 512);
}

// The agent channel (gRPC) on `addr`: the port it took goes to *agent_port.
StatusOr<AgentServer> ServeAgents(const Flags& f, const TlsFiles& tls, const HostPort& addr,
                                  AgentHub* hub, int* agent_port) {
  HANGAR_ASSIGN_OR_RETURN(const int max_connections, AgentMaxConnections(f));
  HANGAR_ASSIGN_OR_RETURN(const Duration handshake, ParseDuration(f.agent_handshake_timeout));
  std::string host = addr.first;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  AgentServer out;
  HANGAR_ASSIGN_OR_RETURN(out.listener,
                          AgentListener::Listen(host, addr.second, {max_connections}));
  grpc::ServerBuilder builder;
  // Agent streams live for days and are many: the minimal filter stack keeps each call's arena
  // small (deadlines, census and compression filters are not used on this channel).
  builder.AddChannelArgument(GRPC_ARG_MINIMAL_STACK, 1);
  // Agents ping every second to notice a controller that stopped answering.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // A connection that has not finished its TLS handshake and HTTP/2 hello by then is closed (an
  // idle socket held open by a flood), and one with no call for a minute (an agent has one always).
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(std::max<Duration>(handshake, 100)));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 60 * 1000);
  HANGAR_ASSIGN_OR_RETURN(auto creds, AgentCredentials(tls));
  auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, creds);
  builder.RegisterService(hub);
  out.server = builder.BuildAndStart();
  if (!out.server) {
    return Status::Unavailable("cannot start the agent channel on " + f.agents +
                               "; see the log above");
  }
  out.listener->Start(std::move(acceptor));
  *agent_port = out.listener->port();
  spdlog::info("agent channel: at most {} connections at once, {} ms to handshake", max_connections,
               handshake);
  return out;
}

// The services' controller when --service-lb names a load balancer (null otherwise), with the
// services the store holds.
StatusOr<std::unique_ptr<service::ServiceController>> StartServices(
    const Flags& f, StateOwner* owner, const std::vector<KeyValueRow>& values,
    service::CommandProber* prober) {
  if (f.service_lb.empty()) return std::unique_ptr<service::ServiceController>();
  service::ServiceControllerOptions o;
  HANGAR_ASSIGN_OR_RETURN(o.lb, service::ParseLbLayout(f.service_lb));
  HANGAR_ASSIGN_OR_RETURN(auto ports, service::ParsePortRange(f.service_ports));
  o.first_port = ports.first;
  o.last_port = ports.second;
  o.ports_on_this_host = f.service_ports_local;
  auto c = std::make_unique<service::ServiceController>(owner, o, prober);
  HANGAR_RETURN_IF_ERROR(c->Restore(values));
  c->Start();
  spdlog::info("controller: services behind the load balancer at {}",
               service::FormatLbLayout(o.lb));
  return c;
}

// Interactive sessions (session_server.h): on --sessions, or with `auto` on the API's host at any
// free port (the CLI asks the API where); none with `off`.
StatusOr<std::unique_ptr<SessionServer>> ServeSessions(const Flags& f, const TlsFiles& tls,
                                                       const HostPort& api,
                                                       SessionService* service) {
  if (f.sessions == "off") return std::unique_ptr<SessionServer>();
  HostPort addr{api.first, 0};
  if (f.sessions != "auto") {
    HANGAR_ASSIGN_OR_RETURN(addr, SplitHostPort(f.sessions, "--sessions"));
  }
  std::string host = addr.first;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  HANGAR_ASSIGN_OR_RETURN(auto server, SessionServer::Start(host, addr.second, tls, service, 4096));
  spdlog::info("controller: interactive sessions on {}:{}", host, server->port());
  return server;
}

Status Run(const Flags& f) {
  if (f.cluster.empty())
    return Status::InvalidArgument(
        "--cluster cluster.yaml is required: the controller needs the cluster's shape");
  HANGAR_ASSIGN_OR_RETURN(const TlsFiles tls, ControllerTls(f));
  HANGAR_ASSIGN_OR_RETURN(auto cluster_file, cluster::LoadClusterFile(f.cluster));
  HANGAR_ASSIGN_OR_RETURN(auto api_addr, SplitHostPort(f.api, "--api"));
  HANGAR_ASSIGN_OR_RETURN(auto agent_addr, SplitHostPort(f.agents, "--agents"));
  HANGAR_RETURN_IF_ERROR(
      OnManagementNetwork(cluster_file.management_network, api_addr.first, "--api"));
  HANGAR_RETURN_IF_ERROR(
      OnManagementNetwork(cluster_file.management_network, agent_addr.first, "--agents"));
  HANGAR_ASSIGN_OR_RETURN(const HttpLimits api_limits, ApiLimits(f));
  HANGAR_ASSIGN_OR_RETURN(RequestGuardOptions guard, GuardOptions(f, !tls.empty()));
  signal(SIGINT, [](int) { g_stop = true; });
  signal(SIGTERM, [](int) { g_stop = true; });
  signal(SIGPIPE, SIG_IGN);
  // A single-owner store opens here (it takes its lock and makes its folder, where the secrets key
  // may go); on PostgreSQL, several controllers share the store and the one holding its lease
  // leads, while a standby keeps a warm copy of the store (warm_standby.h, below).
  std::unique_ptr<StateStore> store;
  if (!IsPostgresUrl(f.store)) {
    StoreOpenOptions checked;
    checked.start_new = f.store_new;
    auto opened = OpenStore(f.store, checked);
    while (!opened.ok() && IsStoreDiskFull(opened.status()) &&
           !g_stop) {  // wait for room, not exit
      spdlog::error("{}; the controller waits for room before it serves (trying again every 10 s)",
                    opened.status().message());
      for (int i = 0; i < 100 && !g_stop; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      opened = OpenStore(f.store, checked);
    }
    HANGAR_ASSIGN_OR_RETURN(store, std::move(opened));
  }
  TuneProcessForServing();
  HANGAR_ASSIGN_OR_RETURN(ControllerOptions opt, OptionsFrom(f, cluster_file));
  HANGAR_ASSIGN_OR_RETURN(sched::SchedulerConfig sc, SchedulerConfigFrom(f));
  HANGAR_ASSIGN_OR_RETURN(opt.sealer, OpenSecretsKey(f));
  HANGAR_ASSIGN_OR_RETURN(auto scheduler, sched::Scheduler::Create(sc));
  auto state = std::make_unique<ClusterState>(cluster_file.topology, opt, std::move(scheduler));
  Clock* clock = SystemClock::Default();
  HANGAR_ASSIGN_OR_RETURN(Leading leading, TakeCharge(f, tls, api_limits, &api_addr, &agent_addr,
                                                      std::move(store), state.get(), clock));
  if (!leading.store) return Status::Ok();  // a standby, stopped
  std::unique_ptr<LeaseKeeper> lease = std::move(leading.lease);
  store = std::move(leading.store);
  const StoreContents& contents = leading.contents;
  const std::string& store_id = leading.store_id;

  HANGAR_ASSIGN_OR_RETURN(std::unique_ptr<TokenBook> tokens,
                          OpenTokens(f, contents, store.get(), clock));

  ControllerMetrics metrics;
  // Agents reach it from now on: their reconnect grace starts here, however long the restore took.
  state->OpenReconnectGrace(clock->Now());
  StateOwner owner(std::move(state), std::move(store), clock);
  AgentHub hub(&owner);
  hub.set_tokens(tokens.get());
  hub.set_require_client_certs(!tls.empty());
  if (lease) hub.set_epoch(lease->Me().epoch);
  hub.set_store_id(store_id);
  {
    std::map<std::string, std::string> management;
    for (const auto& n : cluster_file.topology->nodes())
      management[n.name] = n.networks.management_address;
    hub.set_management_addresses(std::move(management));
  }
  owner.set_sink(&hub);
  SessionService sessions(&owner, &hub, SessionAuth{tokens.get(), guard.dev_token});
  hub.set_session_relay(&sessions);
  StepRelay steps(&owner, &hub);
  steps.Restore(contents.values, clock->Now());
  hub.set_step_sink(&steps);
  service::CommandProber probes(
      [&hub](const std::string& node, pb::ControllerMessage m) { hub.Send(node, std::move(m)); });
  hub.set_probe_relay(&probes, &service::CommandProber::IsProbeSession);
  owner.set_cycle_observer([&metrics, clock](double s, const ClusterState& st) {
    metrics.OnCycle(s, st, clock->Now());
  });

  HANGAR_ASSIGN_OR_RETURN(const Duration register_timeout,
                          ParseDuration(f.agent_handshake_timeout));
  hub.set_register_timeout(register_timeout);
  int agent_port = 0;
  HANGAR_ASSIGN_OR_RETURN(AgentServer agents, ServeAgents(f, tls, agent_addr, &hub, &agent_port));
  HANGAR_ASSIGN_OR_RETURN(
      const HistoryOptions history,
      HistoryOptions::Parse(f.history_interval, f.history_samples, f.history_hourly));
  owner.Start();
  HistorySampler sampler(&owner, history);
  sampler.Start();
  HttpApi http(&owner, &hub, &metrics, tokens.get(), tls, api_limits);
  http.set_history_options(history);
  http.set_steps(&steps);
  HANGAR_ASSIGN_OR_RETURN(std::unique_ptr<service::ServiceController> services,
                          StartServices(f, &owner, contents.values, &probes));
  http.set_services(services.get());
  if (!http.valid()) {
    return Status::InvalidArgument("cannot load the API's TLS certificate " + tls.cert +
                                   " and key " + tls.key +
                                   "; issue them with `hangar certs issue --controller`");
  }
  http.set_dcgm_metrics(f.metrics_labels == "dcgm");
  HANGAR_ASSIGN_OR_RETURN(std::unique_ptr<SessionServer> session_server,
                          ServeSessions(f, tls, api_addr, &sessions));
  if (session_server) http.set_sessions(session_server->port(), &sessions);
  http.set_request_guard(std::move(guard));
  if (lease) http.set_leader_info([&lease] { return lease->Me().ToJson(); });
  HANGAR_ASSIGN_OR_RETURN(int api_port, http.Start(api_addr.first, api_addr.second));
  spdlog::info(
      "controller: API on {}://{}:{}, agents on {}:{} ({}), cluster '{}' ({} nodes, {} GPUs)",
      tls.empty() ? "http" : "https", api_addr.first, api_port, agent_addr.first, agent_port,
      tls.empty() ? "plaintext" : "mutual TLS", cluster_file.topology->name(),
      cluster_file.topology->nodes().size(), cluster_file.topology->total_gpus());
  WritePortFile(f.port_file, api_port, agent_port, lease ? "leader" : "single");
  int64_t rounds = 0;
  Status stopped_by;  // a commit that failed (a full disk, a damaged store): answered, then stop
  while (!g_stop && stopped_by.ok()) {
    stopped_by = owner.failure();
    // A leader that cannot be sure of its lease stops acting at once: another may lead already.
    if (lease) {
      if (const std::string why = lease->Lost(); !why.empty()) {
        spdlog::critical("controller {}: stops acting: {}; exiting (restart it to stand by again)",
                         lease->Me().name, why);
        std::_Exit(75);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(lease ? 20 : 100));
    if (++rounds % 10 == 0) hub.CloseUnregistered(clock->Now());
  }
  spdlog::info("controller: stopping");
  http.Stop();
  if (services) services->Stop();
  if (session_server) session_server->Stop();
  agents.Stop();
  sampler.Stop();
  owner.Stop();
  if (lease) lease->Release();  // nothing acts any more: a standby may take over at once
  return stopped_by;
}

}  // namespace

void RegisterControllerCommand(CLI::App& app, int* rc) {
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand(
      "controller", "Run the controller: cluster state, scheduler, API, agent channel");
  c->set_config("--config", "", "Read flags from a TOML/INI file");
  c->add_option("--cluster", f->cluster, "cluster.yaml (docs/cluster-format.md)");
  c->add_option("--api", f->api, "REST API listen address (port 0: any free port)")
      ->capture_default_str();
  c->add_option("--agents", f->agents, "Agent channel (gRPC) listen address")
      ->capture_default_str();
  c->add_option("--sessions", f->sessions,
                "Interactive sessions (gRPC; `hangar exec`, `run`, `attach`) listen address: auto "
                "(the --api host, any "
                "free port; the CLI asks the API), off, or HOST:PORT")
      ->capture_default_str();
  c->add_option("--store", f->store,
                "sqlite:///path/state.db, postgres://USER@HOST:PORT/DATABASE or memory://")
      ->capture_default_str();
  c->add_flag("--store-new", f->store_new,
              "Begin again on an empty store where the store is damaged or lost its rows (a "
              "damaged SQLite file is "
              "kept aside); without it such a store is refused (docs/ha.md)");
  c->add_option("--heartbeat-timeout", f->heartbeat_timeout, "A node silent this long is lost")
      ->capture_default_str();
  c->add_option("--reconnect-grace", f->reconnect_grace,
                "After a (re)start, how long a node may take to reconnect before it is lost and "
                "its jobs requeued "
                "(auto: 10 s + 2.5 ms per node, at least --heartbeat-timeout)")
      ->capture_default_str();
  c->add_option("--heartbeat-interval", f->heartbeat_interval, "How often agents report")
      ->capture_default_str();
  c->add_option(
       "--node-lease", f->node_lease,
       "How long a node's tasks run without word from the controller: its agent's fence keeper "
       "stops them "
       "then, and a lost node's jobs start elsewhere only after it (0: no lease, no fence)")
      ->capture_default_str();
  c->add_option("--agent-max-connections", f->agent_max_connections,
                "Agent channel connections held at once; more are closed at once (auto: what the "
                "open-file limit "
                "leaves after the API's connections)")
      ->capture_default_str();
  c->add_option("--agent-handshake-timeout", f->agent_handshake_timeout,
                "An agent channel connection must finish its TLS handshake and HTTP/2 hello within "
                "this, and its "
                "stream must register within it")
      ->capture_default_str();
  c->add_option("--queues", f->queues, "Queues that accept jobs")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--placement", f->placement, "Placement policy")->capture_default_str();
  c->add_option("--queue-policy", f->queue_policy,
                "Order within a queue: priority, fifo, sjf, las, gittins")
      ->capture_default_str();
  c->add_option("--preemption", f->preemption,
                "priority: higher-priority guaranteed jobs preempt within their queue, and "
                "guarantees are reclaimed "
                "from borrowers; quota-only: only the latter; las: less attained service preempts "
                "(Tiresias); "
                "gittins: a clearly lower Gittins rank preempts; none: never preempt")
      ->capture_default_str();
  c->add_option("--gittins-by-predecessor", f->gittins_by_predecessor,
                "Gittins ranks also class a job by how long the previous job of its shape ran (as "
                "hangar sim "
                "replay --policy hangar)")
      ->capture_default_str();
  c->add_option("--min-run-before-preempt", f->min_run,
                "No job is preempted before it has run this long")
      ->capture_default_str();
  c->add_option("--auth", f->auth,
                "tokens: every API call and agent needs a token (docs/rbac.md); none: an open API, "
                "for a laptop; "
                "dev: one token, read from --admin-token-file, on loopback (what hangar dev runs)")
      ->capture_default_str();
  c->add_option("--admin-token-file", f->admin_token_file,
                "With --auth tokens: where the first start writes the first admin token (mode "
                "0600); with --auth "
                "dev: the token to take (mode 0600)");
  c->add_option("--api-hosts", f->api_hosts,
                "Host names the API answers to (name or name:port, comma-separated); others are "
                "refused (421). "
                "Default: any")
      ->delimiter(',');
  c->add_option("--secrets-key", f->secrets_key,
                "The key (64 hex digits, mode 0600) that seals job environments in the store; "
                "default for SQLite: "
                "STORE.key beside the database, made on the first start");
  c->add_option("--stop-grace", f->stop_grace,
                "SIGTERM to SIGKILL when stopping tasks (cancel; after a checkpoint phase)")
      ->capture_default_str();
  c->add_option("--share-half-life", f->share_half_life,
                "Fair share forgets past usage with this half-life")
      ->capture_default_str();
  c->add_option("--checkpoint-root", f->checkpoint_root, "Where jobs' HANGAR_CHECKPOINT_DIR live")
      ->capture_default_str();
  c->add_option("--port-file", f->port_file,
                "Write the bound ports here as JSON (for port 0) once the controller serves (on "
                "PostgreSQL: once it leads)");
  c->add_option("--tls-dir", f->tls_dir,
                "ca.crt, controller.crt and controller.key as `hangar certs` writes them");
  c->add_option("--tls-ca", f->tls.ca,
                "The cluster CA (agents' certificates must be signed by it)");
  c->add_option("--tls-cert", f->tls.cert,
                "The controller's certificate (HTTPS and the agent channel)");
  c->add_option("--tls-key", f->tls.key, "The controller's private key");
  c->add_flag("--insecure", f->insecure,
              "Plaintext on both ports, for a laptop or a trusted network");
  c->add_option("--http-max-connections", f->http_max_connections,
                "REST API connections held at once (idle ones included); one more is answered 503")
      ->capture_default_str();
  c->add_option(
       "--http-max-connections-per-client", f->http_max_connections_per_client,
       "REST API connections one client address may hold at once; one more is answered 503")
      ->capture_default_str();
  c->add_option(
       "--http-max-workers", f->http_max_workers,
       "REST API requests served at once (a thread each); live feeds and log follows take none")
      ->capture_default_str();
  c->add_option("--http-max-streams", f->http_max_streams,
                "Live feeds and log follows open at once; one more is answered 503")
      ->capture_default_str();
  c->add_option(
       "--http-max-streams-per-client", f->http_max_streams_per_client,
       "Live feeds and log follows one client address may hold at once; one more is answered 503")
      ->capture_default_str();
  c->add_option("--http-header-timeout", f->http_header_timeout,
                "A request's TLS handshake, request line and headers must arrive within this of "
                "its first byte")
      ->capture_default_str();
  c->add_option("--http-idle-timeout", f->http_idle_timeout,
                "A REST API connection with no request under way is closed after this")
      ->capture_default_str();
  c->add_option("--http-body-timeout", f->http_body_timeout,
                "A request body must arrive within this of the end of its headers")
      ->capture_default_str();
  c->add_option("--max-queued-per-user", f->max_queued_per_user,
                "Pending jobs one user may have; a submission beyond it is refused with 429")
      ->capture_default_str();
  c->add_option(
       "--max-spec-bytes-per-user", f->max_spec_bytes_per_user,
       "Bytes of job specs one user may have in the store (each distinct spec counted once); a "
       "submission beyond it is refused")
      ->capture_default_str();
  c->add_option("--keep-finished", f->keep_finished,
                "A finished job is forgotten (in memory and in the store; its accounting stays) "
                "this long after it "
                "ended; \"forever\" keeps every job")
      ->capture_default_str();
  c->add_option(
      "--name", f->name,
      "With a PostgreSQL store: this controller's name in the lease (default HOSTNAME:API_PORT)");
  c->add_option("--advertise", f->advertise,
                "With a PostgreSQL store: the API URL standbys send clients to while this one "
                "leads (default: the "
                "bound --api address)");
  c->add_option("--lease", f->lease,
                "With a PostgreSQL store: the leadership lease; a leader that cannot renew it "
                "within this stops, and a standby takes over after it")
      ->capture_default_str();
  c->add_option("--lease-renew", f->lease_renew, "How often the leader renews its lease")
      ->capture_default_str();
  c->add_option("--lease-poll", f->lease_poll, "How often a standby tries to take the lease")
      ->capture_default_str();
  c->add_option("--standby-follow", f->standby_follow,
                "How often a standby reads what the leader committed, to take over without loading "
                "the whole "
                "store (0: stay cold)")
      ->capture_default_str();
  c->add_option(
       "--history-interval", f->history_interval,
       "How often the cluster's load is sampled for the dashboard's charts and GET /v1/history")
      ->capture_default_str();
  c->add_option("--history-samples", f->history_samples,
                "Samples are kept this long, then only hourly averages")
      ->capture_default_str();
  c->add_option("--history-hourly", f->history_hourly, "Hourly averages are kept this long")
      ->capture_default_str();
  c->add_option(
      "--service-lb", f->service_lb,
      "Services' load balancer: HAProxy's runtime API @ where its endpoints listen, "
      "ADMIN@HOST:FIRST_PORT+SLOTS (unix:/run/hangar/lb.sock@0.0.0.0:30000+16; `hangar service "
      "lb-config` writes its haproxy.cfg; docs/services.md)");
  c->add_option("--service-ports", f->service_ports, "The ports replicas are given as HANGAR_PORT")
      ->capture_default_str();
  c->add_flag(
      "--service-ports-local", f->service_ports_local,
      "Give replicas only ports free on this host too (the nodes are this host: hangar dev)");
  c->add_option("--metrics-labels", f->metrics_labels,
                "/metrics by default: clean (promtool-clean) or dcgm (dcgm-exporter's names, types "
                "and labels)")
      ->check(CLI::IsMember({"clean", "dcgm"}))
      ->capture_default_str();
  c->callback([f, rc] {
    Status s = Run(*f);
    if (!s.ok()) {
      spdlog::error("hangar controller: {}", s.message());
      *rc = 2;
    }
  });
}

}  // namespace hangar::controller
