// The REST API's goodput routes (docs/goodput.md): GET /v1/jobs/ID/goodput, where one job's wall
// time went since it first started; GET /v1/goodput, the same summed over the jobs the controller
// holds (with ?jobs=N, the N jobs under way with the lowest ETTR, for the dashboard).
#include <algorithm>

#include "api/body.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "controller/state/cluster_state.h"
#include "controller/state_owner.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

namespace {

// Up to `n` jobs under way that `p` may see, lowest ETTR first: {"id", "name", "state", "goodput"}.
nlohmann::json WorstJobs(const ClusterState& st, const Principal& p, size_t n, Time now) {
  std::vector<std::pair<double, nlohmann::json>> rows;
  for (uint64_t id : st.goodput().under_way()) {
    const JobRecord* j = st.FindJob(id);
    if (!j || !st.MaySeeJob(p, *j)) continue;
    nlohmann::json g = st.goodput().Json(id, now);
    if (g.is_null()) continue;
    const double ettr = g.value("ettr", 0.0);
    rows.emplace_back(ettr, nlohmann::json{{"id", id},
                                           {"name", j->spec->spec.name},
                                           {"state", std::string(job::JobStateName(j->state))},
                                           {"goodput", std::move(g)}});
  }
  // Lowest first; equal figures by id, so that the order does not move between reads.
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < rows.size() && i < n; ++i) out.push_back(std::move(rows[i].second));
  return out;
}

}  // namespace

void HttpApi::GoodputRoutes() {
  httplib::Server& s = *server_;
  s.Get(R"(/v1/jobs/(\d+)/goodput)",
        Handle(Permission::kJobsRead, [this](const Principal& who, const httplib::Request& req,
                                             httplib::Response& res) {
          auto id = IdOf(req);
          if (!id.ok()) return Reply(res, id.status());
          auto out = owner_->Call<StatusOr<nlohmann::json>>(
              [&](ClusterState& st, Effects*) -> StatusOr<nlohmann::json> {
                HANGAR_ASSIGN_OR_RETURN(const JobRecord* j, ReadableJob(st, who, *id));
                return nlohmann::json{{"id", *id},
                                      {"name", j->spec->spec.name},
                                      {"state", std::string(job::JobStateName(j->state))},
                                      {"goodput", st.goodput().Json(*id, owner_->clock()->Now())}};
              });
          if (!out.ok()) return Reply(res, out.status());
          Reply(res, 200, *out);
        }));
  s.Get("/v1/goodput",
        Handle(Permission::kClusterRead,
               [this](const Principal& who, const httplib::Request& req, httplib::Response& res) {
                 int64_t jobs = 0;
                 if (req.has_param("jobs")) {
                   auto n = api::ParseCount(req.get_param_value("jobs"), "jobs", 0, 1000);
                   if (!n.ok()) return Reply(res, n.status());
                   jobs = *n;
                 }
                 Reply(res, 200, owner_->Call<nlohmann::json>([&](ClusterState& st, Effects*) {
                   const Time now = owner_->clock()->Now();
                   nlohmann::json out = st.goodput().ClusterJson(now);
                   if (jobs > 0)
                     out["job_list"] = WorstJobs(st, who, static_cast<size_t>(jobs), now);
                   return out;
                 }));
               }));
}

}  // namespace hangar::controller
