#include "sim/fgd/fgd_command.h"

namespace hangar::sim {

void RegisterFgdCommand(CLI::App& sim, int* rc) {
  (void)sim;
  (void)rc;
}

}  // namespace hangar::sim
