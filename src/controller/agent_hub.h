// AgentHub: the controller's end of the agent channel. One gRPC bidirectional stream per agent,
// served with gRPC's callback API (a reactor per stream, no thread per agent). Incoming messages
// become commands for the state owner; Send() queues messages to a node's stream.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "controller/auth.h"
#include "controller/state_owner.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::controller {

class AgentHub final : public pb::AgentChannel::CallbackService, public MessageSink {
 public:
  explicit AgentHub(StateOwner* owner) : owner_(owner) {}
  // With tokens, an agent must present a node token for the node it registers as (gRPC metadata
  // "authorization: Bearer hgr_..."); without, any agent may connect.
  void set_tokens(const TokenBook* tokens) { tokens_ = tokens; }
  ~AgentHub() override;

  grpc::ServerBidiReactor<pb::AgentMessage, pb::ControllerMessage>* Connect(
      grpc::CallbackServerContext* context) override;

  // Thread-safe; dropped when the node has no stream (reconciliation resends what matters).
  void Send(const std::string& node, pb::ControllerMessage message) override;

  // Asks the node's agent for log bytes of a task and waits up to `timeout` for the answer.
  StatusOr<pb::LogChunk> ReadLog(const std::string& node, const std::string& task_id, uint64_t offset,
                                 bool stderr_stream, Duration timeout);

  size_t connected() const;
  int64_t heartbeats() const { return heartbeats_.load(); }
  int64_t messages_in() const { return messages_in_.load(); }

 private:
  class Stream;
  friend class Stream;
  void Attach(const std::string& node, std::shared_ptr<Stream> s);
  void Detach(const std::string& node, Stream* s);
  void DeliverLog(const pb::LogChunk& chunk);

  StateOwner* owner_;
  const TokenBook* tokens_ = nullptr;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Stream>> streams_;
  std::atomic<int64_t> heartbeats_{0};
  std::atomic<int64_t> messages_in_{0};
  // Log requests waiting for their chunk.
  std::mutex log_mu_;
  std::condition_variable log_cv_;
  uint64_t next_request_ = 1;
  std::map<uint64_t, std::optional<pb::LogChunk>> log_waiting_;
};

}  // namespace hangar::controller
