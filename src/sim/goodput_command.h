// `hangar sim goodput`: one large training job and a trace's jobs through failures, under three
// recovery policies (docs/goodput.md).
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::sim {

void RegisterGoodputCommand(CLI::App& sim, int* rc);

}  // namespace hangar::sim
