#include "controller/agent_hub.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <list>

namespace hangar::controller {

// One agent's stream. Reads one message at a time; writes from a queue, one in flight. Deletes
// itself when gRPC says the stream is done.
class AgentHub::Stream final
    : public grpc::ServerBidiReactor<pb::AgentMessage, pb::ControllerMessage> {
 public:
  // The stream owns itself until gRPC calls OnDone; the hub's map holds more references, so a
  // stream found under the hub's lock can be used after the lock is released.
  static Stream* Create(AgentHub* hub, std::optional<StatusOr<Principal>> who,
                        std::optional<std::string> cert_node, std::string peer) {
    auto s = std::shared_ptr<Stream>(new Stream(hub));
    s->self_ = s;
    s->peer_ = std::move(peer);
    s->who_ = std::move(who);
    s->cert_node_ = std::move(cert_node);
    {
      MutexLock l(hub->mu_);
      hub->unregistered_[s.get()] = {s, hub->owner_->clock()->Now()};
    }
    s->StartRead(&s->in_);
    return s.get();
  }

  // gRPC may run a reaction inline, so nothing here calls into gRPC with mu_ held. References to
  // list elements stay valid across push_back, so the message being written does not move.
  void Enqueue(pb::ControllerMessage m) HANGAR_EXCLUDES(mu_) {
    const pb::ControllerMessage* first = nullptr;
    {
      MutexLock l(mu_);
      if (finished_) return;
      out_.push_back(std::move(m));
      if (writing_) return;
      writing_ = true;
      first = &out_.front();
    }
    StartWrite(first);
  }

  void Reject(const std::string& why) HANGAR_EXCLUDES(mu_) {
    {
      MutexLock l(mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, why));
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        MutexLock l(mu_);
        if (finished_) return;
        finished_ = true;
      }
      Finish(grpc::Status::OK);
      return;
    }
    hub_->messages_in_++;
    if (!Handle(in_)) return;  // refused: the stream is finished
    // Clear() would keep the message's capacity (a heartbeat's telemetry) for the stream's whole
    // life; with ten thousand streams that adds up, so give it back.
    pb::AgentMessage().Swap(&in_);
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    const pb::ControllerMessage* next = nullptr;
    {
      MutexLock l(mu_);
      out_.pop_front();
      if (!ok || finished_ || out_.empty()) {
        writing_ = false;
        return;
      }
      next = &out_.front();
    }
    StartWrite(next);
  }

  void OnDone() override {
    {
      MutexLock l(hub_->mu_);
      hub_->unregistered_.erase(this);
    }
    if (!node_.empty()) {
      hub_->Detach(node_, this);
      std::string node = node_;
      hub_->owner_->Post(
          [node](ClusterState& s, Effects*, StateOwner::AfterCommit*) { s.OnDisconnect(node, 0); });
    }
    self_.reset();  // may delete this: nothing after
  }

  // The token this stream authenticated with ("" without tokens).
  std::string token_id() const { return who_ && who_->ok() ? (*who_)->token_id : std::string(); }

 private:
  // False when the stream was refused and must not read on.
  bool Handle(pb::AgentMessage& m) {  // may take parts of m (it is read into again)
    StateOwner* owner = hub_->owner_;
    Clock* clock = owner->clock();
    // Nothing but Register before Register: a stream speaks for a node only once it has shown
    // that node's token (with tokens) and named it.
    if (m.body_case() != pb::AgentMessage::kRegister && node_.empty()) {
      hub_->Refuse(
          Refusal::kUnregistered, "an unregistered stream",
          "a message before Register; an agent must register (with its node's token) first");
      Reject("send Register first: nothing else is accepted on a stream that has not registered");
      return false;
    }
    switch (m.body_case()) {
      case pb::AgentMessage::kRegister:
        return HandleRegister(m.register_());
      case pb::AgentMessage::kHeartbeat:
        HandleHeartbeat(m.mutable_heartbeat());
        break;
      case pb::AgentMessage::kTaskStatus: {
        auto st = std::make_shared<pb::TaskStatus>(m.task_status());
        owner->Post([st, clock, node = node_, hub = hub_](ClusterState& s, Effects* fx,
                                                          StateOwner::AfterCommit*) {
          Status ok = s.OnTaskStatus(node, *st, clock->Now(), fx);
          if (!ok.ok()) hub->Refuse(Refusal::kForeignTask, "node " + node, ok.message());
        });
        break;
      }
      case pb::AgentMessage::kLogChunk:
        hub_->DeliverLog(node_, m.log_chunk());
        break;
      case pb::AgentMessage::kSessionOutput:
        if (hub_->wiring_.probes && hub_->wiring_.is_probe(m.session_output().session_id())) {
          hub_->wiring_.probes->FromAgent(node_, std::move(*m.mutable_session_output()));
        } else if (StepSink::IsStepSession(m.session_output().session_id())) {
          if (hub_->wiring_.steps)
            hub_->wiring_.steps->FromSession(node_, std::move(*m.mutable_session_output()));
        } else if (hub_->wiring_.sessions) {
          hub_->wiring_.sessions->FromAgent(node_, std::move(*m.mutable_session_output()));
        }
        break;
      case pb::AgentMessage::kStepRequest:
        if (hub_->wiring_.steps)
          hub_->wiring_.steps->FromAgent(node_, std::move(*m.mutable_step_request()));
        break;
      case pb::AgentMessage::kGpuEvent: {
        auto e = std::make_shared<pb::GpuEvent>(m.gpu_event());
        owner->Post([e, clock, node = node_](ClusterState& s, Effects*, StateOwner::AfterCommit*) {
          s.OnGpuEvent(node, *e, clock->Now());
        });
        break;
      }
      case pb::AgentMessage::kCheckpointDone: {
        auto c = std::make_shared<pb::CheckpointDone>(m.checkpoint_done());
        owner->Post([c, clock, node = node_, hub = hub_](ClusterState& s, Effects* fx,
                                                         StateOwner::AfterCommit*) {
          Status ok = s.OnCheckpointDone(node, *c, clock->Now(), fx);
          if (!ok.ok()) hub->Refuse(Refusal::kForeignTask, "node " + node, ok.message());
        });
        break;
      }
      case pb::AgentMessage::kProgress: {
        auto p = std::make_shared<pb::Progress>(m.progress());
        owner->Post([p, clock, node = node_, hub = hub_](ClusterState& s, Effects* fx,
                                                         StateOwner::AfterCommit*) {
          Status ok = s.OnProgress(node, *p, clock->Now(), fx);
          if (!ok.ok()) hub->Refuse(Refusal::kForeignTask, "node " + node, ok.message());
        });
        break;
      }
      case pb::AgentMessage::kValidation: {
        auto v = std::make_shared<pb::ValidationResult>(m.validation());
        owner->Post([v, clock, node = node_](ClusterState& s, Effects*, StateOwner::AfterCommit*) {
          s.OnValidation(node, *v, clock->Now());
        });
        break;
      }
      case pb::AgentMessage::kMaintenanceResult: {
        // Answers only for this node's own command of the active run count; an answer sent again
        // (after a reconnect) is old news and changes nothing.
        auto r = std::make_shared<pb::MaintenanceResult>(m.maintenance_result());
        owner->Post(
            [r, clock, node = node_](ClusterState& s, Effects* fx, StateOwner::AfterCommit*) {
              (void)s.OnMaintenanceResult(node, *r, clock->Now(), fx);
            });
        break;
      }
      case pb::AgentMessage::kStageResult: {
        auto r = std::make_shared<pb::StageResult>(m.stage_result());
        owner->Post(
            [r, clock, node = node_](ClusterState& s, Effects* fx, StateOwner::AfterCommit*) {
              s.OnStageResult(node, *r, clock->Now(), fx);
            });
        break;
      }
      case pb::AgentMessage::kImages: {
        auto inv = std::make_shared<pb::ImageInventory>(m.images());
        owner->Post(
            [inv, clock, node = node_](ClusterState& s, Effects* fx, StateOwner::AfterCommit*) {
              s.OnImages(node, *inv, clock->Now(), fx);
            });
        break;
      }
      case pb::AgentMessage::kMigReshaped: {
        auto r = std::make_shared<pb::MigReshaped>(m.mig_reshaped());
        owner->Post(
            [r, clock, node = node_](ClusterState& s, Effects* fx, StateOwner::AfterCommit*) {
              s.OnMigReshaped(node, *r, clock->Now(), fx);
            });
        break;
      }
      default:
        break;  // later protocol additions are ignored by older controllers
    }
    return true;
  }

  // Why this stream may not register as `node` (its certificate or token is another node's, or
  // it registered as another node already); Ok when it may.
  Status MayRegisterAs(const std::string& node) const {
    if (cert_node_ && *cert_node_ != node) {
      return Status::PermissionDenied(
          "this agent's certificate is node " + *cert_node_ + "'s; it cannot register as node " +
          node + " (issue it one with `hangar certs issue --node " + node + "`)");
    }
    if (!node_.empty() && node != node_) {
      return Status::FailedPrecondition("this stream registered as node " + node_ +
                                        "; it cannot speak for another node");
    }
    if (!who_) return Status::Ok();  // no tokens: any agent may connect
    if (!who_->ok()) return who_->status();
    if ((*who_)->role != Role::kNode || (*who_)->user != node) {
      return Status::PermissionDenied("permission agent:connect for node " + node +
                                      " is missing: " + (*who_)->Describe() +
                                      " is not that node's token; make one with "
                                      "`hangar token create --role node --node " +
                                      node + "`");
    }
    return Status::Ok();
  }

  bool HandleRegister(const pb::Register& m) {
    const std::string& node = m.inventory().node();
    if (auto it = hub_->management_.find(node); it != hub_->management_.end() && node_.empty()) {
      const std::string from = AgentHub::PeerAddress(peer_);
      if (from != it->second) {
        const std::string why =
            "node " + node + "'s agent connected from " + (from.empty() ? peer_ : from) +
            ", but cluster.yaml gives its management address as " + it->second +
            ": agents talk to the controller over the management network only; give the agent's "
            "--controller an address on that network (docs/networks.md)";
        hub_->Refuse(Refusal::kWrongNetwork, "node " + node, why);
        Reject(why);
        return false;
      }
    }
    if (Status denied = MayRegisterAs(node); !denied.ok()) {
      if (!node_.empty() && node != node_) {
        hub_->Refuse(Refusal::kReregister, "node " + node_, "a second Register, as node " + node);
      } else {
        spdlog::warn("refused agent {}: {}", node, denied.message());
      }
      Reject(denied.message());
      return false;
    }
    Clock* clock = hub_->owner_->clock();
    if (const std::string& served = m.store_id();
        !served.empty() && !hub_->store_id_.empty() && served != hub_->store_id_) {
      const std::string why = ForeignStore(node, served);
      hub_->Refuse(Refusal::kForeignStore, "node " + node, why);
      if (hub_->FirstForeignStoreRefusal(node)) {  // its agent retries every few seconds: one event
        hub_->owner_->Post(
            [node, why, clock](ClusterState&, Effects* fx, StateOwner::AfterCommit*) {
              fx->Event(clock->Now(), "node", "node/" + node, "refused: " + why);
            });
      }
      Reject(why);
      return false;
    }
    node_ = node;
    {
      MutexLock l(hub_->mu_);
      hub_->unregistered_.erase(this);
    }
    hub_->Attach(node_, self_);
    auto reg = std::make_shared<pb::Register>(m);
    hub_->owner_->Post([reg, clock, this, hub = hub_](ClusterState& s, Effects* fx,
                                                      StateOwner::AfterCommit* after) {
      Status st = s.OnRegister(*reg, clock->Now(), fx);
      if (st.ok()) return;
      spdlog::warn("refused agent {}: {}", reg->inventory().node(), st.message());
      const std::string node = reg->inventory().node();
      after->push_back(
          [hub, node, this, why = st.message()] { hub->RejectStream(node, this, why); });
    });
    return true;
  }

  // The sentence an agent of another store is refused with: what happened and both ways out.
  std::string ForeignStore(const std::string& node, const std::string& served) const {
    return "node " + node + "'s agent last served store " + served +
           ", but this controller's store is " + hub_->store_id_ +
           ": the agent's task ids name that store's jobs, not this one's. If the store was "
           "lost, " +
           "restore it from a backup (`hangar restore`) and restart the controller; to give the "
           "node to this store, " +
           "restart its agent with --forget-store (it stops the tasks it runs for store " + served +
           " and forgets them)";
  }

  void HandleHeartbeat(pb::Heartbeat* in) {
    hub_->heartbeats_++;
    auto hb = std::make_shared<pb::Heartbeat>();
    hb->Swap(in);  // no copy of the telemetry
    // Liveness counts from when the heartbeat arrived, not from when the state thread got to
    // it: a burst of work (thousands of placements to commit) must not make nodes look
    // silent. Nothing in a heartbeat is urgent (Xids and task ends come as their own
    // messages), so it waits for the owner's next batch.
    const Time received = hub_->owner_->clock()->Now();
    hub_->owner_->PostLazy([hb, received, node = node_, this, hub = hub_](
                               ClusterState& s, Effects* fx, StateOwner::AfterCommit* after) {
      if (s.OnHeartbeat(node, *hb, received, fx)) return;
      // Marked lost while its stream stayed up (the agent was stopped, or starved, for longer
      // than the timeout): its gangs were requeued. Closing the stream makes it register
      // again, which reconciles its tasks and brings the node back.
      after->push_back([hub, node, this] {
        hub->RejectStream(
            node, this, "node " + node + " was marked lost; register again to reconcile its tasks");
      });
    });
  }

  using Refusal = AgentHub::Refusal;
  explicit Stream(AgentHub* hub) : hub_(hub) {}

  AgentHub* hub_;
  std::shared_ptr<Stream> self_;
  std::optional<StatusOr<Principal>> who_;  // set when tokens are required
  std::optional<std::string> cert_node_;    // with mutual TLS: the common name of its certificate
  std::string peer_;                        // where the connection comes from (gRPC peer string)
  pb::AgentMessage in_;
  std::string node_;
  Mutex mu_;
  // A list, not a deque: an empty deque already holds a ~500-byte block, per connected agent.
  std::list<pb::ControllerMessage> out_ HANGAR_GUARDED_BY(mu_);
  bool writing_ HANGAR_GUARDED_BY(mu_) = false;
  bool finished_ HANGAR_GUARDED_BY(mu_) = false;
};

