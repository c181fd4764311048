// The sharing commands: apply (queues files), queues, share, usage.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli/cli_commands.h"
#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/time.h"
#include "common/units.h"
#include "job/queue_spec.h"

namespace hangar::cli {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v == static_cast<long long>(v) ? "%.0f" : "%.1f", v);
  return buf;
}

Status Apply(const Common& c, const std::string& file) {
  std::ifstream in(file);
  if (!in) return Status::NotFound(file + ": cannot open the file; check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.find("queues:") == std::string::npos) {
    return Status::InvalidArgument(
        file +
        ": `hangar apply` takes a queues file (a map with 'queues:', docs/queues.md); "
        "submit jobs with `hangar submit`");
  }
  // Validate locally first, so errors name the file and line.
  auto specs = job::ParseQueues(text, file);
  if (!specs.ok()) return specs.status();
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post("/v1/queues", text, "application/yaml"));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  auto list = [&](const char* key) {
    std::string out;
    for (const auto& n : r.value(key, nlohmann::json::array()))
      out += (out.empty() ? "" : ", ") + n.get<std::string>();
    return out.empty() ? std::string("none") : out;
  };
  if (r["created"].empty() && r["changed"].empty() && r["removed"].empty()) {
    std::printf("queues unchanged (%zu)\n", r["unchanged"].size());
  } else {
    std::printf("queues applied: created %s; changed %s; removed %s\n", list("created").c_str(),
                list("changed").c_str(), list("removed").c_str());
  }
  // A queue left out of the file is removed, `default` too (the shipped examples and every job
  // without `queue:` use it): say so, since jobs that name it are refused from now on.
  for (const auto& n : r.value("removed", nlohmann::json::array())) {
    const std::string name = n.get<std::string>();
    std::fprintf(
        stderr,
        "warning: queue '%s' was not in %s and is removed: jobs that name it are refused from now "
        "on%s; "
        "to keep it, add `- name: %s` to the file and apply it again\n",
        name.c_str(), file.c_str(),
        name == "default" ? " (the shipped examples and jobs without 'queue:' use it)" : "",
        name.c_str());
  }
  return Status::Ok();
}

// A count as the API gives it: a number (16, 0.5), or a milli-unit string ("16000m") from an
// older controller.
std::string Count(const nlohmann::json& v) {
  if (v.is_number()) return Num(v.get<double>());
  auto milli = ParseMilliGpu(v.is_string() ? v.get<std::string>() : v.dump());
  return milli.ok() ? Num(static_cast<double>(*milli) / 1000.0) : v.dump();
}

std::string Plural(const std::string& n, const char* one, const char* many) {
  return n + (n == "1" ? one : many);
}

// "16 GPUs, 256 cores, 2Ti memory"; GPUs of one model as "8 H100-SXM-80GB".
std::string Amounts(const nlohmann::json& a) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  if (a.contains("gpus")) {
    if (a["gpus"].is_object()) {
      for (const auto& [m, v] : a["gpus"].items()) add(Count(v) + " " + m);
    } else {
      add(Plural(Count(a["gpus"]), " GPU", " GPUs"));
    }
  }
  if (a.contains("cpu")) add(Plural(Count(a["cpu"]), " core", " cores"));
  if (a.contains("memory")) {
    const auto& m = a["memory"];
    auto mib = ParseMemoryMiB(m.is_string() ? m.get<std::string>() : m.dump());
    add((mib.ok() ? FormatMemoryMiB(*mib) : m.dump()) + " memory");
  }
  return out.empty() ? "-" : out;
}

Status Queues(const Common& c) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/queues"));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  Table t({"QUEUE", "GUARANTEE", "BORROW LIMIT", "LEND LIMIT", "WEIGHT", "IDLE POLICY", "USERS"});
  std::function<void(const nlohmann::json&, int)> walk = [&](const nlohmann::json& qs, int depth) {
    for (const auto& q : qs) {
      std::string idle = "-";
      if (q.contains("idle")) {
        auto d = ParseDuration(q["idle"].value("for", "0s"));
        idle = "<" + std::to_string(q["idle"].value("gpu_util_below", 0)) + "% for " +
               (d.ok() ? FormatDuration(*d) : q["idle"].value("for", "")) + ": " +
               q["idle"].value("action", "");
      }
      std::string users;
      for (const auto& u : q.value("users", nlohmann::json::array()))
        users += (users.empty() ? "" : ",") + u.get<std::string>();
      t.Add({std::string(2 * depth, ' ') + q.value("name", ""),
             Amounts(q.value("quota", nlohmann::json::object())),
             Amounts(q.value("borrowing_limit", nlohmann::json::object())),
             Amounts(q.value("lending_limit", nlohmann::json::object())),
             std::to_string(q.value("weight", 1)), idle, users.empty() ? "-" : users});
      walk(q.value("children", nlohmann::json::array()), depth + 1);
    }
  };
  walk(r["queues"], 0);
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

