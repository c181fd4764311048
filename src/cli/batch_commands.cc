#include "cli/batch_commands.h"

#include <cctype>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>

#include "api/views.h"
#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/squeue.h"
#include "cli/table.h"
#include "common/time.h"

namespace hangar::cli {

Status CheckJobId(const std::string& id);  // cli_commands.cc

namespace {

// What selects jobs, shared by the list and the bulk commands.
struct Selector {
  std::vector<std::string> ids;
  std::string user, queue, name, state, array, since, until;
};

void AddSelector(CLI::App* cmd, Selector* s, bool with_time) {
  cmd->add_option("--user", s->user, "Only this user's jobs");
  cmd->add_option("--queue", s->queue, "Only jobs in this queue");
  cmd->add_option("--name", s->name, "Only jobs of this name (a trailing * matches a prefix)");
  cmd->add_option("--state", s->state,
                  "Only jobs in this state (pending, held, running, succeeded, failed, ...)");
  cmd->add_option("--array", s->array, "Only the elements of this array (its id)");
  if (with_time) {
    cmd->add_option("--since", s->since,
                    "Submitted at or after: 2026-12-01T09:00:00Z, or back from now: 12h, 7d");
    cmd->add_option("--until", s->until, "Submitted before (same forms as --since)");
  }
}

std::string UrlEncode(const std::string& v) {
  std::string out;
  for (unsigned char ch : v) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", ch);
      out += buf;
    }
  }
  return out;
}

std::string Query(const Selector& s) {
  std::string q;
  auto add = [&](const char* k, const std::string& v) {
    if (!v.empty()) q += std::string(q.empty() ? "?" : "&") + k + "=" + UrlEncode(v);
  };
  add("user", s.user);
  add("queue", s.queue);
  add("name", s.name);
  add("state", s.state);
  add("array", s.array);
  add("since", s.since);
  add("until", s.until);
  return q;
}

std::string Gpus(double g) {
  char buf[32];
  std::snprintf(buf, sizeof buf, g == static_cast<int>(g) ? "%.0f" : "%.2f", g);
  return buf;
}

std::string Short(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 1) + "~";
}

struct ListOptions {
  Selector sel;
  int limit = 100;
  std::string cursor;
  bool all = false;
};

// Says on stderr (after the table) how many more there are and how to get them, so that a list
// never stops silently.
struct MoreNote {
  std::string text;
  ~MoreNote() {
    std::fflush(stdout);
    if (!text.empty()) std::fprintf(stderr, "%s", text.c_str());
  }
};

// Pages through `path` (a list endpoint): every page with --all, else one.
Status EachPage(ApiClient& api, const std::string& path, const ListOptions& o,
                const std::string& again, const std::function<Status(const nlohmann::json&)>& page,
                MoreNote* note) {
  std::string cursor = o.cursor;
  while (true) {
    const std::string sep = path.find('?') == std::string::npos ? "?" : "&";
    HANGAR_ASSIGN_OR_RETURN(auto r, api.Get(path + sep + "limit=" + std::to_string(o.limit) +
                                            (cursor.empty() ? "" : "&cursor=" + cursor)));
    HANGAR_RETURN_IF_ERROR(page(r));
    const size_t more = r.value("more", size_t{0});
    if ((more == 0 && !r.value("more_at_least", false)) || !r["next_cursor"].is_string())
      return Status::Ok();
    cursor = r["next_cursor"].get<std::string>();
    if (!o.all) {
      note->text = std::to_string(more) + (r.value("more_at_least", false) ? "+" : "") +
                   " more: `" + again + " --cursor " + cursor + "` for the next page, or --all\n";
      return Status::Ok();
    }
  }
}

