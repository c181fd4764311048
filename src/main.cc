// The one binary: `hangar controller | agent | dev | sim | swarm` and the user commands. Each
// module registers its own subcommands; this file only wires them together.
#include <absl/synchronization/mutex.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "agent/agent_command.h"
#include "cli/certs.h"
#include "cli/cli_commands.h"
#include "cli/interactive_commands.h"
#include "cli/service_commands.h"
#include "cli/slurm_commands.h"
#include "cli/slurm_tools.h"
#include "common/version.h"
#include "common/yaml_util.h"
#include "controller/backup_command.h"
#include "controller/controller_command.h"
#include "controller/dev_command.h"
#include "sim/sim_command.h"
#include "swarm/swarm_command.h"

namespace {

// CLI11 answers "A subcommand is required" both when none is given and when the word given is no
// command at all, at any depth (`hangar token craete`); say which, what the commands there are,
// and the nearest one. Returns the message, or "" when argv is fine.
std::string CommandProblem(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return "no command given; run 'hangar --help' for the list";
  const CLI::App* at = &app;
  std::string path = "hangar";
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') return "";  // options (and --help): CLI11's own
    const auto subs = at->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) return "";  // a leaf command: the rest are its arguments
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : subs) {
      if (sub->check_name(word)) next = sub;
    }
    if (next) {
      at = next;
      path += " " + word;
      continue;
    }
    if (at->get_require_subcommand_min() == 0) return "";  // a command that takes arguments too
    if (const std::string slurm = hangar::cli::SlurmCommandHint(word); at == &app && !slurm.empty())
      return "unknown command 'hangar " + word + "': " + slurm +
             "; docs/slurm-commands.md lists them all";
    std::string names;
    std::vector<std::string> known;
    for (const CLI::App* sub : subs) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known.push_back(sub->get_name());
    }
    const std::vector<std::string_view> views(known.begin(), known.end());
    const std::string nearest = hangar::ClosestKey(word, views);
    return "unknown command '" + path + " " + word + "'" +
           (nearest.empty() ? std::string(".") : "; did you mean '" + path + " " + nearest + "'?") +
           " The commands of '" + path + "' are: " + names + "; run '" + path + " --help' for more";
  }
  if (at != &app && at->get_require_subcommand_min() > 0) {
    std::string names;
    for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    return "'" + path + "' needs a command: " + names + "; run '" + path + " --help' for more";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds abseil without NDEBUG, so every absl::Mutex lock (gRPC takes them on each
  // completion) also updated a process-wide lock-order graph to detect deadlocks: 1-4% of the
  // controller's and the swarm's CPU at 10,240 agents, behind one global lock. Production
  // builds of abseil do not do it; neither does Hangar.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"Hangar: a control plane for multi-node GPU clusters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hangar " + std::string(hangar::Version()));
  app.add_subcommand("version",
                     "Print Hangar's version (docs/operations.md, \"Versions and upgrades\")")
      ->callback([] { std::printf("hangar %s\n", std::string(hangar::Version()).c_str()); });
  int rc = 0;
  hangar::controller::RegisterDevCommand(app, &rc);
  hangar::controller::RegisterControllerCommand(app, &rc);
  hangar::controller::RegisterBackupCommands(app, &rc);
  hangar::agent::RegisterAgentCommand(app, &rc);
  hangar::cli::RegisterUserCommands(app, &rc);
  hangar::cli::RegisterInteractiveCommands(app, &rc);
  hangar::cli::RegisterSlurmCommands(app, &rc);
  hangar::cli::RegisterShareCommands(app, &rc);
  hangar::cli::RegisterStatusCommand(app, &rc);
  hangar::cli::RegisterCertsCommand(app, &rc);
  hangar::cli::RegisterServiceCommands(app, &rc);
  hangar::cli::RegisterReservationCommands(app, &rc);
  hangar::cli::RegisterMaintainCommands(app, &rc);
  hangar::cli::RegisterTopologyCommands(app, &rc);
  hangar::cli::RegisterGoodputCommand(app, &rc);
  hangar::sim::RegisterSimCommand(app, &rc);
  hangar::agent::RegisterProgressCommand(app, &rc);
  hangar::agent::RegisterPreflightCommand(app, &rc);
  hangar::swarm::RegisterSwarmCommand(app, &rc);
  if (const std::string problem = CommandProblem(app, argc, argv); !problem.empty()) {
    std::fprintf(stderr, "error: %s\n", problem.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return rc;
}