// A queue's GPU guarantee: of any model, then of each model it guarantees ("16 + 8 H100-SXM-80GB"
// for a group whose children guarantee 16 GPUs and 8 H100s). The per-model part is a guarantee of
// its own: leaving it out showed a queue with only a model quota as guaranteeing nothing.
std::string Guarantee(const nlohmann::json& q) {
  // guarantee_gpus counts the per-model guarantees too; the table shows them apart.
  const nlohmann::json by_model = q.value("guarantee_by_model", nlohmann::json::object());
  double models = 0;
  for (const auto& [model, n] : by_model.items()) models += n.get<double>();
  const double any = q.value("guarantee_gpus", 0.0) - models;
  std::string out = any > 0 ? Num(any) : "";
  for (const auto& [model, n] : by_model.items()) {
    out += (out.empty() ? "" : " + ") + Num(n.get<double>()) + " " + model;
  }
  return out.empty() ? "0" : out;
}

Status Share(const Common& c) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/share"));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  Table t({"QUEUE", "WEIGHT", "GUARANTEE", "IN USE", "BORROWED", "LENT", "SHARE", "RECENT",
           "PENDING", "HEAD JOB WAITS BECAUSE"});
  for (const auto& q : r["queues"]) {
    std::string head = "-";
    if (q.contains("head_job"))
      head = "#" + std::to_string(q["head_job"].get<uint64_t>()) + ": " + q.value("head_waits", "");
    char share[16], recent[16];
    std::snprintf(share, sizeof share, "%.1f%%", 100 * q.value("share", 0.0));
    std::snprintf(recent, sizeof recent, "%.1f%%", 100 * q.value("recent_share", 0.0));
    t.Add({std::string(2 * q.value("depth", 0), ' ') + q.value("name", ""),
           std::to_string(q.value("weight", 1)), Guarantee(q), Num(q.value("in_use_gpus", 0.0)),
           Num(q.value("borrowed_gpus", 0.0)), Num(q.value("lent_gpus", 0.0)), share, recent,
           std::to_string(q.value("pending", 0)), head});
  }
  std::printf("%s", t.Render().c_str());
  std::printf(
      "GPUs are whole GPUs; SHARE is the dominant share of the cluster over the weight, RECENT the "
      "same over "
      "usage remembered with a %lld s half-life.\n",
      static_cast<long long>(r.value("half_life_s", 0)));
  return Status::Ok();
}

Status Usage(const Common& c, const std::string& by, const std::string& since) {
  HANGAR_ASSIGN_OR_RETURN(auto r,
                          ApiClient(c.server).Get("/v1/usage?by=" + by + "&since=" + since));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  std::string key = by;
  for (auto& ch : key) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  Table t({key, "GPU-HOURS", "GUARANTEED", "OPPORTUNISTIC", "IDLE (WASTE)", "LOST TO PREEMPTION",
           "JOBS"});
  double total = 0, idle = 0, lost = 0;
  for (const auto& row : r["rows"]) {
    t.Add({row.value(by, ""), Num(row.value("gpu_hours", 0.0)),
           Num(row.value("guaranteed_gpu_hours", 0.0)),
           Num(row.value("opportunistic_gpu_hours", 0.0)), Num(row.value("idle_gpu_hours", 0.0)),
           Num(row.value("lost_to_preemption_gpu_hours", 0.0)),
           std::to_string(row.value("jobs", 0))});
    total += row.value("gpu_hours", 0.0);
    idle += row.value("idle_gpu_hours", 0.0);
    lost += row.value("lost_to_preemption_gpu_hours", 0.0);
  }
  t.Add({"total", Num(total), "", "", Num(idle), Num(lost), ""});
  std::printf("GPU-hours over the last %s\n%s", since.c_str(), t.Render().c_str());
  if (const int64_t stranded = r.value("stranded_gpus", int64_t{0}); stranded > 0) {
    std::printf("stranded now: %lld free GPUs on nodes with no CPU or memory left for them\n",
                static_cast<long long>(stranded));
  }
  return Status::Ok();
}

// Who a token's jobs run as, from `hangar token create`'s flags: --account NAME, or --uid N
// [--gid N] [--groups N,N,...].
struct TokenAccount {
  std::string account;
  int64_t uid = -1, gid = -1;  // -1: not given
  std::string groups;          // "61010,61011"
};

StatusOr<nlohmann::json> GroupList(const std::string& text) {
  nlohmann::json out = nlohmann::json::array();
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string one = text.substr(start, end - start);
    if (one.empty() || one.size() > 10 ||
        one.find_first_not_of("0123456789") != std::string::npos) {
      return Status::InvalidArgument(
          "--groups takes group ids separated by commas, e.g. 61010,61011; '" + one +
          "' is not a group id");
    }
    out.push_back(std::stoull(one));
    start = end + 1;
  }
  return out;
}

