// The web dashboard's server side (issue 21, docs/dashboard.md): the app's files, compiled into
// the binary from web/dashboard/ at build time and served at / and /ui/..., and the reads the REST
// API lacked for it -- the cluster map in one compact answer, the queue in the scheduler's order
// with positions and estimated starts, and a live feed of changes (server-sent events).
// The builders below read ClusterState and run on the state owner's thread.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "controller/state/auth.h"
#include "controller/state/cluster_state.h"

namespace hangar::controller::web {

struct Asset {
  std::string_view path;  // relative to web/dashboard/, e.g. "app.js"
  std::string_view body;
};
// The dashboard's files (generated: web_assets.cc).
const std::vector<Asset>& Assets();
// The asset at `path`, or null.
const Asset* FindAsset(std::string_view path);
std::string_view ContentTypeOf(std::string_view path);

// One GPU's state on the map, as one letter: f free, a allocated, i allocated but idle (below
// kIdleUtilPct), v validating, s suspect (or degraded), d draining, q quarantined (or failed),
// o offline (its node is lost, drained or not connected).
inline constexpr unsigned kIdleUtilPct = 5;
char GpuCode(const std::string& health, const std::string& node_state, bool held,
             unsigned util_pct);

// The map: every node in fabric order as [name, spine, leaf, state, codes, utils, temps, jobs]
// (codes: one letter per GPU; utils and temps per GPU; jobs: ids holding its GPUs).
nlohmann::json MapJson(const ClusterState& st);
// The pending jobs `p` may see in the last cycle's order (then those submitted since), from
// `offset`, at most `limit`: id, name, user, queue, GPUs, the blocker sentence and rule, the
// position in its queue (1 = next; counting every pending job, seen or not) and the estimated
// start of a backfill reservation (null when the plan has none). "total": how many `p` may see.
nlohmann::json QueueJson(const ClusterState& st, const Principal& p, size_t offset, size_t limit);

}  // namespace hangar::controller::web
