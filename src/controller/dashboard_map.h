// The dashboard's reads of the state (dashboard_map.cc, dashboard_views.cc): the cluster map in
// one compact answer, and the queue in the scheduler's order. CollectMap and QueueJson read
// ClusterState and run on the state owner's thread. Apart from web_ui.h, which serves them, so
// that the live feed and the history sampler use them without including the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "controller/state/auth.h"
#include "controller/state/cluster_state.h"

namespace hangar::controller::web {

// One GPU's state on the map, as one letter: f free, a allocated, i allocated but idle (below
// kIdleUtilPct), v validating, s suspect (or degraded), d draining, q quarantined (or failed),
// o offline (its node is lost, drained or not connected).
inline constexpr unsigned kIdleUtilPct = 5;
char GpuCode(std::string_view health, std::string_view node_state, bool held, unsigned util_pct);

// The map's facts, read on the state owner's thread in one pass: flat arrays, no JSON and no
// string per GPU, so that the state thread spends a few milliseconds on 81,920 GPUs. Turned into
// JSON text (MapRows) on another thread.
struct MapData {
  struct Node {
    std::string name, state;
    uint32_t spine = 0, leaf = 0, first_gpu = 0, num_gpus = 0;
  };
  struct Share {       // a grant of part of one GPU: a fraction, or a MIG instance
    uint32_t gpu = 0;  // global index
    uint64_t job = 0;
    int32_t milli = 0;
    int8_t mig_start = -1;   // MIG: first memory slice (0-7); -1 for a fraction
    uint8_t mig_slices = 0;  // MIG: memory slices it takes (of 8)
  };
  std::string cluster;
  std::vector<std::string> spines, leaves;
  std::vector<Node> nodes;                             // fabric order
  std::string codes;                                   // per GPU (global index): GpuCode
  std::vector<uint8_t> util, temp;                     // per GPU: %, degrees C (capped at 255)
  std::vector<std::pair<uint32_t, uint64_t>> holders;  // (GPU, job), sorted, once per pair
  std::vector<Share> shares;                           // sorted by GPU
};
MapData CollectMap(const ClusterState& st);
// Each node's row as JSON text, in fabric order: [name, spine, leaf, state, codes, utils, temps,
// jobs, shares] (codes: one letter per GPU; utils and temps per GPU; jobs: ids holding its GPUs;
// shares: [gpu, job, milli, mig_start, mig_slices] for each grant of part of a GPU, gpu counted
// from 0 on the node, mig_start -1 for a fraction).
std::vector<std::string> MapRows(const MapData& d);
// The map's answer: {"cluster": name, "snapshot": seq, "nodes": [rows...]} (`snapshot` names it
// to the live feed: GET /v1/dashboard/feed?since=seq sends what changed after it).
std::string MapBody(const std::string& cluster, const std::vector<std::string>& rows,
                    uint64_t snapshot);
// The three above in one, parsed (for tests).
nlohmann::json MapJson(const ClusterState& st);
// `text` gzip-compressed ("" if zlib fails); level 1 takes ~10 ms for the 1 MB map. The dashboard
// compresses its answers and files itself (web_ui.cc: Send), since cpp-httplib would compress
// them with Brotli at quality 11 for every browser: 2-3 s for the map.
std::string Gzip(std::string_view text, int level = 1);

// The pending jobs `p` may see in the last cycle's order (then those submitted since), from
// `offset`, at most `limit`: id, name, user, queue, GPUs, the blocker sentence and rule, the
// position in its queue (1 = next; counting every pending job, seen or not) and the estimated
// start of a backfill reservation (null when the plan has none). "total": how many `p` may see.
nlohmann::json QueueJson(const ClusterState& st, const Principal& p, size_t offset, size_t limit);

}  // namespace hangar::controller::web