AgentHub::~AgentHub() = default;

const char* AgentHub::RefusalName(Refusal r) {
  switch (r) {
    case Refusal::kUnregistered:
      return "unregistered";
    case Refusal::kReregister:
      return "reregister";
    case Refusal::kForeignTask:
      return "foreign_task";
    case Refusal::kForeignLog:
      return "foreign_log";
    case Refusal::kForeignStore:
      return "foreign_store";
    case Refusal::kWrongNetwork:
      return "wrong_network";
    case Refusal::kCount:
      break;
  }
  return "other";
}

void AgentHub::Refuse(Refusal r, const std::string& who, const std::string& why) {
  refused_[static_cast<size_t>(r)]++;
  spdlog::warn("agent channel: refused {} from {}: {}", RefusalName(r), who, why);
}

bool AgentHub::FirstForeignStoreRefusal(const std::string& node) {
  MutexLock l(mu_);
  return foreign_store_nodes_.insert(node).second;
}

size_t AgentHub::CloseUnregistered(Time now) {
  if (wiring_.register_timeout <= 0) return 0;
  std::vector<std::shared_ptr<Stream>> closing;
  {
    MutexLock l(mu_);
    for (auto it = unregistered_.begin(); it != unregistered_.end();) {
      if (now - it->second.second < wiring_.register_timeout) {
        ++it;
        continue;
      }
      if (auto s = it->second.first.lock()) closing.push_back(std::move(s));
      it = unregistered_.erase(it);
    }
  }
  for (const auto& s : closing) {
    s->Reject("no Register within " + std::to_string(wiring_.register_timeout) +
              " ms of opening the stream: an agent registers first (with its node's token)");
  }
  if (!closing.empty())
    spdlog::warn("agent channel: closed {} stream(s) that did not register in time",
                 closing.size());
  return closing.size();
}

