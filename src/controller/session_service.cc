#include "controller/session_service.h"

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <deque>

#include "api/body.h"
#include "controller/agent_hub.h"
#include "controller/state_owner.h"

namespace hangar::controller {
namespace {

constexpr uint64_t kAckEvery = 32 * 1024;  // output bytes delivered between acknowledgements

grpc::StatusCode GrpcCode(StatusCode c) {
  switch (c) {
    case StatusCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kPermissionDenied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case StatusCode::kUnauthenticated:
      return grpc::StatusCode::UNAUTHENTICATED;
    case StatusCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    default:
      return grpc::StatusCode::INTERNAL;
  }
}

std::string Metadata(const grpc::CallbackServerContext* ctx, const std::string& key) {
  const auto& md = ctx->client_metadata();
  auto it = md.find(key);
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

// Who is calling, as the REST API decides it (http_api.cc's Authorize): a token with tokens; the
// `hangar dev` token in dev mode; anyone (an admin) with `--auth none`.
StatusOr<Principal> Authenticate(const SessionAuth& auth, const grpc::CallbackServerContext* ctx,
                                 Time now) {
  const std::string header = Metadata(ctx, "authorization");
  if (auth.tokens) return auth.tokens->Authenticate(header, now);
  Principal p;
  p.open = true;
  p.role = Role::kAdmin;
  p.user = Metadata(ctx, "x-hangar-user");
  if (p.user.empty()) p.user = "anonymous";
  if (!auth.dev_token.empty()) {
    const std::string want = "Bearer " + auth.dev_token;
    if (header.size() != want.size() ||
        CRYPTO_memcmp(header.data(), want.data(), want.size()) != 0) {
      return Status::Unauthenticated(
          "this `hangar dev` cluster takes sessions with its per-run token only; the CLI of the "
          "account that "
          "started it finds the token by itself (HANGAR_URL is enough)");
    }
  }
  return p;
}

uint64_t OutputBytes(const pb::SessionOutput& o) { return o.stdout().size() + o.stderr().size(); }

struct Located {
  Status status;
  std::string node, task_id, owner;
};

}  // namespace

class SessionService::Call final
    : public grpc::ServerBidiReactor<pb::SessionClientFrame, pb::SessionOutput> {
 public:
  static Call* Make(SessionService* svc, grpc::CallbackServerContext* ctx) {
    auto call = std::shared_ptr<Call>(new Call(svc, ctx));
    call->self_ = call;
    call->Begin();
    return call.get();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return ClientGone();
    if (!started_) {
      started_ = true;
      if (in_.body_case() != pb::SessionClientFrame::kStart) {
        return FinishWith(Status::InvalidArgument("a session's first frame must be `start`"));
      }
      start_ = in_.start();
      return Locate();
    }
    MutexLock lock(mu_);
    if (in_.body_case() == pb::SessionClientFrame::kInput) {
      pb::SessionInput input = std::move(*in_.mutable_input());
      input.set_ack(0);  // credit comes from what this side delivered, never from the client
      Relay(std::move(input));
    }
    if (!finished_) StartRead(&in_);  // never after Finish
  }

  void OnWriteDone(bool ok) override {
    {
      MutexLock lock(mu_);
      writing_ = false;
      if (ok) {
        uint64_t ack = 0;
        delivered_ += OutputBytes(current_);
        queued_bytes_ -= std::min<size_t>(queued_bytes_, OutputBytes(current_));
        if (delivered_ - acked_ >= kAckEvery || (queue_.empty() && delivered_ > acked_))
          ack = acked_ = delivered_;
        WriteNext();
        if (ack > 0) {
          pb::SessionInput in;
          in.set_ack(ack);
          Relay(std::move(in));
        }
      }
    }
    if (!ok) return ClientGone(/*finish=*/true);
  }

  void OnCancel() override { ClientGone(); }

  void OnDone() override {
    uint64_t id = 0;
    {
      MutexLock lock(mu_);
      id = id_;
    }
    svc_->Forget(id, who_.user);
    self_.reset();  // may delete this: nothing after
  }

  // From the agent (any thread).
  void Deliver(pb::SessionOutput out) HANGAR_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (finished_) return;
    queued_bytes_ += OutputBytes(out);
    if (queued_bytes_ > kMaxQueuedBytes) {  // the agent stopped honouring its window
      queue_.clear();
      pb::SessionOutput end;
      end.set_ended(true);
      end.set_error("the session's output outran its window; it was ended");
      queue_.push_back(std::move(end));
    } else {
      queue_.push_back(std::move(out));
    }
    if (!writing_) WriteNext();
  }

  const std::string& node() const { return node_; }

 private:
  Call(SessionService* svc, grpc::CallbackServerContext* ctx) : svc_(svc), ctx_(ctx) {}

  void Begin() {
    auto who = Authenticate(svc_->auth_, ctx_, svc_->owner_->clock()->Now());
    if (!who.ok()) return FinishWith(who.status());
    who_ = *who;
    peer_ = AgentHub::PeerAddress(ctx_->peer());  // the context is gone once the call is
    MutexLock lock(mu_);
    if (!finished_) StartRead(&in_);
  }

