#include "swarm/swarm.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <queue>
#include <sstream>
#include <thread>

#include "common/mutex.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::swarm {

namespace pb = ::hangar::agent::v1;

Duration TaskDuration(const std::vector<std::string>& argv, Duration fallback) {
  std::vector<std::string> words;
  for (const auto& arg : argv) {
    std::istringstream in(arg);
    for (std::string w; in >> w;) words.push_back(w);
  }
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] != "sleep" && !words[i].ends_with("/sleep")) continue;
    char* end = nullptr;
    const double s = std::strtod(words[i + 1].c_str(), &end);
    if (end != words[i + 1].c_str() && s >= 0) return static_cast<Duration>(s * 1000);
  }
  return fallback;
}

// What every simulated agent shares: the stubs, the task timers, the counters.
struct Swarm::Shared {
  std::vector<std::unique_ptr<pb::AgentChannel::Stub>> stubs;
  Mutex mu;
  struct Due {
    Time at;
    Agent* agent;
    pb::TaskStatus status;
    bool operator>(const Due& o) const { return at > o.at; }
  };
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due HANGAR_GUARDED_BY(mu);
  std::atomic<int64_t> registered{0}, heartbeats{0}, launches{0}, ended{0}, errors{0};
  Duration default_duration = 10 * kSecond;
  Time silenced_at HANGAR_GUARDED_BY(mu) = 0;  // the latest of the silent agents' last heartbeats
  size_t silent HANGAR_GUARDED_BY(mu) = 0;     // agents silenced
};

// One simulated agent: a bidirectional stream with a write queue (one write in flight).
class Swarm::Agent final : public grpc::ClientBidiReactor<pb::AgentMessage, pb::ControllerMessage> {
 public:
  Agent(Shared* shared, std::string node, int gpus, std::string model, int64_t gpu_mem)
      : shared_(shared),
        node_(std::move(node)),
        gpus_(gpus),
        model_(std::move(model)),
        gpu_mem_(gpu_mem) {}

  void Begin(pb::AgentChannel::Stub* stub) {
    stub->async()->Connect(&ctx_, this);
    pb::AgentMessage reg;
    pb::Inventory* inv = reg.mutable_register_()->mutable_inventory();
    inv->set_node(node_);
    inv->set_address("127.0.0.1");
    inv->set_gpu_backend("swarm");
    for (int i = 0; i < gpus_; ++i) {
      pb::GpuInfo* g = inv->add_gpus();
      g->set_index(static_cast<uint32_t>(i));
      g->set_model(model_);
      g->set_memory_mib(static_cast<uint64_t>(gpu_mem_));
    }
    Send(std::move(reg));
    StartRead(&in_);
    AddHold();  // keeps the stream open for writes issued from outside reactions
    StartCall();
  }

  void Send(pb::AgentMessage m) HANGAR_EXCLUDES(mu_) {
    const pb::AgentMessage* first = nullptr;
    {
      MutexLock l(mu_);
      if (done_) return;
      out_.push_back(std::move(m));
      if (writing_) return;
      writing_ = true;
      first = &out_.front();
    }
    StartWrite(first);
  }

  void Heartbeat(uint64_t seq, Time now) {
    if (silent_ || !registered_) return;  // its stream may not even be open yet
    last_beat_ = now;
    pb::AgentMessage m;
    pb::Heartbeat* hb = m.mutable_heartbeat();
    hb->set_seq(seq);
    hb->set_time_ms(now);
    for (int i = 0; i < gpus_; ++i) {
      pb::GpuTelemetry* t = hb->add_gpus();
      t->set_index(static_cast<uint32_t>(i));
      t->set_util_pct(busy_gpus_ > i ? 100 : 0);
      t->set_temperature_c(40);
      t->set_power_mw(300000);
      t->set_pcie_gen(5);
      t->set_pcie_width(16);
      t->set_pcie_gen_max(5);
      t->set_pcie_width_max(16);
    }
    shared_->heartbeats++;
    Send(std::move(m));
  }

