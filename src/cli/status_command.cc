// `hangar status`: who leads the controllers, since when and at which epoch.
#include <cstdio>

#include "cli/cli_commands.h"
#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/time.h"

namespace hangar::cli {
namespace {

Status PrintStatus(const Common& c) {
  ApiClient api(c.server);
  HANGAR_ASSIGN_OR_RETURN(nlohmann::json r, api.Get("/v1/leader"));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  const std::string role = r.value("role", "");
  std::printf("controller  %s (%s)\n", api.server().c_str(), role.c_str());
  if (role == "single") {
    std::printf("leader      this one: its store has a single owner (no leader election)\n");
    return Status::Ok();
  }
  if (const auto& f = r.value("following", nlohmann::json()); f.is_object()) {
    if (f.value("every_ms", int64_t{0}) <= 0) {
      std::printf(
          "copy        none (--standby-follow 0: it loads the whole store when it takes over)\n");
    } else if (f["caught_up_ms_ago"].is_null()) {
      std::printf("copy        not yet (it cannot read the store; see its log)\n");
    } else {
      std::printf("copy        %lld jobs at revision %lld, caught up %lld ms ago (every %lld ms)\n",
                  static_cast<long long>(f.value("jobs", int64_t{0})),
                  static_cast<long long>(f.value("rev", int64_t{0})),
                  static_cast<long long>(f.value("caught_up_ms_ago", int64_t{0})),
                  static_cast<long long>(f.value("every_ms", int64_t{0})));
    }
  }
  const nlohmann::json& l = r["leader"];
  if (!l.is_object() || l.value("lease_left_ms", int64_t{0}) <= 0) {
    std::printf(
        "leader      none right now (the lease is free or expiring; a standby takes it within a "
        "lease)\n");
    return Status::Ok();
  }
  const int64_t since = l.value("since_ms", int64_t{0});
  std::printf("leader      %s at %s\n", l.value("name", "").c_str(), l.value("api", "").c_str());
  std::printf("epoch       %lld\n", static_cast<long long>(l.value("epoch", int64_t{0})));
  std::printf("since       %s (%s)\n", FormatUtcTimestamp(since).c_str(),
              Ago(since, SystemClock::Default()->Now()).c_str());
  return Status::Ok();
}

}  // namespace

void RegisterStatusCommand(CLI::App& app, int* rc) {
  auto c = std::make_shared<Common>();
  CLI::App* cmd =
      app.add_subcommand("status", "Which controller leads, since when and at which epoch");
  AddCommon(cmd, c.get());
  cmd->callback([=] { Guard(rc, [&] { return PrintStatus(*c); }); });
}

}  // namespace hangar::cli