size_t AgentHub::CloseStreamsOf(const std::string& token_id) {
  if (token_id.empty()) return 0;
  std::vector<std::shared_ptr<Stream>> closing;
  {
    MutexLock l(mu_);
    for (const auto& [node, s] : streams_) {
      if (s->token_id() == token_id) closing.push_back(s);
    }
  }
  for (const auto& s : closing) s->Reject("the token this agent connected with was revoked");
  if (!closing.empty())
    spdlog::warn("token {} revoked: closed {} agent stream(s)", token_id, closing.size());
  return closing.size();
}

grpc::ServerBidiReactor<pb::AgentMessage, pb::ControllerMessage>* AgentHub::Connect(
    grpc::CallbackServerContext* context) {
  std::optional<StatusOr<Principal>> who;
  if (wiring_.tokens) {
    const auto& md = context->client_metadata();
    auto it = md.find("authorization");
    who = wiring_.tokens->Authenticate(it == md.end()
                                           ? std::string_view()
                                           : std::string_view(it->second.data(), it->second.size()),
                                       owner_->clock()->Now());
  }
  std::optional<std::string> cert_node;
  if (wiring_.require_certs) {
    // gRPC has verified the chain against the cluster CA; the name is the certificate's CN.
    cert_node = std::string();
    auto auth = context->auth_context();
    if (auth) {
      for (const auto& v : auth->FindPropertyValues("x509_common_name"))
        cert_node = std::string(v.data(), v.size());
    }
  }
  return Stream::Create(this, std::move(who), std::move(cert_node), context->peer());
}