  void OnWriteDone(bool ok) override HANGAR_EXCLUDES(mu_) {
    const pb::AgentMessage* next = nullptr;
    {
      MutexLock l(mu_);
      out_.pop_front();
      if (!ok || out_.empty()) {
        writing_ = false;
        if (!ok) shared_->errors++;
        return;
      }
      next = &out_.front();
    }
    StartWrite(next);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    Handle(in_);
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& s) override HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    done_ = true;
    if (!s.ok()) shared_->errors++;
  }

  void Silence() { silent_ = true; }
  void Close() {
    ctx_.TryCancel();
    RemoveHold();
  }
  const std::string& node() const { return node_; }
  bool registered() const { return registered_; }

 private:
  void Handle(const pb::ControllerMessage& m) {
    if (silent_) return;  // a silent node is a dead one: it answers nothing
    if (m.has_registered()) {
      if (!registered_.exchange(true)) shared_->registered++;
      return;
    }
    if (m.has_validate()) {  // simulated results, like the fake GPU backend's
      pb::AgentMessage v;
      std::string gpus;
      for (int i = 0; i < gpus_; ++i) {
        gpus += (i ? "," : "") + std::string("{\"index\":") + std::to_string(i) + ",\"model\":\"" +
                model_ +
                "\",\"gemm_tflops\":700,\"mem_bw_gbs\":3000,\"h2d_gbs\":50,\"d2h_gbs\":50}";
      }
      v.mutable_validation()->set_json("{\"gpus\":[" + gpus + "],\"nccl_busbw_gbs\":400}");
      v.mutable_validation()->set_ok(true);
      Send(std::move(v));
      return;
    }
    if (!m.has_launch()) return;
    const pb::Launch& l = m.launch();
    shared_->launches++;
    pb::AgentMessage running;
    pb::TaskStatus* st = running.mutable_task_status();
    st->set_task_id(l.task_id());
    st->set_job_id(l.job_id());
    st->set_attempt(l.attempt());
    st->set_task_index(l.task_index());
    st->set_state(pb::TaskStatus::RUNNING);
    pb::TaskStatus ended = *st;
    ended.set_state(pb::TaskStatus::EXITED);
    Send(std::move(running));
    const std::vector<std::string> argv(l.argv().begin(), l.argv().end());
    const Duration d = TaskDuration(argv, shared_->default_duration);
    MutexLock lock(shared_->mu);
    shared_->due.push({SystemClock::Default()->Now() + d, this, std::move(ended)});
  }

  Shared* shared_;
  std::string node_;
  int gpus_;
  std::string model_;
  int64_t gpu_mem_;
  grpc::ClientContext ctx_;
  pb::ControllerMessage in_;
  Mutex mu_;
  std::deque<pb::AgentMessage> out_ HANGAR_GUARDED_BY(mu_);
  bool writing_ HANGAR_GUARDED_BY(mu_) = false;
  bool done_ HANGAR_GUARDED_BY(mu_) = false;
  std::atomic<bool> registered_{false};
  std::atomic<bool> silent_{false};
  std::atomic<Time> last_beat_{0};  // when its last heartbeat was sent
  int busy_gpus_ = 0;

  friend class Swarm;
};

Swarm::Swarm(std::shared_ptr<const cluster::Topology> topology, SwarmOptions options)
    : topology_(std::move(topology)),
      options_(std::move(options)),
      shared_(std::make_unique<Shared>()) {
  shared_->default_duration = options_.default_task_duration;
  const bool own = options_.channels <= 0 || !options_.tls.ca.empty();  // a connection per agent
  const size_t channels = own ? topology_->nodes().size() : static_cast<size_t>(options_.channels);
  for (size_t c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("hangar.swarm.channel",
                static_cast<int>(c));  // distinct arguments: a connection of its own
    args.SetInt(GRPC_ARG_MAX_CONCURRENT_STREAMS, 100000);
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (!options_.tls.ca.empty()) {
      grpc::SslCredentialsOptions o;
      o.pem_root_certs = options_.tls.ca;
      o.pem_cert_chain = options_.tls.certs[c];
      o.pem_private_key = options_.tls.keys[c];
      creds = grpc::SslCredentials(o);
    }
    shared_->stubs.push_back(
        pb::AgentChannel::NewStub(grpc::CreateCustomChannel(options_.controller, creds, args)));
  }
  for (const auto& n : topology_->nodes()) {
    const std::string model = n.num_gpus ? topology_->models()[n.model] : "";
    agents_.push_back(
        std::make_unique<Agent>(shared_.get(), n.name, n.num_gpus, model, n.gpu_memory_mib));
  }
}

