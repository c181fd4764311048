// The REST API's view of interactive sessions (docs/interactive.md): GET /v1/jobs/ID/sessions says
// who has a session open on the job now (attached to its terminal, an exec beside it, a port
// forward) and how idle it is -- when someone last typed, since when its GPUs are idle, whether
// the people attached were warned, and the idle policy that will reclaim it. The dashboard's job
// page shows it.
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "controller/session_service.h"
#include "controller/state/cluster_state.h"
#include "controller/state_owner.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

namespace {

nlohmann::json TimeOrNull(Time t) { return t > 0 ? nlohmann::json(t) : nlohmann::json(nullptr); }

// What the job's own record says of its idleness (state thread).
nlohmann::json Idleness(const ClusterState& st, const JobRecord& j) {
  nlohmann::json out = {{"job_id", j.id},
                        {"state", std::string(job::JobStateName(j.state))},
                        {"interactive", j.spec->spec.interactive},
                        {"terminal", j.spec->spec.terminal},
                        {"terminals_attached", j.attached},
                        {"input_at_ms", TimeOrNull(j.input_at)},
                        {"gpus_idle_since_ms", TimeOrNull(j.idle_since)},
                        {"idle_warned", j.idle_warned}};
  if (const job::IdlePolicy* p = st.IdlePolicyOf(j)) {
    out["idle_policy"] = {{"gpu_util_below", p->gpu_util_below},
                          {"for_s", p->for_duration / kSecond},
                          {"action", std::string(job::IdleActionName(p->action))}};
  } else {
    out["idle_policy"] = nullptr;
  }
  return out;
}

}  // namespace

void HttpApi::SessionRoutes() {
  httplib::Server& s = *server_;
  s.Get(R"(/v1/jobs/(\d+)/sessions)",
        Handle(Permission::kJobsRead,
               [this](const Principal& who, const httplib::Request& req, httplib::Response& res) {
                 auto id = IdOf(req);
                 if (!id.ok()) return Reply(res, id.status());
                 auto out = owner_->Call<StatusOr<nlohmann::json>>(
                     [&](ClusterState& st, Effects*) -> StatusOr<nlohmann::json> {
                       HANGAR_ASSIGN_OR_RETURN(const JobRecord* j, ReadableJob(st, who, *id));
                       return Idleness(st, *j);
                     });
                 if (!out.ok()) return Reply(res, out.status());
                 nlohmann::json open = nlohmann::json::array();
                 if (wiring_.sessions.service) {
                   for (const auto& o : wiring_.sessions.service->OpenOn(*id)) {
                     open.push_back({{"id", o.id},
                                     {"task", o.task},
                                     {"user", o.user},
                                     {"kind", o.kind},
                                     {"program", o.program},
                                     {"since_ms", o.since}});
                   }
                 }
                 (*out)["sessions"] = std::move(open);
                 Reply(res, 200, *out);
               }));
}

}  // namespace hangar::controller
