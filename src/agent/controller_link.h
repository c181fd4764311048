// The agent's end of its one stream to the controller (Agent::Session and every thread that
// writes): which controller of the list to try next, the stream in use and its call (one lock
// every writer takes), checkpoint reports held while no stream is up, how often each task's
// progress goes out, the newest leadership epoch seen, the controller store this agent serves
// (<state dir>/store_id), and the heartbeat's interval and sequence.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

#include "common/mutex.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::agent {

namespace pb = ::hangar::agent::v1;

class ControllerLink {
 public:
  using Stream = grpc::ClientReaderWriterInterface<pb::AgentMessage, pb::ControllerMessage>;

  // `controllers`: host:port, or a comma-separated list tried in turn.
  ControllerLink(std::string node, std::string state_dir, std::string controllers);

  // Init: the store this agent served last ("" when none yet).
  void LoadStoreId();
  const std::string& store_id() const { return store_id_; }  // Init's, then Session's thread
  // --forget-store: no store, and no report held for one.
  void ForgetStore() HANGAR_EXCLUDES(mu_);
  // The next controller of the list to connect to (round robin).
  std::string NextController();

  // A stream is up: writers use it from now on. Returns the checkpoint reports held while none
  // was, to be sent first (at most one per task, the latest).
  std::map<std::string, pb::CheckpointDone> Attach(Stream* stream, grpc::ClientContext* call)
      HANGAR_EXCLUDES(mu_);
  void Detach() HANGAR_EXCLUDES(mu_);
  // Cancels the call in use, if any (wakes a Session blocked reading).
  void Cancel() HANGAR_EXCLUDES(mu_);
  // Writes `m` on the stream in use; false when none is up or the write failed.
  bool Write(const pb::AgentMessage& m) HANGAR_EXCLUDES(mu_);
  // Writes a checkpoint report, or holds it for the next Attach (the latest per task).
  bool WriteOrHold(const pb::CheckpointDone& done) HANGAR_EXCLUDES(mu_);
  // Whether a progress report of `task_id` taken at `now_ns` (monotonic) goes out: at most one
  // per task per `every_ns`. Forget drops a task's entry (it ended).
  bool ProgressDue(const std::string& task_id, int64_t now_ns, int64_t every_ns)
      HANGAR_EXCLUDES(mu_);
  void ForgetProgress(const std::string& task_id) HANGAR_EXCLUDES(mu_);

  // Whether to act on a message from `controller`: not from a deposed leader (an epoch older
  // than the newest seen), nor from a controller on another store than the one this agent
  // serves (the first it hears of is recorded). Session's thread only.
  bool Accept(const pb::ControllerMessage& in, const std::string& controller);

  int64_t heartbeat_ms() const { return heartbeat_ms_.load(); }
  void set_heartbeat_ms(int64_t ms) { heartbeat_ms_ = ms; }
  uint64_t NextHeartbeatSeq() { return ++heartbeat_seq_; }

 private:
  const std::string node_, state_dir_, controllers_;
  Mutex mu_;
  Stream* stream_ HANGAR_GUARDED_BY(mu_) = nullptr;
  grpc::ClientContext* call_ HANGAR_GUARDED_BY(mu_) = nullptr;
  // Checkpoint reports made while no stream was up, by task.
  std::map<std::string, pb::CheckpointDone> held_ HANGAR_GUARDED_BY(mu_);
  std::map<std::string, int64_t> progress_sent_ HANGAR_GUARDED_BY(mu_);  // by task, monotonic ns
  std::atomic<int64_t> heartbeat_ms_{1000};
  std::atomic<uint64_t> heartbeat_seq_{0};
  // Session's thread only (and Init's before it).
  size_t next_controller_ = 0;
  int64_t newest_epoch_ = 0;
  std::string store_id_;
};

}  // namespace hangar::agent
