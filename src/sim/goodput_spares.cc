// The replacement logic lives in sched/placement/replacement.cc, shared with the controller's
// spare pool (spare_pool.h); this unit keeps the simulator's names for it compiling on their own.
#include "sim/goodput_spares.h"