size_t Swarm::connections() const { return shared_->stubs.size(); }

Swarm::~Swarm() {
  for (auto& a : agents_) a->Close();
  // Give the streams a moment to finish before their reactors are destroyed.
  for (int i = 0; i < 200; ++i) {
    bool all = true;
    for (auto& a : agents_) {
      MutexLock l(a->mu_);
      all = all && a->done_;
    }
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool Swarm::Start(Duration timeout, const std::atomic<bool>* stop) {
  for (size_t i = 0; i < agents_.size(); ++i)
    agents_[i]->Begin(shared_->stubs[i % shared_->stubs.size()].get());
  const Time until = SystemClock::Default()->Now() + timeout;
  while (SystemClock::Default()->Now() < until && !(stop && *stop)) {
    if (shared_->registered.load() == static_cast<int64_t>(agents_.size())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void Swarm::Run(const std::atomic<bool>* stop) {
  Clock* clock = SystemClock::Default();
  const Time start = clock->Now();
  // Each agent beats once per interval at its own phase (agent k at k/N of it), as independent
  // machines do, rather than all 10,240 in one burst each second.
  const int64_t n = static_cast<int64_t>(agents_.size());
  const Duration interval = std::max<Duration>(options_.heartbeat_interval, 1);
  int64_t beats = 0;  // heartbeats due so far, over all agents
  bool silenced = false;
  Time all_registered_at = -1;  // silent_after counts from here
  const size_t silent_count =
      static_cast<size_t>(options_.silent_fraction * static_cast<double>(agents_.size()));
  while (!*stop) {
    const Time now = clock->Now();
    if (all_registered_at < 0 && shared_->registered.load() == n) all_registered_at = now;
    const bool due =
        options_.silence_file.empty()
            ? all_registered_at >= 0 && now - all_registered_at >= options_.silent_after
            : ::access(options_.silence_file.c_str(), F_OK) == 0;
    if (!silenced && silent_count > 0 && due) {
      // Every n-th agent, spread over the fabric.
      const size_t step = agents_.size() / silent_count;
      for (size_t k = 0; k < silent_count; ++k) agents_[k * step]->Silence();
      silenced = true;
      Time last = 0;
      for (size_t k = 0; k < silent_count; ++k)
        last = std::max(last, agents_[k * step]->last_beat_.load());
      MutexLock l(shared_->mu);
      shared_->silenced_at = last;  // the latest of their last heartbeats went out then
      shared_->silent = silent_count;
    }
    // A swarm that fell behind sends each agent one heartbeat, not the backlog.
    const int64_t beats_due = n > 0 ? (now - start) * n / interval + 1 : 0;
    beats = std::max(beats, beats_due - n);
    for (; beats < beats_due; ++beats)
      agents_[static_cast<size_t>(beats % n)]->Heartbeat(static_cast<uint64_t>(beats / n + 1), now);
    std::vector<Shared::Due> ready;
    {
      MutexLock l(shared_->mu);
      while (!shared_->due.empty() && shared_->due.top().at <= now) {
        ready.push_back(shared_->due.top());
        shared_->due.pop();
      }
    }
    for (auto& d : ready) {
      pb::AgentMessage m;
      *m.mutable_task_status() = d.status;
      d.agent->Send(std::move(m));
      shared_->ended++;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::map<std::string, Time> Swarm::silent_last_heartbeats() const {
  std::map<std::string, Time> out;
  for (const auto& a : agents_) {
    if (a->silent_) out[a->node()] = a->last_beat_.load();
  }
  return out;
}

SwarmStats Swarm::stats() const {
  SwarmStats s;
  s.registered = shared_->registered.load();
  s.heartbeats_sent = shared_->heartbeats.load();
  s.launches = shared_->launches.load();
  s.tasks_ended = shared_->ended.load();
  s.stream_errors = shared_->errors.load();
  MutexLock l(shared_->mu);
  s.silenced = static_cast<int64_t>(shared_->silent);
  s.silenced_at = shared_->silenced_at;
  return s;
}

std::vector<std::string> Swarm::silent_nodes() const {
  std::vector<std::string> out;
  for (const auto& a : agents_) {
    if (a->silent_) out.push_back(a->node());
  }
  return out;
}

}  // namespace hangar::swarm