void AgentHub::set_management_addresses(std::map<std::string, std::string> by_node) {
  management_.clear();
  for (auto& [node, address] : by_node) {
    if (!address.empty()) management_[node] = CanonicalAddress(address);
  }
}

std::string AgentHub::CanonicalAddress(const std::string& address) {
  unsigned char buf[16];
  char text[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, address.c_str(), buf) == 1) {
    return inet_ntop(AF_INET, buf, text, sizeof text) ? text : "";
  }
  if (inet_pton(AF_INET6, address.c_str(), buf) != 1) return "";
  static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(buf, kMapped, 12) == 0)
    return inet_ntop(AF_INET, buf + 12, text, sizeof text) ? text : "";
  return inet_ntop(AF_INET6, buf, text, sizeof text) ? text : "";
}

std::string AgentHub::PeerAddress(const std::string& peer) {
  std::string rest;
  if (peer.rfind("ipv4:", 0) == 0 || peer.rfind("ipv6:", 0) == 0)
    rest = peer.substr(5);
  else
    return "";
  // gRPC percent-encodes the brackets of an IPv6 peer in some versions ("%5B::1%5D:5000").
  for (size_t at; (at = rest.find("%5B")) != std::string::npos ||
                  (at = rest.find("%5b")) != std::string::npos;)
    rest.replace(at, 3, "[");
  for (size_t at; (at = rest.find("%5D")) != std::string::npos ||
                  (at = rest.find("%5d")) != std::string::npos;)
    rest.replace(at, 3, "]");
  std::string host;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos) return "";
    host = rest.substr(1, close - 1);
  } else {
    const size_t colon = rest.rfind(':');
    host = colon == std::string::npos ? rest : rest.substr(0, colon);
  }
  if (const size_t zone = host.find('%'); zone != std::string::npos) host.resize(zone);
  return CanonicalAddress(host);
}

