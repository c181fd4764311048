// REST routes for batch work: job lists that filter and page, bulk and per-job hold,
// release, requeue and cancel, and per-job accounting (JSON or CSV).
#include <charconv>
#include <cstdint>
#include <set>
#include <sstream>

#include "api/body.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "job/job_state.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

namespace {

// Refuses a query parameter the endpoint does not know, naming the ones it does: a typo such
// as ?quue=a must not list every job as if unfiltered.
Status CheckParams(const httplib::Request& req, const std::set<std::string>& known) {
  for (const auto& [name, value] : req.params) {
    if (known.count(name)) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    return Status::InvalidArgument("unknown query parameter '" + name + "' for " + req.path +
                                   "; it takes " + list);
  }
  return Status::Ok();
}

Status CheckState(const std::string& state) {
  if (state.empty() || state == "held" || job::ParseJobState(state)) return Status::Ok();
  return Status::InvalidArgument(
      "state '" + state +
      "' is not a job state (pending, held, starting, running, preempting, succeeded, "
      "failed, cancelled, timed_out)");
}

// 9999-12-31T23:59:59.999Z in milliseconds since the epoch.
constexpr Time kMaxEpochMs = 253402300799999;

// A time bound: milliseconds since the epoch, an RFC 3339 UTC time, or a duration back from now.
StatusOr<Time> TimeBound(const std::string& text, const std::string& name, Time now) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos &&
      text.size() > 9) {
    Time ms = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
    if (ec == std::errc() && end == text.data() + text.size() && ms <= kMaxEpochMs) return ms;
    return Status::InvalidArgument(
        name + " '" + text +
        "' is past any time this server knows (milliseconds since the epoch go up to "
        "year 9999, " +
        std::to_string(kMaxEpochMs) + ")");
  }
  if (auto t = ParseUtcTimestamp(text); t.ok()) return *t;
  if (auto d = ParseDuration(text); d.ok() && *d > 0) return now - *d;
  return Status::InvalidArgument(
      name + " '" + text +
      "' is not a time: give milliseconds since the epoch, a UTC time such as "
      "2026-12-01T09:00:00Z, or a duration back from now such as 12h or 7d");
}