  // Whether who_ may open this session, and where the task runs (on the state thread).
  static Located Decide(const ClusterState& st, const Principal& who,
                        const pb::SessionStart& start) {
    Located out;
    auto job = st.GetJob(start.job_id());
    if (!job.ok()) return {job.status()};
    out.owner = job->user;
    const std::string what = start.attach()     ? "attach to"
                             : start.port() > 0 ? "forward a port of"
                                                : "exec into";
    if (!who.open && who.role != Role::kAdmin && job->user != who.user) {
      return {Status::PermissionDenied(
          "you may not " + what + " job " + std::to_string(start.job_id()) + ": it is " +
          job->user + "'s, and " + who.Describe() +
          " may open sessions only on their own jobs (an admin may on any job, "
          "recorded in the audit log)")};
    }
    if (!start.attach() && job->state != "running") {
      return {Status::FailedPrecondition("job " + std::to_string(start.job_id()) + " is " +
                                         job->state + "; `hangar " +
                                         (start.port() > 0 ? "port-forward" : "exec") +
                                         "` reaches the tasks of a running job only")};
    }
    if (job->state == "pending") {
      return {Status::FailedPrecondition("job " + std::to_string(start.job_id()) +
                                         " has not started (" + job->reason +
                                         "); attach once it runs")};
    }
    auto where = st.LocateTask(start.job_id(), start.task_index());
    if (!where.ok()) return {where.status()};
    out.node = where->first;
    out.task_id = where->second;
    if (Status can = st.AgentCan(out.node, AgentFeature::kSessions); !can.ok()) return {can};
    return out;
  }

  void Locate() {
    auto self = self_;
    svc_->owner_->Post([self](ClusterState& st, Effects*, StateOwner::AfterCommit* after) {
      auto found = std::make_shared<Located>(Decide(st, self->who_, self->start_));
      after->push_back([self, found] { self->Open(self, *found); });
    });
  }

  // `self`, not self_: the call may have finished, and OnDone dropped self_, meanwhile.
  void Open(const std::shared_ptr<Call>& self, const Located& where) HANGAR_EXCLUDES(mu_) {
    Audit(where);
    if (!where.status.ok()) return FinishWith(where.status);
    node_ = where.node;
    std::string why;
    const uint64_t id = svc_->Register(self, About(), &why);
    if (id == 0) return FinishWith(Status::ResourceExhausted(why));
    pb::ControllerMessage m;
    pb::SessionOpen* open = m.mutable_session_open();
    open->set_session_id(id);
    open->set_task_id(where.task_id);
    *open->mutable_start() = start_;
    // Under mu_: the agent's answer may finish the call at once (a task that has ended), and no
    // read may start after Finish; the client's input goes to the agent only after the opening.
    MutexLock lock(mu_);
    if (finished_) {  // the client left while the task was looked for
      svc_->Forget(id, who_.user);
      return;
    }
    id_ = id;
    svc_->hub_->Send(node_, std::move(m));
    StartRead(&in_);
  }

  OpenSession About() const {
    OpenSession a;
    a.job = start_.job_id();
    a.task = start_.task_index();
    a.user = who_.user;
    a.kind = start_.attach() ? "attach" : start_.port() > 0 ? "port-forward" : "exec";
    if (start_.port() > 0) {
      a.program = std::to_string(start_.port());
    } else if (!start_.attach() && start_.argv_size() > 0) {
      a.program = start_.argv(0);
    }
    a.since = svc_->owner_->clock()->Now();
    return a;
  }

  // Every opening is recorded, refusals with their reason; so is an admin's on another's job.
  void Audit(const Located& where) {
    AuditRow row;
    row.time = svc_->owner_->clock()->Now();
    row.user = who_.user;
    row.role = who_.open ? "admin (no tokens)" : std::string(RoleName(who_.role));
    row.method = "SESSION";
    row.path = "/v1/jobs/" + std::to_string(start_.job_id()) +
               (start_.attach()     ? "/attach"
                : start_.port() > 0 ? "/port-forward"
                                    : "/exec") +
               "?task=" + std::to_string(start_.task_index());
    if (start_.port() > 0) row.path += "&port=" + std::to_string(start_.port());
    if (!start_.attach() && start_.port() == 0 && start_.argv_size() > 0)
      row.path += "&program=" + start_.argv(0);
    row.remote = peer_;
    row.status = where.status.ok() ? 200 : api::HttpStatusFor(where.status);
    row.message = where.status.ok()
                      ? (where.owner != who_.user ? "opened on " + where.owner + "'s job" : "")
                      : where.status.message();
    svc_->owner_->RecordAudit(std::move(row));
  }

  // To the agent, as session id_ (nothing before the session is opened). Under mu_, as the opening
  // is: a client that leaves while it is opened has its close sent after the opening.
  void Relay(pb::SessionInput in) HANGAR_REQUIRES(mu_) {
    if (id_ == 0) return;
    in.set_session_id(id_);
    pb::ControllerMessage m;
    *m.mutable_session_input() = std::move(in);
    svc_->hub_->Send(node_, std::move(m));
  }