// "uid 61001 gid 61001 groups 61010,61011", "alice", or, for a token that names none, the
// account named like its user.
std::string RunsAs(const nlohmann::json& tok) {
  const std::string role = tok.value("role", "");
  if (role != "admin" && role != "queue-admin" && role != "user") return "-";
  const nlohmann::json r = tok.value("run_as", nlohmann::json::object());
  if (r.contains("uid")) {
    std::string out =
        "uid " + std::to_string(r.value("uid", 0u)) + " gid " + std::to_string(r.value("gid", 0u));
    const auto groups = r.value("groups", std::vector<uint32_t>{});
    for (size_t i = 0; i < groups.size(); ++i)
      out += (i ? "," : " groups ") + std::to_string(groups[i]);
    return out;
  }
  return r.value("account", tok.value("user", ""));
}

Status TokenCreate(const Common& c, const std::string& user, const std::string& role,
                   const std::string& node, const std::string& ttl, const TokenAccount& account) {
  nlohmann::json body = {{"role", role}};
  if (!user.empty()) body["user"] = user;
  if (!node.empty()) body["node"] = node;
  if (!ttl.empty()) body["ttl"] = ttl;
  if (!account.account.empty()) body["account"] = account.account;
  if (account.uid >= 0) body["uid"] = account.uid;
  if (account.gid >= 0) body["gid"] = account.gid;
  if (!account.groups.empty()) {
    HANGAR_ASSIGN_OR_RETURN(body["groups"], GroupList(account.groups));
  }
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post("/v1/tokens", body.dump()));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  std::printf("%s\n", r.value("token", "").c_str());
  const Time expires = r.value("expires_ms", Time{0});
  const std::string runs_as = RunsAs(r);
  std::fprintf(stderr, "token %s for %s (%s)%s, %s; it is shown only now: keep it secret\n",
               r.value("id", "").c_str(), r.value("user", "").c_str(), r.value("role", "").c_str(),
               runs_as == "-" ? "" : (", tasks run as " + runs_as).c_str(),
               expires ? ("expires " + FormatUtcTimestamp(expires)).c_str() : "never expires");
  return Status::Ok();
}

Status TokenRotate(const Common& c, const std::string& id) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post("/v1/tokens/" + id + "/rotate", "{}"));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  std::printf("%s\n", r.value("token", "").c_str());
  std::fprintf(
      stderr,
      "token %s replaces %s (revoked now) for %s (%s); it is shown only now: keep it secret\n",
      r.value("id", "").c_str(), id.c_str(), r.value("user", "").c_str(),
      r.value("role", "").c_str());
  return Status::Ok();
}

Status Audit(const Common& c, const std::string& user, int limit) {
  std::string path = "/v1/audit?limit=" + std::to_string(limit);
  if (!user.empty()) path += "&user=" + user;
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get(path));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  Table t({"TIME", "USER", "ROLE", "CALL", "FROM", "STATUS", "MESSAGE"});
  for (const auto& a : r["audit"]) {
    const std::string who = a.value("user", "");
    t.Add({FormatUtcTimestamp(a.value("time_ms", Time{0})), who.empty() ? "(no valid token)" : who,
           a.value("role", "-"), a.value("method", "") + " " + a.value("path", ""),
           a.value("remote", ""), std::to_string(a.value("status", 0)), a.value("message", "")});
  }
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

Status TokenList(const Common& c) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/tokens"));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  Table t({"ID", "USER", "ROLE", "NODE", "RUNS AS", "CREATED", "EXPIRES", "STATE"});
  const Time now = SystemClock().Now();
  for (const auto& tok : r["tokens"]) {
    const Time expires = tok.value("expires_ms", Time{0}),
               revoked = tok.value("revoked_ms", Time{0});
    const std::string state = revoked                     ? "revoked " + FormatUtcTimestamp(revoked)
                              : expires && now >= expires ? std::string("expired")
                                                          : std::string("live");
    t.Add({tok.value("id", ""), tok.value("user", ""), tok.value("role", ""),
           tok.value("node", "-"), RunsAs(tok),
           FormatUtcTimestamp(tok.value("created_ms", Time{0})),
           expires ? FormatUtcTimestamp(expires) : "never", state});
  }
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

Status TokenRevoke(const Common& c, const std::string& id) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Delete("/v1/tokens/" + id));
  if (c.output == "json")
    PrintJson(r);
  else
    std::printf("revoked token %s\n", id.c_str());
  return Status::Ok();
}

}  // namespace

