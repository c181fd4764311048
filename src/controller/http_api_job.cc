// The REST API's routes for one job (docs/api.md): POST /v1/jobs (submit), GET /v1/jobs/ID, its
// cancel, GET /v1/jobs/ID/explain and GET /v1/jobs/ID/logs (read or followed). Lists, bulk
// operations and accounting are http_api_jobs.cc's.
#include <httplib.h>

#include <algorithm>

#include "api/body.h"
#include "api/views.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "controller/image_resolver.h"
#include "controller/log_follow.h"
#include "controller/service/service_controller.h"
#include "controller/state/cluster_state.h"
#include "controller/state_owner.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

namespace {

// A job a submission asks for, once it passed AdmitJob.
struct Admitted {
  job::JobSpec spec;
  long count = 1;  // ?count=N copies
  Status pin;      // not ok (Unavailable): its registry is down; accepted, it waits to be pinned
};

// Every rule a submitted job must pass before the state thread sees it, in one place: readable
// text, the job language (job::ParseJobSpec: fields, values, the rules any cluster keeps),
// absolute workdirs, the mounts and file roots this cluster allows, a command in every group, its
// images pinned to digests (off the state thread: it asks the registry) and ?count=. The submitter
// and the Unix account its tasks run as come from `who`, never from the file. What needs the
// cluster's state (the queue and who may use it, the per-user caps, the node names) is checked
// on the state thread (ClusterState::MaySubmit, MayQueue, Submit).
StatusOr<Admitted> AdmitJob(StateOwner& owner, const httplib::Request& req, const Principal& who) {
  Status readable = api::CheckUtf8(req.body, "the job spec");
  if (readable.ok()) readable = api::CheckNesting(req.body, "the job spec");
  HANGAR_RETURN_IF_ERROR(readable);
  HANGAR_ASSIGN_OR_RETURN(job::JobSpec spec, job::ParseJobSpec(req.body, "request body"));
  HANGAR_RETURN_IF_ERROR(job::RequireAbsoluteWorkdirs(spec));
  const bool mounts =
      std::any_of(spec.tasks.begin(), spec.tasks.end(),
                  [](const job::TaskGroupSpec& g) { return !g.container.mounts.empty(); });
  if (mounts) {
    auto allowed = owner.Call<std::vector<std::string>>(
        [](ClusterState& st, Effects*) { return st.options().mounts_allowed; });
    HANGAR_RETURN_IF_ERROR(CheckMounts(spec, allowed));
  }
  if (HasFileSources(spec)) {  // file:// artifacts: only under the cluster's data.file_roots
    auto roots = owner.Call<std::vector<std::string>>(
        [](ClusterState& st, Effects*) { return st.options().data.file_roots; });
    HANGAR_RETURN_IF_ERROR(CheckFileSources(spec, roots));
  }
  // A registry that is down does not lose the submission: the job is accepted with its tags and
  // waits, unplaced, until the pinner has pinned them (ClusterState::OnPinned).
  Status pin = PinImages(&spec, ImageResolverOptions{});
  if (!pin.ok() && pin.code() != StatusCode::kUnavailable) return pin;
  for (const auto& t : spec.tasks) {
    if (t.command.empty()) {
      return Status::InvalidArgument("task group '" + t.name +
                                     "' has no command; give it command: [program, args...]");
    }
  }
  spec.user = who.user;            // who submits, never what the spec says
  spec.run_as = TaskAccount(who);  // and the Unix account its tasks run as
  // A job array: `?count=N` submits N copies in one commit (a sweep, a benchmark's queue).
  // Bounded, so that one request cannot hold the state thread (and every other caller) for
  // seconds: larger arrays are several requests.
  long count = 1;
  if (req.has_param("count")) {
    auto n = api::ParseCount(req.get_param_value("count"), "count", 1, HttpApi::kMaxSubmitCount);
    if (!n.ok()) {
      return Status::InvalidArgument(n.status().message() +
                                     "; submit larger arrays in several requests");
    }
    count = static_cast<long>(*n);
    if (count > 1 && !spec.array.empty()) {
      return Status::InvalidArgument(
          "a job with array: is submitted once (it becomes one job per element); drop ?count=");
    }
  }
  return Admitted{std::move(spec), count, pin};
}

}  // namespace

