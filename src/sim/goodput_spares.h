// Replacing one node of a running gang in `hangar sim goodput`'s loop: the scheduler's own
// replacement logic (sched/placement/replacement.h), which the controller's spare pool uses too.
#pragma once

#include "sched/placement/replacement.h"

namespace hangar::sim {

using sched::MoveTasks;
using sched::NodeTakesTask;
using sched::PickReplacement;
using sched::WithoutTasks;

}  // namespace hangar::sim
