// SessionService: the controller's end of interactive sessions (docs/interactive.md). The CLI
// opens Sessions.Open, a gRPC bidirectional stream on the controller's session port (TLS with the
// API's certificate when the API uses TLS), with its token in the "authorization" metadata as on
// every API call. Its first frame names the job and task; the service checks the token and the
// rule -- the job's owner, or an admin -- records the opening in the audit log (refusals too),
// finds the task's node, and relays the session over that node's agent channel: frames in as
// SessionInput, the agent's SessionOutput back. No socket opens on a node, and no session holds
// a thread: both streams are gRPC's callback reactors.
//
// Flow: the agent stops reading a session's program while SessionHost::kWindow bytes it sent are
// unacknowledged; the service acknowledges what the client's stream has taken, so a slow client
// slows its program, never the controller's memory.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/time.h"
#include "controller/state/auth.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::controller {

namespace pb = ::hangar::agent::v1;
class AgentHub;
class StateOwner;

// What the agent hub hands to the sessions: a session's output from `node`, and the loss of a
// node's stream (its sessions end).
class SessionRelay {
 public:
  virtual ~SessionRelay() = default;
  virtual void FromAgent(const std::string& node, pb::SessionOutput out) = 0;
  virtual void NodeGone(const std::string& node) = 0;
};

struct SessionAuth {
  const TokenBook* tokens = nullptr;  // null: no tokens (`--auth none` or `--auth dev`)
  std::string dev_token;              // `--auth dev`: the one token every call must show
};

class SessionService final : public pb::Sessions::CallbackService, public SessionRelay {
 public:
  static constexpr int kMaxSessions = 4096;  // open at once; one more is refused
  static constexpr int kMaxSessionsPerUser = 64;
  static constexpr size_t kMaxQueuedBytes = 1u << 20;  // output queued for one slow client

  SessionService(StateOwner* owner, AgentHub* hub, SessionAuth auth);
  ~SessionService() override;

  grpc::ServerBidiReactor<pb::SessionClientFrame, pb::SessionOutput>* Open(
      grpc::CallbackServerContext* context) override;
  void FromAgent(const std::string& node, pb::SessionOutput out) override HANGAR_EXCLUDES(mu_);
  void NodeGone(const std::string& node) override HANGAR_EXCLUDES(mu_);

  size_t open() const HANGAR_EXCLUDES(mu_);

  // One open session, as GET /v1/jobs/ID/sessions and the dashboard's job page show it.
  struct OpenSession {
    uint64_t id = 0;
    uint64_t job = 0;
    uint32_t task = 0;
    std::string user;
    std::string kind;     // "attach" (the task's terminal), "exec" or "port-forward"
    std::string program;  // exec: its program; port-forward: the port
    Time since = 0;
  };
  // The sessions open on `job` now, oldest first.
  std::vector<OpenSession> OpenOn(uint64_t job) const HANGAR_EXCLUDES(mu_);

 private:
  class Call;
  friend class Call;
  // Registers a located call under a new id; 0 when over a cap (then `why` says which).
  uint64_t Register(const std::shared_ptr<Call>& call, OpenSession about, std::string* why)
      HANGAR_EXCLUDES(mu_);
  void Forget(uint64_t id, const std::string& user) HANGAR_EXCLUDES(mu_);

  StateOwner* const owner_;
  AgentHub* const hub_;
  const SessionAuth auth_;
  mutable Mutex mu_;
  uint64_t next_id_ HANGAR_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::shared_ptr<Call>> calls_ HANGAR_GUARDED_BY(mu_);  // by session id
  std::map<uint64_t, OpenSession> about_ HANGAR_GUARDED_BY(mu_);  // by session id, as calls_
  std::map<std::string, int> per_user_ HANGAR_GUARDED_BY(mu_);
};

}  // namespace hangar::controller