  void ClientGone(bool finish = true) HANGAR_EXCLUDES(mu_) {
    pb::SessionInput close;
    close.set_close(true);
    MutexLock lock(mu_);
    Relay(std::move(close));
    if (finished_ || !finish) return;
    finished_ = true;
    queue_.clear();
    Finish(grpc::Status::CANCELLED);
  }

  void FinishWith(const Status& s) HANGAR_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (finished_) return;
    finished_ = true;
    Finish(grpc::Status(GrpcCode(s.code()), s.message()));
  }

  void WriteNext() HANGAR_REQUIRES(mu_) {
    if (queue_.empty() || finished_) return;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    current_.set_session_id(0);  // the node's number for it is none of the client's business
    if (current_.ended()) {      // the last frame: written and finished in one
      finished_ = true;
      StartWriteAndFinish(&current_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    }
    writing_ = true;
    StartWrite(&current_);
  }

  SessionService* const svc_;
  grpc::CallbackServerContext* const ctx_;
  Principal who_;
  std::string peer_;
  pb::SessionClientFrame in_;  // the read in flight (reads are one at a time)
  bool started_ = false;       // reads' own
  pb::SessionStart start_;
  // Set once the call is located, before anything reads it from other threads (FromAgent and
  // NodeGone find the call only once it is registered).
  std::string node_;
  Mutex mu_;
  uint64_t id_ HANGAR_GUARDED_BY(mu_) = 0;  // set once the session is opened on the agent
  std::deque<pb::SessionOutput> queue_ HANGAR_GUARDED_BY(mu_);
  size_t queued_bytes_ HANGAR_GUARDED_BY(mu_) = 0;
  pb::SessionOutput current_ HANGAR_GUARDED_BY(mu_);  // the write in flight
  bool writing_ HANGAR_GUARDED_BY(mu_) = false;
  bool finished_ HANGAR_GUARDED_BY(mu_) = false;
  uint64_t delivered_ HANGAR_GUARDED_BY(mu_) = 0, acked_ HANGAR_GUARDED_BY(mu_) = 0;
  std::shared_ptr<Call> self_;  // the call keeps itself until OnDone
};

SessionService::SessionService(StateOwner* owner, AgentHub* hub, SessionAuth auth)
    : owner_(owner), hub_(hub), auth_(std::move(auth)) {}

SessionService::~SessionService() = default;

grpc::ServerBidiReactor<pb::SessionClientFrame, pb::SessionOutput>* SessionService::Open(
    grpc::CallbackServerContext* context) {
  return Call::Make(this, context);
}

uint64_t SessionService::Register(const std::shared_ptr<Call>& call, OpenSession about,
                                  std::string* why) {
  const std::string& user = about.user;
  MutexLock lock(mu_);
  if (calls_.size() >= static_cast<size_t>(kMaxSessions)) {
    *why = "the controller holds " + std::to_string(kMaxSessions) +
           " sessions, its most; try again when some end";
    return 0;
  }
  if (per_user_[user] >= kMaxSessionsPerUser) {
    *why = user + " has " + std::to_string(kMaxSessionsPerUser) +
           " sessions open, the most one user may; end some";
    return 0;
  }
  ++per_user_[user];
  const uint64_t id = next_id_++;
  calls_[id] = call;
  about.id = id;
  about_[id] = std::move(about);
  return id;
}

void SessionService::Forget(uint64_t id, const std::string& user) {
  MutexLock lock(mu_);
  if (id == 0 || !calls_.erase(id)) return;
  about_.erase(id);
  if (--per_user_[user] <= 0) per_user_.erase(user);
}

void SessionService::FromAgent(const std::string& node, pb::SessionOutput out) {
  std::shared_ptr<Call> call;
  {
    MutexLock lock(mu_);
    auto it = calls_.find(out.session_id());
    if (it == calls_.end()) return;  // ended meanwhile
    call = it->second;
  }
  // A node speaks only for the sessions it was asked to open.
  if (call->node() != node) {
    spdlog::warn("sessions: node {} sent output for a session of node {}; ignored", node,
                 call->node());
    return;
  }
  call->Deliver(std::move(out));
}

void SessionService::NodeGone(const std::string& node) {
  std::vector<std::shared_ptr<Call>> lost;
  {
    MutexLock lock(mu_);
    for (const auto& [id, call] : calls_) {
      if (call->node() == node) lost.push_back(call);
    }
  }
  for (const auto& call : lost) {
    pb::SessionOutput end;
    end.set_ended(true);
    end.set_exit_code(-1);
    end.set_error("node " + node + "'s agent disconnected from the controller; the session ended");
    call->Deliver(std::move(end));
  }
}

size_t SessionService::open() const {
  MutexLock lock(mu_);
  return calls_.size();
}

std::vector<SessionService::OpenSession> SessionService::OpenOn(uint64_t job) const {
  std::vector<OpenSession> out;
  MutexLock lock(mu_);
  for (const auto& [id, a] : about_) {  // ids grow with time: oldest first
    if (a.job == job) out.push_back(a);
  }
  return out;
}

}  // namespace hangar::controller