StatusOr<JobFilter> FilterFromQuery(const httplib::Request& req, Time now, size_t default_limit) {
  JobFilter f;
  f.limit = default_limit;
  auto param = [&](const char* k) {
    return req.has_param(k) ? req.get_param_value(k) : std::string();
  };
  f.user = param("user");
  f.queue = param("queue");
  f.name = param("name");
  f.state = param("state");
  HANGAR_RETURN_IF_ERROR(CheckState(f.state));
  if (req.has_param("array")) {
    HANGAR_ASSIGN_OR_RETURN(int64_t a, api::ParseCount(param("array"), "array", 1, INT64_MAX));
    f.array = static_cast<uint64_t>(a);
  }
  if (req.has_param("limit")) {
    HANGAR_ASSIGN_OR_RETURN(int64_t n, api::ParseCount(param("limit"), "limit", 1, 100'000));
    f.limit = static_cast<size_t>(n);
  }
  if (req.has_param("cursor")) {
    auto c = api::ParseCount(param("cursor"), "cursor", 1, INT64_MAX);
    if (!c.ok()) {
      return Status::InvalidArgument(
          "cursor must be the next_cursor of the previous page (a job id)");
    }
    f.before = static_cast<sched::JobId>(*c);
  }
  if (req.has_param("since")) {
    HANGAR_ASSIGN_OR_RETURN(f.since, TimeBound(param("since"), "since", now));
  }
  if (req.has_param("until")) {
    HANGAR_ASSIGN_OR_RETURN(f.until, TimeBound(param("until"), "until", now));
  }
  return f;
}

// The selector of a bulk operation, from its JSON body.
StatusOr<JobFilter> FilterFromBody(const std::string& body) {
  constexpr const char* kExample =
      "{\"user\": \"bob\", \"state\": \"pending\"} or {\"ids\": [12, 13]} or {\"array\": 40}";
  HANGAR_ASSIGN_OR_RETURN(nlohmann::json j, api::ParseObject(body, kExample));
  JobFilter f;
  for (const auto& [key, v] : j.items()) {
    if (key == "ids") {
      if (!v.is_array())
        return Status::InvalidArgument("ids must be a list of job ids, such as [12, 13]");
      for (const auto& id : v) {
        if (!id.is_number_unsigned())
          return Status::InvalidArgument("ids: " + id.dump() + " is not a job id");
        f.ids.push_back(id.get<uint64_t>());
      }
      if (f.ids.size() > 100'000)
        return Status::InvalidArgument(
            "ids lists more than 100,000 jobs; select by array, user or state");
    } else if (key == "array") {
      if (!v.is_number_unsigned())
        return Status::InvalidArgument("array must be an array's job id, such as 40");
      f.array = v.get<uint64_t>();
    } else if (key == "user" || key == "queue" || key == "name" || key == "state") {
      if (!v.is_string()) return Status::InvalidArgument(key + " must be a string");
      (key == "user"    ? f.user
       : key == "queue" ? f.queue
       : key == "name"  ? f.name
                        : f.state) = v.get<std::string>();
    } else {
      return Status::InvalidArgument(
          "unknown selector '" + key +
          "'; select by ids, array, user, name, queue or state: " + kExample);
    }
  }
  HANGAR_RETURN_IF_ERROR(CheckState(f.state));
  return f;
}

std::string CsvField(const nlohmann::json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string ToCsv(const nlohmann::json& rows) {
  static const char* kColumns[] = {"id",
                                   "name",
                                   "array_id",
                                   "array_index",
                                   "user",
                                   "queue",
                                   "tier",
                                   "gpus",
                                   "gpu_model",
                                   "submitted_ms",
                                   "started_ms",
                                   "ended_ms",
                                   "state",
                                   "attempts",
                                   "gpu_hours",
                                   "idle_gpu_hours",
                                   "preempted_gpu_hours",
                                   "staging_gpu_hours",
                                   "exit",
                                   "account"};
  std::ostringstream out;
  for (size_t c = 0; c < std::size(kColumns); ++c) out << (c ? "," : "") << kColumns[c];
  out << "\n";
  for (const auto& r : rows) {
    for (size_t c = 0; c < std::size(kColumns); ++c)
      out << (c ? "," : "") << CsvField(r[kColumns[c]]);
    out << "\n";
  }
  return out.str();
}

const std::set<std::string> kListParams = {"user",  "queue", "name",  "state", "array",
                                           "since", "until", "limit", "cursor"};

}  // namespace

void HttpApi::JobRoutes() {
  httplib::Server& s = *server_;
  s.Get("/v1/jobs",
        Handle(Permission::kJobsRead, [this](const Principal& who, const httplib::Request& req,
                                             httplib::Response& res) {
          if (Status known = CheckParams(req, kListParams); !known.ok()) return Reply(res, known);
          auto f = FilterFromQuery(req, owner_->clock()->Now(), 1000);
          if (!f.ok()) return Reply(res, f.status());
          // From the published read model, without queuing behind the state thread's writes; a
          // queue admin's list (which also holds the jobs of the queues they administer) asks the
          // state.
          JobPage page;
          if (who.role != Role::kQueueAdmin) {
            const bool sees_all = who.role == Role::kAdmin || who.role == Role::kViewer;
            page = ListPage(
                *owner_->PublishedJobs(), *f, sees_all ? nullptr : &who.user,
                [&](const PublishedJob& j) { return MaySeeByRole(who, j.user()).value_or(false); });
          } else {
            page = owner_->Call<JobPage>(
                [&](ClusterState& st, Effects*) { return st.ListJobsPage(who, *f); });
          }
          nlohmann::json out = nlohmann::json::array();
          for (const auto& j : page.jobs) out.push_back(api::ToJson(j));
          nlohmann::json body = {
              {"jobs", out}, {"more", page.more}, {"more_at_least", page.more_at_least}};
          body["next_cursor"] =
              page.next ? nlohmann::json(std::to_string(page.next)) : nlohmann::json(nullptr);
          Reply(res, 200, body);
        }));
  auto bulk = [this](BulkAction action, bool one) {
    return Handle(Permission::kJobsCancel, [this, action, one](const Principal& who,
                                                               const httplib::Request& req,
                                                               httplib::Response& res) {
      JobFilter f;
      if (one) {
        auto id = IdOf(req);
        if (!id.ok()) return Reply(res, id.status());
        f.ids = {*id};
      } else {
        auto parsed = FilterFromBody(req.body);
        if (!parsed.ok()) return Reply(res, parsed.status());
        f = std::move(*parsed);
      }
      auto out = owner_->Call<StatusOr<nlohmann::json>>(
          [&](ClusterState& st, Effects* fx) -> StatusOr<nlohmann::json> {
            if (one)
              HANGAR_RETURN_IF_ERROR(st.MayAccessJob(who, f.ids[0], Permission::kJobsCancel));
            if (one && !st.FindJob(f.ids[0])) {
              return Status::NotFound("job " + std::to_string(f.ids[0]) +
                                      " does not exist; `hangar jobs` lists them");
            }
            return st.Bulk(who, f, action, owner_->clock()->Now(), fx);
          });
      if (!out.ok()) return Reply(res, out.status());
      // One job that could not be changed answers as an error, with its reason.
      if (one && !(*out)["skipped"].empty()) {
        return Reply(res,
                     Status::FailedPrecondition((*out)["skipped"][0]["why"].get<std::string>()));
      }
      Reply(res, 200, *out);
    });
  };
  const std::pair<const char*, BulkAction> actions[] = {{"cancel", BulkAction::kCancel},
                                                        {"hold", BulkAction::kHold},
                                                        {"release", BulkAction::kRelease},
                                                        {"requeue", BulkAction::kRequeue}};
  for (const auto& [name, action] : actions) {
    BoundedPost(s, std::string("/v1/jobs/bulk/") + name, bulk(action, false));
    if (action != BulkAction::kCancel)
      BoundedPost(s, std::string(R"(/v1/jobs/(\d+)/)") + name, bulk(action, true));
  }
  s.Get("/v1/accounting/jobs",
        Handle(Permission::kJobsRead,
               [this](const Principal& who, const httplib::Request& req, httplib::Response& res) {
                 std::set<std::string> known = kListParams;
                 known.insert("format");
                 if (Status k = CheckParams(req, known); !k.ok()) return Reply(res, k);
                 const std::string format =
                     req.has_param("format") ? req.get_param_value("format") : "json";
                 if (format != "json" && format != "csv")
                   return Reply(res, Status::InvalidArgument("format must be json or csv"));
                 auto f = FilterFromQuery(req, owner_->clock()->Now(), 1000);
                 if (!f.ok()) return Reply(res, f.status());
                 struct Out {
                   nlohmann::json rows;
                   sched::JobId next = 0;
                   size_t more = 0;
                 };
                 Out o = owner_->Call<Out>([&](ClusterState& st, Effects*) {
                   Out r;
                   r.rows = st.AccountingJobs(who, *f, owner_->clock()->Now(), &r.next, &r.more);
                   return r;
                 });
                 if (format == "csv") {
                   if (o.next) res.set_header("X-Next-Cursor", std::to_string(o.next));
                   res.set_header("X-More", std::to_string(o.more));
                   res.set_content(ToCsv(o.rows), "text/csv");
                   return;
                 }
                 nlohmann::json body = {{"jobs", o.rows}, {"more", o.more}};
                 body["next_cursor"] =
                     o.next ? nlohmann::json(std::to_string(o.next)) : nlohmann::json(nullptr);
                 Reply(res, 200, body);
               }));
}

}  // namespace hangar::controller