Status Jobs(const Common& c, const ListOptions& o) {
  MoreNote note;  // printed last, after the table
  ApiClient api(c.server);
  const Time now = SystemClock::Default()->Now();
  if (c.output == "json") {
    nlohmann::json all = nlohmann::json::array();
    nlohmann::json last;
    HANGAR_RETURN_IF_ERROR(EachPage(
        api, "/v1/jobs" + Query(o.sel), o, "hangar jobs",
        [&](const nlohmann::json& r) {
          for (const auto& j : r["jobs"]) all.push_back(j);
          last = r;
          return Status::Ok();
        },
        &note));
    PrintJson({{"jobs", all},
               {"more", last.value("more", 0)},
               {"next_cursor", last.value("next_cursor", nlohmann::json())}});
    return Status::Ok();
  }
  if (c.output == "slurm") {  // squeue's columns and state letters (docs/slurm.md)
    std::vector<api::JobView> views;
    HANGAR_RETURN_IF_ERROR(EachPage(
        api, "/v1/jobs" + Query(o.sel), o, "hangar jobs",
        [&](const nlohmann::json& r) {
          for (const auto& j : r["jobs"]) {
            HANGAR_ASSIGN_OR_RETURN(api::JobView v, api::JobViewFromJson(j));
            views.push_back(std::move(v));
          }
          return Status::Ok();
        },
        &note));
    std::printf("%s", RenderSqueue(views, now).c_str());
    return Status::Ok();
  }
  Table t({"ID", "NAME", "ARRAY", "QUEUE", "USER", "STATE", "GPUS", "TASKS", "AGE", "REASON"});
  HANGAR_RETURN_IF_ERROR(EachPage(
      api, "/v1/jobs" + Query(o.sel), o, "hangar jobs",
      [&](const nlohmann::json& r) {
        for (const auto& j : r["jobs"]) {
          HANGAR_ASSIGN_OR_RETURN(api::JobView v, api::JobViewFromJson(j));
          const std::string array =
              v.array_id ? std::to_string(v.array_id) + "[" + std::to_string(v.array_index) + "]"
                         : "-";
          std::string state = v.held ? "held" : v.state;
          if (v.interactive) state += " (interactive)";
          t.Add({std::to_string(v.id), Short(v.name, 24), array, v.queue, v.user, state,
                 Gpus(v.gpus), std::to_string(v.tasks), Ago(v.submitted, now),
                 Short(v.reason, 70)});
        }
        return Status::Ok();
      },
      &note));
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

// `hangar history --csv`: pages through the JSON form and prints one header.
Status HistoryCsv(const Common& c, const ListOptions& o) {
  MoreNote note;  // printed last, after the rows
  ApiClient api(c.server);
  bool header = false;
  static const char* kCols[] = {"id",
                                "name",
                                "array_id",
                                "array_index",
                                "user",
                                "queue",
                                "tier",
                                "gpus",
                                "gpu_model",
                                "submitted",
                                "started",
                                "ended",
                                "state",
                                "attempts",
                                "gpu_hours",
                                "idle_gpu_hours",
                                "preempted_gpu_hours",
                                "staging_gpu_hours",
                                "exit",
                                "account"};
  return EachPage(
      api, "/v1/accounting/jobs" + Query(o.sel), o, "hangar history",
      [&](const nlohmann::json& r) {
        if (!header) {
          for (size_t k = 0; k < std::size(kCols); ++k) std::printf("%s%s", k ? "," : "", kCols[k]);
          std::printf("\n");
          header = true;
        }
        for (const auto& j : r["jobs"]) {
          auto ts = [&](const char* k) {
            const int64_t v = j.value(k, int64_t{0});
            return v ? FormatUtcTimestamp(v) : std::string();
          };
          std::string exit = j.value("exit", "");
          std::string quoted = "\"";
          for (char ch : exit) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
          std::printf(
              "%llu,%s,%llu,%lld,%s,%s,%s,%g,%s,%s,%s,%s,%s,%d,%.4f,%.4f,%.4f,%.4f,%s\",%s\n",
              j.value("id", 0ull), j.value("name", "").c_str(), j.value("array_id", 0ull),
              j.value("array_index", -1ll), j.value("user", "").c_str(),
              j.value("queue", "").c_str(), j.value("tier", "").c_str(), j.value("gpus", 0.0),
              j.value("gpu_model", "").c_str(), ts("submitted_ms").c_str(),
              ts("started_ms").c_str(), ts("ended_ms").c_str(), j.value("state", "").c_str(),
              j.value("attempts", 0), j.value("gpu_hours", 0.0), j.value("idle_gpu_hours", 0.0),
              j.value("preempted_gpu_hours", 0.0), j.value("staging_gpu_hours", 0.0),
              quoted.c_str(), j.value("account", "").c_str());
        }
        return Status::Ok();
      },
      &note);
}

Status History(const Common& c, const ListOptions& o, bool csv) {
  if (csv) return HistoryCsv(c, o);
  MoreNote note;  // printed last, after the table
  ApiClient api(c.server);
  if (c.output == "json") {
    nlohmann::json all = nlohmann::json::array();
    HANGAR_RETURN_IF_ERROR(EachPage(
        api, "/v1/accounting/jobs" + Query(o.sel), o, "hangar history",
        [&](const nlohmann::json& r) {
          for (const auto& j : r["jobs"]) all.push_back(j);
          return Status::Ok();
        },
        &note));
    PrintJson({{"jobs", all}});
    return Status::Ok();
  }
  Table t({"ID", "NAME", "USER", "QUEUE", "ACCOUNT", "STATE", "GPUS", "ATTEMPTS", "ELAPSED",
           "GPU-H", "IDLE GPU-H", "PREEMPTED GPU-H"});
  HANGAR_RETURN_IF_ERROR(EachPage(
      api, "/v1/accounting/jobs" + Query(o.sel), o, "hangar history",
      [&](const nlohmann::json& r) {
        for (const auto& j : r["jobs"]) {
          const int64_t start = j.value("started_ms", int64_t{0}),
                        end = j.value("ended_ms", int64_t{0});
          char gh[32], ih[32], ph[32];
          std::snprintf(gh, sizeof gh, "%.3f", j.value("gpu_hours", 0.0));
          std::snprintf(ih, sizeof ih, "%.3f", j.value("idle_gpu_hours", 0.0));
          std::snprintf(ph, sizeof ph, "%.3f", j.value("preempted_gpu_hours", 0.0));
          const uint64_t array = j.value("array_id", uint64_t{0});
          std::string name = j.value("name", "");
          if (array) name += "[" + std::to_string(j.value("array_index", int64_t{0})) + "]";
          const std::string account = j.value("account", "");
          t.Add({std::to_string(j.value("id", uint64_t{0})), Short(name, 28), j.value("user", ""),
                 j.value("queue", ""), account.empty() ? "-" : account, j.value("state", ""),
                 Gpus(j.value("gpus", 0.0)), std::to_string(j.value("attempts", 0)),
                 start && end ? FormatDuration(end - start) : "-", gh, ih, ph});
        }
        return Status::Ok();
      },
      &note));
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

// cancel, hold, release or requeue: one job by id through its own endpoint (its error is the
// answer), several or a selector through the bulk endpoint (one request, one commit).
Status Act(const Common& c, const std::string& action, const Selector& s) {
  for (const auto& id : s.ids) HANGAR_RETURN_IF_ERROR(CheckJobId(id));
  ApiClient api(c.server);
  const bool selector = !s.user.empty() || !s.queue.empty() || !s.name.empty() ||
                        !s.state.empty() || !s.array.empty();
  if (s.ids.empty() && !selector) {
    return Status::InvalidArgument(
        "say which jobs: ids, or --user, --queue, --name, --state or --array "
        "(e.g. hangar " +
        action + " --user bob --state pending)");
  }
  if (s.ids.size() == 1 && !selector) {
    HANGAR_ASSIGN_OR_RETURN(auto r, api.Post("/v1/jobs/" + s.ids[0] + "/" + action, "{}"));
    if (c.output == "json") return PrintJson(r), Status::Ok();
    static const std::map<std::string, std::string> kDone = {{"cancel", "cancelled"},
                                                             {"hold", "held"},
                                                             {"release", "released"},
                                                             {"requeue", "requeued"}};
    const bool unchanged = r.contains("unchanged") && r["unchanged"].get<int>() > 0;
    std::printf("job %s %s\n", s.ids[0].c_str(),
                unchanged ? ("was already " + kDone.at(action)).c_str() : kDone.at(action).c_str());
    return Status::Ok();
  }
  nlohmann::json body = nlohmann::json::object();
  if (!s.ids.empty()) {
    body["ids"] = nlohmann::json::array();
    for (const auto& id : s.ids) body["ids"].push_back(std::stoull(id));
  }
  if (!s.array.empty()) {
    HANGAR_RETURN_IF_ERROR(CheckJobId(s.array));
    body["array"] = std::stoull(s.array);
  }
  for (const auto& [k, v] :
       {std::pair{"user", s.user}, {"queue", s.queue}, {"name", s.name}, {"state", s.state}}) {
    if (!v.empty()) body[k] = v;
  }
  HANGAR_ASSIGN_OR_RETURN(auto r, api.Post("/v1/jobs/bulk/" + action, body.dump()));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  std::printf("%s: %d matched, %d changed, %d already so", action.c_str(), r.value("matched", 0),
              r.value("changed", 0), r.value("unchanged", 0));
  if (r.value("denied", 0)) std::printf(", %d not yours to change", r.value("denied", 0));
  std::printf("\n");
  for (const auto& sk : r["skipped"]) {
    std::printf("  job %llu: %s\n", sk.value("id", 0ull), sk.value("why", "").c_str());
  }
  return Status::Ok();
}

void AddList(CLI::App* cmd, ListOptions* o) {
  AddSelector(cmd, &o->sel, true);
  cmd->add_option("--limit", o->limit, "Rows per page")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--cursor", o->cursor,
                  "Start after this page (the cursor a previous page printed)");
  cmd->add_flag("--all", o->all, "Every page, not only the first");
}

}  // namespace

