// The dashboard's cluster map (web_ui.h): its facts gathered on the state owner's thread in one
// pass (CollectMap), then turned into JSON text off that thread (MapRows, MapBody), and gzip.
#include "controller/dashboard_map.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <tuple>

#include "cluster/mig_geometry.h"

namespace hangar::controller::web {

namespace {

// Who holds each GPU, and the grants of part of one (fractions, MIG instances).
void CollectGrants(const ClusterState& st, MapData* d, std::vector<bool>* held) {
  for (const auto& [job, g] : st.GpuGrants()) {
    if (g.gpu >= held->size()) continue;
    (*held)[g.gpu] = true;
    d->holders.emplace_back(g.gpu, job);
    const bool mig = g.mig_start >= 0;
    if (g.milli >= 1000 && !mig) continue;
    uint8_t slices = 0;
    if (mig)
      slices = static_cast<uint8_t>(
          cluster::ShapeInfo(static_cast<cluster::MigShape>(g.mig_shape)).memory_slices);
    d->shares.push_back({g.gpu, job, g.milli, g.mig_start, slices});
  }
  std::sort(d->holders.begin(), d->holders.end());
  d->holders.erase(std::unique(d->holders.begin(), d->holders.end()), d->holders.end());
  std::sort(d->shares.begin(), d->shares.end(),
            [](const MapData::Share& a, const MapData::Share& b) {
              return std::tie(a.gpu, a.mig_start, a.job) < std::tie(b.gpu, b.mig_start, b.job);
            });
}

}  // namespace

MapData CollectMap(const ClusterState& st) {
  const cluster::Topology& topo = st.topology();
  MapData d;
  d.cluster = topo.name();
  for (const auto& s : topo.spines()) d.spines.push_back(s.name);
  for (const auto& l : topo.leaves()) d.leaves.push_back(l.name);
  const size_t gpus = topo.gpus().size();
  d.codes.assign(gpus, 'o');
  d.util.assign(gpus, 0);
  d.temp.assign(gpus, 0);
  std::vector<bool> held(gpus, false);
  CollectGrants(st, &d, &held);
  auto states = st.NodeStates();
  d.nodes.reserve(topo.nodes().size());
  for (uint32_t n = 0; n < topo.nodes().size(); ++n) {
    const cluster::NodeInfo& info = topo.nodes()[n];
    d.nodes.push_back({info.name, std::move(states[n].second), info.spine, info.leaf,
                       info.first_gpu, info.num_gpus});
    const NodeRecord& r = st.node_record(n);
    if (!r.connected) continue;
    const std::string& state = d.nodes.back().state;
    const health::HealthState node_health = st.health().node_state(n);
    for (uint32_t i = 0; i < info.num_gpus && i < r.gpus.size(); ++i) {
      const uint32_t g = info.first_gpu + i;
      const std::string_view health =
          health::StateName(std::max(st.health().gpu_state(g), node_health));
      d.codes[g] = GpuCode(health, state, held[g], r.gpus[i].util_pct);
      d.util[g] = static_cast<uint8_t>(std::min<uint32_t>(r.gpus[i].util_pct, 255));
      d.temp[g] = static_cast<uint8_t>(std::min<uint32_t>(r.gpus[i].temperature_c, 255));
    }
  }
  return d;
}

namespace {

void AppendString(std::string* out, const std::string& s) {
  *out += nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

template <typename T>
void AppendNumber(std::string* out, T v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, end);
}

void AppendBytes(std::string* out, const std::vector<uint8_t>& v, uint32_t from, uint32_t n) {
  *out += '[';
  for (uint32_t i = 0; i < n; ++i) {
    if (i) *out += ',';
    AppendNumber(out, static_cast<unsigned>(v[from + i]));
  }
  *out += ']';
}

// The jobs holding the node's GPUs, in GPU order, once each; then its grants of part of a GPU.
void AppendJobsAndShares(std::string* out, const MapData& d, const MapData::Node& node) {
  const uint32_t end = node.first_gpu + node.num_gpus;
  std::vector<uint64_t> jobs;
  auto h = std::lower_bound(d.holders.begin(), d.holders.end(),
                            std::make_pair(node.first_gpu, uint64_t{0}));
  for (; h != d.holders.end() && h->first < end; ++h) {
    if (std::find(jobs.begin(), jobs.end(), h->second) == jobs.end()) jobs.push_back(h->second);
  }
  *out += '[';
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (i) *out += ',';
    AppendNumber(out, jobs[i]);
  }
  *out += "],[";
  auto s = std::lower_bound(d.shares.begin(), d.shares.end(), node.first_gpu,
                            [](const MapData::Share& a, uint32_t gpu) { return a.gpu < gpu; });
  for (bool first = true; s != d.shares.end() && s->gpu < end; ++s, first = false) {
    if (!first) *out += ',';
    *out += '[';
    AppendNumber(out, s->gpu - node.first_gpu);
    *out += ',';
    AppendNumber(out, s->job);
    *out += ',';
    AppendNumber(out, s->milli);
    *out += ',';
    AppendNumber(out, static_cast<int>(s->mig_start));
    *out += ',';
    AppendNumber(out, static_cast<unsigned>(s->mig_slices));
    *out += ']';
  }
  *out += ']';
}

}  // namespace

std::vector<std::string> MapRows(const MapData& d) {
  std::vector<std::string> spines, leaves;  // names as JSON text, once each
  for (const auto& s : d.spines) AppendString(&spines.emplace_back(), s);
  for (const auto& l : d.leaves) AppendString(&leaves.emplace_back(), l);
  std::vector<std::string> rows;
  rows.reserve(d.nodes.size());
  for (const MapData::Node& node : d.nodes) {
    std::string& row = rows.emplace_back();
    row.reserve(64 + node.num_gpus * 10);
    row += '[';
    AppendString(&row, node.name);
    row += ',' + (node.spine < spines.size() ? spines[node.spine] : "\"\"");
    row += ',' + (node.leaf < leaves.size() ? leaves[node.leaf] : "\"\"");
    row += ',';
    AppendString(&row, node.state);
    row += ",\"" + d.codes.substr(node.first_gpu, node.num_gpus) + "\",";
    AppendBytes(&row, d.util, node.first_gpu, node.num_gpus);
    row += ',';
    AppendBytes(&row, d.temp, node.first_gpu, node.num_gpus);
    row += ',';
    AppendJobsAndShares(&row, d, node);
    row += ']';
  }
  return rows;
}

std::string MapBody(const std::string& cluster, const std::vector<std::string>& rows,
                    uint64_t snapshot) {
  size_t size = 64 + cluster.size();
  for (const auto& r : rows) size += r.size() + 1;
  std::string out;
  out.reserve(size);
  out += "{\"cluster\":";
  AppendString(&out, cluster);
  out += ",\"snapshot\":";
  AppendNumber(&out, snapshot);
  out += ",\"nodes\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) out += ',';
    out += rows[i];
  }
  out += "]}\n";
  return out;
}

nlohmann::json MapJson(const ClusterState& st) {
  const MapData d = CollectMap(st);
  return nlohmann::json::parse(MapBody(d.cluster, MapRows(d), 0));
}

std::string Gzip(std::string_view text, int level) {
  z_stream z{};
  // 15 + 16: a gzip header and trailer around the deflate stream.
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return "";
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int r = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return r == Z_STREAM_END ? out : std::string();
}

}  // namespace hangar::controller::web
