// AgentHub: the controller's end of the agent channel. One gRPC bidirectional stream per agent,
// served with gRPC's callback API (a reactor per stream, no thread per agent). Incoming messages
// become commands for the state owner; Send() queues messages to a node's stream.
#pragma once

#include <grpcpp/grpcpp.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "common/mutex.h"
#include "controller/session_service.h"
#include "controller/state/auth.h"
#include "controller/state_owner.h"
#include "controller/step_sink.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::controller {

class AgentHub final : public pb::AgentChannel::CallbackService, public MessageSink {
 public:
  explicit AgentHub(StateOwner* owner) : owner_(owner) {}
  // With tokens, an agent must present a node token for the node it registers as (gRPC metadata
  // "authorization: Bearer hgr_..."); without, any agent may connect.
  void set_tokens(const TokenBook* tokens) { wiring_.tokens = tokens; }
  // With mutual TLS, an agent's certificate names its node (its common name): it may register as
  // that node only.
  void set_require_client_certs(bool on) { wiring_.require_certs = on; }
  // Where agents' session output goes (session_service.h), and who hears of a node's stream
  // ending. Set before the server starts; null: sessions are not served.
  void set_session_relay(SessionRelay* relay) { wiring_.sessions = relay; }
  // Where agents' step requests and their steps' session output go (step_relay.h). Set before the
  // server starts; null: srun inside allocations is not served.
  void set_step_sink(StepSink* steps) { wiring_.steps = steps; }
  // Where the output of the services' command probes goes: sessions whose id `is_probe` says is
  // one of theirs (service/command_probe.h). Set before the server starts; null: none.
  void set_probe_relay(SessionRelay* probes, bool (*is_probe)(uint64_t)) {
    wiring_.probes = probes;
    wiring_.is_probe = is_probe;
  }
  // The leadership epoch stamped on every message to agents; 0: no lease.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  // The store's identity, stamped on every message to agents; an agent that last
  // served another store is refused at Register. Set before the server starts.
  void set_store_id(std::string id) { store_id_ = std::move(id); }
  // Nodes' management addresses (cluster.yaml): such a node's agent may register only
  // over a connection from that address. Set before the server starts.
  void set_management_addresses(std::map<std::string, std::string> by_node);
  ~AgentHub() override;

  grpc::ServerBidiReactor<pb::AgentMessage, pb::ControllerMessage>* Connect(
      grpc::CallbackServerContext* context) override;

  // Thread-safe; dropped when the node has no stream (reconciliation resends what matters).
  void Send(const std::string& node, pb::ControllerMessage message) override HANGAR_EXCLUDES(mu_);

  // Asks the node's agent for log bytes of a task and waits up to `timeout` for the answer.
  StatusOr<pb::LogChunk> ReadLog(const std::string& node, const std::string& task_id,
                                 uint64_t offset, bool stderr_stream, Duration timeout)
      HANGAR_EXCLUDES(mu_, log_mu_);
  // Asks as ReadLog does, without waiting: `done` runs once with the answer, on the thread that
  // received it (keep it short), unless CancelLogRead came first. Returns the request's id.
  uint64_t RequestLog(const std::string& node, const std::string& task_id, uint64_t offset,
                      bool stderr_stream, std::function<void(pb::LogChunk)> done)
      HANGAR_EXCLUDES(mu_, log_mu_);
  // Gives up on a RequestLog: an answer that comes later is dropped.
  void CancelLogRead(uint64_t id) HANGAR_EXCLUDES(log_mu_);

  size_t connected() const HANGAR_EXCLUDES(mu_);
  int64_t heartbeats() const { return heartbeats_.load(); }
  int64_t messages_in() const { return messages_in_.load(); }

