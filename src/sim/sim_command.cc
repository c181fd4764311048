#include "sim/sim_command.h"

#include "sim/controller/controller_engine.h"
#include "sim/fgd/fgd_command.h"
#include "sim/goodput_command.h"
#include "sim/mig/mig_command.h"
#include "sim/replay/replay_command.h"
#include "sim/services/services_command.h"
#include "sim/windows/windows_command.h"

namespace hangar::sim {

void RegisterSimCommand(CLI::App& app, int* rc) {
  CLI::App* sim = app.add_subcommand("sim", "Replay traces through the production scheduler");
  sim->require_subcommand(1);
  RegisterFgdCommand(*sim, rc);
  RegisterMigCommand(*sim, rc);
  RegisterReplayCommand(*sim, rc, {{"controller", MakeControllerEngine}});
  RegisterGoodputCommand(*sim, rc);
  RegisterServicesCommand(*sim, rc);
  RegisterWindowsCommand(*sim, rc);
}

}  // namespace hangar::sim
