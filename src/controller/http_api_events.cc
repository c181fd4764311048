// The REST API's event log (docs/api.md): GET /v1/events, by subject, what the caller may read.
#include <httplib.h>

#include <regex>

#include "api/body.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "controller/state/cluster_state.h"
#include "controller/state_owner.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

void HttpApi::EventRoutes() {
  httplib::Server& s = *server_;
  s.Get("/v1/events", Handle(std::nullopt, [this](const Principal& who, const httplib::Request& req,
                                                  httplib::Response& res) {
          std::string subject = req.has_param("subject") ? req.get_param_value("subject") : "";
          int limit = 100;
          if (req.has_param("limit")) {
            auto n = api::ParseCount(req.get_param_value("limit"), "limit", 1, 10000);
            if (!n.ok()) return Reply(res, n.status());
            limit = static_cast<int>(*n);
          }
          // subject=job/ID is one job's events. The store matches subjects by prefix, so job/4
          // would also bring job/42's: ask for the most and keep job/4's (and its job/4/...
          // sub-subjects).
          static const std::regex job_re(R"(^job/(\d{1,18})$)");
          std::smatch m;
          const bool one_job = std::regex_match(subject, m, job_re);
          // Without events:read, a user may still read the events of a job they may see (their
          // own).
          if (Status all = Allow(who, Permission::kEventsRead); !all.ok()) {
            if (!one_job || !Allow(who, Permission::kJobsRead).ok()) {
              if (!Allow(who, Permission::kJobsRead).ok()) return Reply(res, all);
              return Reply(
                  res, Status::PermissionDenied(
                           "permission events:read is missing: " + who.Describe() +
                           " may read the events of their own jobs only: `hangar events job/ID` "
                           "(GET /v1/events?subject=job/ID); ask an admin for a viewer token to "
                           "read every event"));
            }
            const sched::JobId id = std::stoull(m[1].str());
            Status mine = owner_->Call<Status>([&](ClusterState& st, Effects*) {
              return st.MayAccessJob(who, id, Permission::kJobsRead);
            });
            if (!mine.ok()) return Reply(res, mine);
          }
          auto events = owner_->Events(subject, one_job ? 10000 : limit);
          if (!events.ok()) return Reply(res, events.status());
          nlohmann::json out = nlohmann::json::array();
          for (const auto& e : *events) {
            if (static_cast<int>(out.size()) >= limit) break;
            if (one_job && e.subject != subject &&
                e.subject.compare(0, subject.size() + 1, subject + "/") != 0)
              continue;
            out.push_back({{"id", e.id},
                           {"time_ms", e.time},
                           {"kind", e.kind},
                           {"subject", e.subject},
                           {"message", e.message}});
          }
          Reply(res, 200, {{"events", out}});
        }));
}

}  // namespace hangar::controller