  // Messages refused since the start, by why: before Register ("unregistered"), a second Register
  // on one stream ("reregister"), a report on a task placed elsewhere ("foreign_task"), log bytes
  // nobody asked that node for ("foreign_log"). Each refusal is logged; the stream is closed for
  // the first two; an agent that last served another store ("foreign_store") is refused at
  // Register, and its stream closed; so is one that connects from an address other than its
  // node's management address ("wrong_network").
  enum class Refusal : uint8_t {
    kUnregistered,
    kReregister,
    kForeignTask,
    kForeignLog,
    kForeignStore,
    kWrongNetwork,
    kCount
  };
  // The IP address of a gRPC peer ("ipv4:10.0.0.1:5000", "ipv6:[::1]:5000"), in canonical form
  // (an IPv4-mapped IPv6 address as IPv4); "" when it is not an IP peer.
  static std::string PeerAddress(const std::string& peer);
  // `address` in canonical form ("" when it is not an IP address).
  static std::string CanonicalAddress(const std::string& address);
  static const char* RefusalName(Refusal r);
  int64_t refused(Refusal r) const { return refused_[static_cast<size_t>(r)].load(); }
  // A stream must send Register within this of opening (set before the server starts); 0: no limit.
  void set_register_timeout(Duration d) { wiring_.register_timeout = d; }
  // Closes the streams that opened more than the register timeout before `now` and have not
  // registered (a client that holds one open without a word). Returns how many. Thread-safe.
  size_t CloseUnregistered(Time now) HANGAR_EXCLUDES(mu_);
  // A token was revoked: every stream that authenticated with it is closed now (its agent's
  // reconnection is refused, since the token is gone). Returns how many were closed.
  size_t CloseStreamsOf(const std::string& token_id) HANGAR_EXCLUDES(mu_);

 private:
  class Stream;
  friend class Stream;
  void Attach(const std::string& node, std::shared_ptr<Stream> s) HANGAR_EXCLUDES(mu_);
  void Detach(const std::string& node, Stream* s) HANGAR_EXCLUDES(mu_);
  // Closes `stream` with `why` if it is still the node's current stream.
  void RejectStream(const std::string& node, const Stream* stream, const std::string& why)
      HANGAR_EXCLUDES(mu_);
  void DeliverLog(const std::string& node, const pb::LogChunk& chunk) HANGAR_EXCLUDES(log_mu_);
  void Refuse(Refusal r, const std::string& who, const std::string& why);
  // True the first time a node's agent is refused for serving another store.
  bool FirstForeignStoreRefusal(const std::string& node) HANGAR_EXCLUDES(mu_);

  StateOwner* owner_;
  // What the controller wires in before the server starts (the set_... calls above).
  struct Wiring {
    SessionRelay* sessions = nullptr;
    StepSink* steps = nullptr;
    SessionRelay* probes = nullptr;
    bool (*is_probe)(uint64_t) = nullptr;
    const TokenBook* tokens = nullptr;
    bool require_certs = false;
    Duration register_timeout = 0;
  } wiring_;
  std::atomic<int64_t> epoch_{0};
  std::string store_id_;
  std::map<std::string, std::string> management_;  // node -> canonical address
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Stream>> streams_ HANGAR_GUARDED_BY(mu_);
  std::set<std::string> foreign_store_nodes_ HANGAR_GUARDED_BY(mu_);
  // Streams not registered yet, with when they opened.
  std::map<const Stream*, std::pair<std::weak_ptr<Stream>, Time>> unregistered_
      HANGAR_GUARDED_BY(mu_);
  std::atomic<int64_t> heartbeats_{0};
  std::atomic<int64_t> messages_in_{0};
  std::array<std::atomic<int64_t>, static_cast<size_t>(Refusal::kCount)> refused_{};
  // Log requests waiting for their chunk.
  Mutex log_mu_;
  std::condition_variable log_cv_;
  uint64_t next_request_ HANGAR_GUARDED_BY(log_mu_) = 1;
  struct LogWait {
    std::string node;  // the only node whose answer is taken
    std::optional<pb::LogChunk> chunk;
    std::function<void(pb::LogChunk)> done;  // RequestLog's: called instead of filling `chunk`
  };
  std::map<uint64_t, LogWait> log_waiting_ HANGAR_GUARDED_BY(log_mu_);
};

}  // namespace hangar::controller
