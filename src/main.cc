// The one binary: `hangar controller | agent | dev | sim | swarm` and the user commands. Each
// module registers its own subcommands; this file only wires them together.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "agent/agent_command.h"
#include "cli/certs.h"
#include "cli/cli_commands.h"
#include "controller/controller_command.h"
#include "controller/dev_command.h"
#include "sim/sim_command.h"
#include "swarm/swarm_command.h"

namespace {

// CLI11 answers "A subcommand is required" both when none is given and when the word given is no
// command at all; say which, and where the list is. Returns the message, or "" when argv is fine.
std::string CommandProblem(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return "no command given; run 'hangar --help' for the list";
  const std::string word = argv[1];
  if (word.empty() || word[0] == '-') return "";  // --help, --version: CLI11's own
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(word)) return "";
  }
  return "unknown command '" + word + "'; run 'hangar --help' for the list";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Hangar: a control plane for multi-node GPU clusters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("hangar 0.1.0"));
  int rc = 0;
  hangar::controller::RegisterDevCommand(app, &rc);
  hangar::controller::RegisterControllerCommand(app, &rc);
  hangar::agent::RegisterAgentCommand(app, &rc);
  hangar::cli::RegisterUserCommands(app, &rc);
  hangar::cli::RegisterShareCommands(app, &rc);
  hangar::cli::RegisterCertsCommand(app, &rc);
  hangar::sim::RegisterSimCommand(app, &rc);
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
