// The one binary: `hangar controller | agent | dev | sim | swarm` and the user commands. Each
// module registers its own subcommands; this file only wires them together.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "agent/agent_command.h"
#include "cli/cli_commands.h"
#include "controller/controller_command.h"
#include "controller/dev_command.h"
#include "sim/sim_command.h"
#include "swarm/swarm_command.h"

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
  hangar::sim::RegisterSimCommand(app, &rc);
  hangar::swarm::RegisterSwarmCommand(app, &rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return rc;
}