void AgentHub::Attach(const std::string& node, std::shared_ptr<Stream> s) {
  std::shared_ptr<Stream> old;
  {
    MutexLock l(mu_);
    auto it = streams_.find(node);
    if (it != streams_.end() && it->second != s) old = it->second;
    streams_[node] = s;
  }
  if (old) old->Reject("a newer stream from node " + node + " replaced this one");
  if (old && wiring_.sessions)
    wiring_.sessions->NodeGone(node);  // the agent ended them with its old stream
  if (old && wiring_.steps) wiring_.steps->NodeGone(node);
  if (old && wiring_.probes) wiring_.probes->NodeGone(node);
}

void AgentHub::RejectStream(const std::string& node, const Stream* stream, const std::string& why) {
  std::shared_ptr<Stream> s;
  {
    MutexLock l(mu_);
    auto it = streams_.find(node);
    if (it != streams_.end() && it->second.get() == stream) s = it->second;
  }
  if (s) s->Reject(why);
}

void AgentHub::Detach(const std::string& node, Stream* s) {
  std::shared_ptr<Stream> gone;  // released after the lock
  {
    MutexLock l(mu_);
    auto it = streams_.find(node);
    if (it != streams_.end() && it->second.get() == s) {
      gone = std::move(it->second);
      streams_.erase(it);
    }
  }
  // Outside mu_: a session relays to the hub (Send) while holding its own lock.
  if (gone && wiring_.sessions) wiring_.sessions->NodeGone(node);
  if (gone && wiring_.steps) wiring_.steps->NodeGone(node);
  if (gone && wiring_.probes) wiring_.probes->NodeGone(node);
}