void RegisterBatchCommands(CLI::App& app, int* rc) {
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<ListOptions>();
    CLI::App* jobs =
        app.add_subcommand("jobs", "List jobs, newest first (filters; pages of --limit)");
    AddList(jobs, o.get());
    AddCommon(jobs, c.get(), {"table", "json", "slurm"});
    jobs->callback([=] { Guard(rc, [&] { return Jobs(*c, *o); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<ListOptions>();
    auto csv = std::make_shared<bool>(false);
    CLI::App* history = app.add_subcommand(
        "history", "Per-job accounting: GPU-hours, attempts, idle and preempted waste");
    AddList(history, o.get());
    history->add_flag("--csv", *csv,
                      "Comma-separated values, one header line (the same as -o csv)");
    AddCommon(history, c.get(), {"table", "json", "csv"});
    history->callback(
        [=] { Guard(rc, [&] { return History(*c, *o, *csv || c->output == "csv"); }); });
  }
  const std::pair<const char*, const char*> actions[] = {
      {"cancel", "Cancel jobs: stop every task (by ids, or every job a selector matches)"},
      {"hold", "Keep pending jobs from starting until released"},
      {"release", "Let held jobs start again"},
      {"requeue", "Stop running jobs (with their checkpoint signal) and queue them again, whole"}};
  for (const auto& [name, help] : actions) {
    auto c = std::make_shared<Common>();
    auto s = std::make_shared<Selector>();
    const std::string action = name;
    CLI::App* cmd = app.add_subcommand(name, help);
    cmd->add_option("ids", s->ids, "Job ids (numbers: see `hangar jobs`)");
    AddSelector(cmd, s.get(), false);
    AddCommon(cmd, c.get());
    cmd->callback([=] { Guard(rc, [&] { return Act(*c, action, *s); }); });
  }
}

}  // namespace hangar::cli