void RegisterShareCommands(CLI::App& app, int* rc) {
  auto c = std::make_shared<Common>();
  auto file = std::make_shared<std::string>();
  CLI::App* apply = app.add_subcommand(
      "apply", "Apply a queues file: the queue tree, quotas and weights (docs/queues.md)");
  apply->add_option("-f,--file", *file, "queues.yaml")->required();
  AddCommon(apply, c.get());
  apply->callback([=] { Guard(rc, [&] { return Apply(*c, *file); }); });

  CLI::App* queues = app.add_subcommand(
      "queues", "Show the queue tree with quotas, limits, weights and idle policies");
  AddCommon(queues, c.get());
  queues->callback([=] { Guard(rc, [&] { return Queues(*c); }); });

  CLI::App* share = app.add_subcommand(
      "share", "Per queue: guarantee, in use, borrowed, lent, share, and why its head job waits");
  AddCommon(share, c.get());
  share->callback([=] { Guard(rc, [&] { return Share(*c); }); });

  CLI::App* usage =
      app.add_subcommand("usage", "GPU-hours by queue or user, with idle and preempted waste");
  // Its own variables: a shared vector once let `apply -f` and `usage --by` write the same string.
  auto usage_by = std::make_shared<std::string>("queue");
  auto usage_since = std::make_shared<std::string>("7d");
  usage->add_option("--by", *usage_by, "queue or user")
      ->check(CLI::IsMember({"queue", "user"}))
      ->capture_default_str();
  usage->add_option("--since", *usage_since, "How far back, e.g. 7d, 24h")->capture_default_str();
  AddCommon(usage, c.get());
  usage->callback([=] { Guard(rc, [&] { return Usage(*c, *usage_by, *usage_since); }); });

  auto t = std::make_shared<std::vector<std::string>>(5);
  CLI::App* token = app.add_subcommand("token", "API tokens (RBAC, docs/rbac.md); admins only");
  token->require_subcommand(1);
  CLI::App* create = token->add_subcommand("create", "Make a token; prints it once");
  create->add_option("--user", (*t)[0], "Who the token acts as");
  create->add_option("--role", (*t)[1], "admin, queue-admin, user, viewer or node")
      ->required()
      ->check(CLI::IsMember({"admin", "queue-admin", "user", "viewer", "node"}));
  create->add_option("--node", (*t)[2], "For --role node: the node whose agent uses it");
  create->add_option(
      "--ttl", (*t)[4],
      "How long it lives, e.g. 30d, 12h, or never (default: 90d; node tokens never)");
  auto account = std::make_shared<TokenAccount>();
  create->add_option(
      "--account", account->account,
      "The Unix account its jobs' tasks run as, resolved on each node (default: the account named "
      "like --user)");
  create
      ->add_option("--uid", account->uid,
                   "Or: the uid its tasks run as (no account needed on the nodes)")
      ->check(CLI::Range(int64_t{0}, int64_t{4294967294}));
  create
      ->add_option("--gid", account->gid,
                   "With --uid: the primary group (default: the same number as --uid)")
      ->check(CLI::Range(int64_t{0}, int64_t{4294967294}));
  create->add_option("--groups", account->groups,
                     "With --uid: supplementary group ids, e.g. 61010,61011");
  AddCommon(create, c.get());
  create->callback([=] {
    Guard(rc, [&] { return TokenCreate(*c, (*t)[0], (*t)[1], (*t)[2], (*t)[4], *account); });
  });
  CLI::App* list = token->add_subcommand("list", "List tokens (never their secrets)");
  AddCommon(list, c.get());
  list->callback([=] { Guard(rc, [&] { return TokenList(*c); }); });
  CLI::App* revoke = token->add_subcommand("revoke", "Revoke a token by its id");
  revoke->add_option("id", (*t)[3], "Token id (`hangar token list`)")->required();
  AddCommon(revoke, c.get());
  revoke->callback([=] { Guard(rc, [&] { return TokenRevoke(*c, (*t)[3]); }); });
  CLI::App* rotate = token->add_subcommand(
      "rotate", "A new secret for a token's user and role; the old one is revoked");
  rotate->add_option("id", (*t)[3], "Token id (`hangar token list`)")->required();
  AddCommon(rotate, c.get());
  rotate->callback([=] { Guard(rc, [&] { return TokenRotate(*c, (*t)[3]); }); });

  auto a = std::make_shared<std::pair<std::string, int>>("", 100);
  CLI::App* audit = app.add_subcommand(
      "audit", "Every mutating API call: who, what, when, from where, result; admins only");
  audit->add_option("--user", a->first, "Only this user's calls");
  audit->add_option("--limit", a->second, "How many, newest first")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  AddCommon(audit, c.get());
  audit->callback([=] { Guard(rc, [&] { return Audit(*c, a->first, a->second); }); });
}

}  // namespace hangar::cli