void AgentHub::Send(const std::string& node, pb::ControllerMessage message) {
  if (const int64_t e = epoch_.load(); e > 0) message.set_epoch(e);
  if (!store_id_.empty()) message.set_store_id(store_id_);
  std::shared_ptr<Stream> s;
  {
    MutexLock l(mu_);
    auto it = streams_.find(node);
    if (it == streams_.end()) return;
    s = it->second;
  }
  // A job's checkpoint signal reaches its srun steps too: they run in sessions of their own.
  const bool checkpoint = message.has_stop() && message.stop().checkpoint_signal() != 0;
  const std::string task = checkpoint ? message.stop().task_id() : "";
  const int signal = checkpoint ? message.stop().checkpoint_signal() : 0;
  s->Enqueue(std::move(message));
  if (checkpoint && wiring_.steps) wiring_.steps->TaskSignalled(task, signal);
}

size_t AgentHub::connected() const {
  MutexLock l(mu_);
  return streams_.size();
}

StatusOr<pb::LogChunk> AgentHub::ReadLog(const std::string& node, const std::string& task_id,
                                         uint64_t offset, bool stderr_stream, Duration timeout) {
  uint64_t id;
  {
    MutexLock l(log_mu_);
    id = next_request_++;
    log_waiting_[id] = LogWait{node, std::nullopt, nullptr};
  }
  pb::ControllerMessage m;
  auto* r = m.mutable_log_request();
  r->set_request_id(id);
  r->set_task_id(task_id);
  r->set_offset(offset);
  r->set_stderr(stderr_stream);
  r->set_max_bytes(256 * 1024);
  Send(node, std::move(m));
  MutexLock l(log_mu_);
  const bool got =
      l.WaitFor(log_cv_, std::chrono::milliseconds(timeout),
                [&]() HANGAR_REQUIRES(log_mu_) { return log_waiting_[id].chunk.has_value(); });
  auto chunk = std::move(log_waiting_[id].chunk);
  log_waiting_.erase(id);
  if (!got)
    return Status::Unavailable("node " + node +
                               " did not answer for the logs; is its agent connected?");
  return std::move(*chunk);
}

uint64_t AgentHub::RequestLog(const std::string& node, const std::string& task_id, uint64_t offset,
                              bool stderr_stream, std::function<void(pb::LogChunk)> done) {
  uint64_t id;
  {
    MutexLock l(log_mu_);
    id = next_request_++;
    log_waiting_[id] = LogWait{node, std::nullopt, std::move(done)};
  }
  pb::ControllerMessage m;
  auto* r = m.mutable_log_request();
  r->set_request_id(id);
  r->set_task_id(task_id);
  r->set_offset(offset);
  r->set_stderr(stderr_stream);
  r->set_max_bytes(256 * 1024);
  Send(node, std::move(m));
  return id;
}

void AgentHub::CancelLogRead(uint64_t id) {
  MutexLock l(log_mu_);
  log_waiting_.erase(id);
}

void AgentHub::DeliverLog(const std::string& node, const pb::LogChunk& chunk) {
  std::function<void(pb::LogChunk)> done;
  {
    MutexLock l(log_mu_);
    auto it = log_waiting_.find(chunk.request_id());
    if (it == log_waiting_.end()) return;  // answered too late: the reader gave up
    if (it->second.node != node) {
      // Another node guessing request ids would put its bytes in someone else's `logs -f`.
      Refuse(Refusal::kForeignLog, "node " + node,
             "log bytes for request " + std::to_string(chunk.request_id()) + ", which asked " +
                 it->second.node);
      return;
    }
    if (it->second.done) {
      done = std::move(it->second.done);
      log_waiting_.erase(it);
    } else {
      it->second.chunk = chunk;
    }
  }
  if (done) return done(chunk);
  log_cv_.notify_all();
}

}  // namespace hangar::controller
