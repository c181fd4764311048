// The REST API's route for the steps inside an allocation (docs/slurm.md, "Allocations and
// steps"): GET /v1/jobs/ID/steps lists the job's steps (`srun` inside it) as `sacct` shows them.
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "controller/state/cluster_state.h"
#include "controller/state_owner.h"
#include "controller/step_relay.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

void HttpApi::StepRoutes() {
  httplib::Server& s = *server_;
  s.Get(R"(/v1/jobs/(\d+)/steps)",
        Handle(Permission::kJobsRead,
               [this](const Principal& who, const httplib::Request& req, httplib::Response& res) {
                 auto id = IdOf(req);
                 if (!id.ok()) return Reply(res, id.status());
                 Status may = owner_->Call<Status>([&](ClusterState& st, Effects*) {
                   return st.MayAccessJob(who, *id, Permission::kJobsRead);
                 });
                 if (!may.ok()) return Reply(res, may);
                 nlohmann::json steps = nlohmann::json::array();
                 for (const StepRecord& r :
                      wiring_.steps ? wiring_.steps->Steps(*id) : std::vector<StepRecord>{}) {
                   steps.push_back({{"job_id", r.job_id},
                                    {"step_id", r.step_id},
                                    {"name", r.name},
                                    {"nodelist", r.nodelist},
                                    {"nodes", r.nnodes},
                                    {"tasks", r.ntasks},
                                    {"start", r.start},
                                    {"end", r.end},
                                    {"state", r.State()},
                                    {"exit_code", r.exit_code},
                                    {"signal", r.signal}});
                 }
                 Reply(res, 200, {{"job_id", *id}, {"steps", steps}});
               }));
}

}  // namespace hangar::controller