bool HttpApi::ReplyFromReadModel(const Principal& who, uint64_t id, httplib::Response& res) {
  if (who.role == Role::kQueueAdmin) return false;  // whose queues: the state knows
  auto snapshot = owner_->PublishedJobs();
  const PublishedJob* job = snapshot->Find(id);
  if (!job) {
    Reply(res, Status::NotFound("job " + std::to_string(id) +
                                " does not exist; `hangar jobs` lists them"));
    return true;
  }
  const std::string& owner = job->user();
  if (!MaySeeByRole(who, owner).value_or(false)) {
    Reply(res, JobAccessRefused(who, Permission::kJobsRead, id, owner, job->spec->spec.queue));
    return true;
  }
  // Another's job whose environment values are hidden from the caller: the parsing path.
  if (!who.open && who.role != Role::kAdmin && who.user != owner) return false;
  res.status = 200;
  res.set_content(JobJsonWithSpec(*job) + "\n", "application/json");
  return true;
}

void HttpApi::OneJobRoutes() {
  httplib::Server& s = *server_;
  BoundedPost(
      s, "/v1/jobs",
      Handle(Permission::kJobsSubmit, [this](const Principal& who, const httplib::Request& req,
                                             httplib::Response& res) {
        auto admitted = AdmitJob(*owner_, req, who);
        if (!admitted.ok()) return Reply(res, admitted.status());
        auto& [spec, count, pin] = *admitted;
        // Idempotency-Key: a retry of a submission whose answer was lost gets that answer again
        // (marked by the Idempotent-Replayed header), not a second job; the key is remembered in
        // the same commit as the jobs.
        const std::string key =
            req.has_header("Idempotency-Key") ? req.get_header_value("Idempotency-Key") : "";
        if (key.size() > 200 || !api::CheckUtf8(key, "the key").ok()) {
          return Reply(
              res, Status::InvalidArgument(
                       "Idempotency-Key must be at most 200 characters of UTF-8, such as a UUID"));
        }
        const SubmissionDigest digest = SubmissionDigest::Of(req.body, count);
        struct Submitted {
          nlohmann::json answer;
          bool replayed = false;
          std::optional<Status> over_cap;  // --max-queued-per-user: answered 429
        };
        auto done = owner_->Call<StatusOr<Submitted>>([spec = std::move(spec), count = count, this,
                                                       p = who, &key, &digest](
                                                          ClusterState& st,
                                                          Effects* fx) -> StatusOr<Submitted> {
          const Time now = owner_->clock()->Now();
          if (!key.empty()) {
            HANGAR_ASSIGN_OR_RETURN(auto before, st.RecallSubmission(p.user, key, digest, now));
            if (before) return Submitted{*before, true};
          }
          HANGAR_RETURN_IF_ERROR(st.MaySubmit(p, spec.queue));
          const long elements =
              spec.array.empty() ? count : static_cast<long>(spec.array.indices.size());
          if (Status cap = st.MayQueue(p.user, elements); !cap.ok())
            return Submitted{{}, false, cap};
          if (!spec.array.empty()) {
            HANGAR_ASSIGN_OR_RETURN(std::vector<sched::JobId> ids, st.SubmitArray(spec, now, fx));
            nlohmann::json answer = {{"id", ids.front()},     {"array_id", ids.front()},
                                     {"count", ids.size()},   {"first_id", ids.front()},
                                     {"last_id", ids.back()}, {"state", "pending"}};
            if (!key.empty()) st.RememberSubmission(p.user, key, digest, answer, now, fx);
            return Submitted{answer, false};
          }
          sched::JobId first = 0, last = 0;
          for (long i = 0; i < count; ++i) {
            HANGAR_ASSIGN_OR_RETURN(last, st.Submit(spec, now, fx));
            if (i == 0) first = last;
          }
          nlohmann::json answer = count == 1 ? nlohmann::json{{"id", first}, {"state", "pending"}}
                                             : nlohmann::json{{"first_id", first},
                                                              {"last_id", last},
                                                              {"count", count},
                                                              {"state", "pending"}};
          if (!key.empty()) st.RememberSubmission(p.user, key, digest, answer, now, fx);
          return Submitted{answer, false};
        });
        if (!done.ok()) return Reply(res, done.status());
        if (done->over_cap) return Reply(res, 429, api::ErrorJson(*done->over_cap));
        if (done->replayed) {
          res.set_header("Idempotent-Replayed", "true");
          return Reply(res, 201, done->answer);
        }
        const long submitted =
            done->answer.contains("count") ? done->answer["count"].get<long>() : 1;
        for (long i = 0; i < submitted; ++i) metrics_->CountSubmit();
        if (!pin.ok()) {
          done->answer["warning"] =
              pin.message() +
              "; the job is queued and waits until its image can be pinned to a digest";
          if (pinner_) pinner_->Wake();
        }
        Reply(res, 201, done->answer);
      }));
  s.Get(R"(/v1/jobs/(\d+))",
        Handle(Permission::kJobsRead,
               [this](const Principal& who, const httplib::Request& req, httplib::Response& res) {
                 auto id = IdOf(req);
                 if (!id.ok()) return Reply(res, id.status());
                 if (ReplyFromReadModel(who, *id, res)) return;
                 auto job = owner_->Call<StatusOr<api::JobView>>(
                     [&](ClusterState& st, Effects*) -> StatusOr<api::JobView> {
                       HANGAR_RETURN_IF_ERROR(st.MayAccessJob(who, *id, Permission::kJobsRead));
                       return st.GetJob(*id);
                     });
                 if (!job.ok()) return Reply(res, job.status());
                 // A job's environment may hold its owner's secrets (API keys): its values are for
                 // the owner and admins; a viewer or queue-admin sees the names only.
                 if (!who.open && who.role != Role::kAdmin && who.user != job->user &&
                     job->spec.is_object()) {
                   for (auto& group : job->spec["tasks"]) {
                     if (!group.contains("env")) continue;
                     for (auto& [name, value] : group["env"].items())
                       value = "(hidden: only " + job->user + " and admins see it)";
                   }
                 }
                 Reply(res, 200, api::ToJson(*job));
               }));
  auto cancel =
      Handle(Permission::kJobsCancel,
             [this](const Principal& who, const httplib::Request& req, httplib::Response& res) {
               auto id = IdOf(req);
               if (!id.ok()) return Reply(res, id.status());
               Status st = owner_->Call<Status>([&](ClusterState& s, Effects* fx) {
                 HANGAR_RETURN_IF_ERROR(s.MayAccessJob(who, *id, Permission::kJobsCancel));
                 return s.Cancel(*id, owner_->clock()->Now(), fx);
               });
               if (!st.ok()) return Reply(res, st);
               Reply(res, 200, {{"id", *id}, {"state", "cancelled"}});
             });
  BoundedPost(s, R"(/v1/jobs/(\d+)/cancel)", cancel);
  s.Delete(R"(/v1/jobs/(\d+))", cancel);
  s.Get(R"(/v1/jobs/(\d+)/explain)",
        Handle(Permission::kJobsRead, [this](const Principal& who, const httplib::Request& req,
                                             httplib::Response& res) {
          auto id = IdOf(req);
          if (!id.ok()) return Reply(res, id.status());
          Time estimated_start = kNever;  // the head job's reservation, when the scheduler made one
          nlohmann::json replaced;        // its nodes replaced in place from spares (spare_pool.h)
          auto job = owner_->Call<StatusOr<api::JobView>>(
              [&](ClusterState& st, Effects*) -> StatusOr<api::JobView> {
                HANGAR_RETURN_IF_ERROR(st.MayAccessJob(who, *id, Permission::kJobsRead));
                const auto& reserved = st.waiting_order().reserved_start;
                if (auto r = reserved.find(*id); r != reserved.end()) estimated_start = r->second;
                replaced = st.spares().Json(*id);
                return st.GetJob(*id);
              });
          if (!job.ok()) return Reply(res, job.status());
          nlohmann::json out = {{"id", job->id},
                                {"name", job->name},
                                {"state", job->state},
                                {"reason", job->reason},
                                {"rule", job->reason_rule},
                                {"attempt", job->attempt},
                                {"message", job->message},
                                {"estimated_start_ms", nullptr}};
          if (job->state == "pending" && estimated_start != kNever)
            out["estimated_start_ms"] = estimated_start;
          if (!job->progress.is_null()) out["progress"] = job->progress;
          if (!replaced.is_null()) out["replaced"] = std::move(replaced);
          if (wiring_.services) {  // a service's replica: `hangar explain` says why the service has
                                   // its count
            if (auto svc = wiring_.services->OwnerOf(job->id)) out["service"] = *svc;
          }
          Reply(res, 200, out);
        }));
  s.Get(R"(/v1/jobs/(\d+)/logs)",
        Handle(Permission::kJobsRead, [this](const Principal& who, const httplib::Request& req,
                                             httplib::Response& res) {
          auto id = IdOf(req);
          auto task = TaskOf(req);
          if (!id.ok()) return Reply(res, id.status());
          if (!task.ok()) return Reply(res, task.status());
          std::optional<uint32_t> attempt;
          if (req.has_param("attempt")) {
            auto n = api::ParseCount(req.get_param_value("attempt"), "attempt", 0, 1'000'000);
            if (!n.ok()) return Reply(res, n.status());
            attempt = static_cast<uint32_t>(*n);
          }
          auto where = owner_->Call<StatusOr<std::pair<std::string, std::string>>>(
              [&](ClusterState& st, Effects*) -> StatusOr<std::pair<std::string, std::string>> {
                HANGAR_RETURN_IF_ERROR(st.MayAccessJob(who, *id, Permission::kJobsRead));
                return st.LocateTask(*id, *task, attempt);
              });
          if (!where.ok()) return Reply(res, where.status());
          const bool follow = req.has_param("follow") && req.get_param_value("follow") != "0";
          const bool err = req.has_param("stream") && req.get_param_value("stream") == "stderr";
          // Not a structured binding: clang 14 cannot capture those in the lambda below.
          const std::string node = where->first, task_id = where->second;
          if (follow) {  // until the task ends: the stream pump writes it, not this worker
            auto sink = control_->TakeStream(
                StreamHead{"text/plain", false, {{"Cache-Control", "no-store"}}});
            if (!sink.ok()) return Reply(res, sink.status());
            return follows_->Open(*std::move(sink), node, task_id, err);
          }
          res.set_chunked_content_provider(
              "text/plain", [this, node, task_id, err, offset = uint64_t{0}](
                                size_t, httplib::DataSink& sink) mutable {
                while (true) {
                  auto chunk = hub_->ReadLog(node, task_id, offset, err, 5 * kSecond);
                  if (!chunk.ok()) {
                    const std::string msg = "\n[hangar: " + chunk.status().message() + "]\n";
                    sink.write(msg.data(), msg.size());
                    sink.done();
                    return true;
                  }
                  if (!chunk->error().empty()) {
                    const std::string msg = "[hangar: " + chunk->error() + "]\n";
                    sink.write(msg.data(), msg.size());
                    sink.done();
                    return true;
                  }
                  if (!chunk->data().empty()) {
                    if (!sink.write(chunk->data().data(), chunk->data().size())) return false;
                    offset += chunk->data().size();
                    continue;
                  }
                  sink.done();  // all there is now
                  return true;
                }
              });
        }));
}

}  // namespace hangar::controller
