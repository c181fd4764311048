#include "sim/replay/artifacts.h"

#include <algorithm>
#include <bit>

namespace hangar::sim {

uint64_t Fnv1a64(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

constexpr double kGB = 1e9;

double Unit(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

}  // namespace

SimArtifact ArtifactCatalogue::Object(const std::string& name, int64_t bytes) {
  auto [it, fresh] = ids_.try_emplace(name, static_cast<uint32_t>(ids_.size()));
  if (fresh) bytes_ += bytes;
  return {it->second, bytes};
}

std::vector<SimArtifact> ArtifactCatalogue::For(const TraceJob& j) {
  const int64_t gpus = static_cast<int64_t>(j.replicas) * j.gpus_per_replica;
  if (gpus <= 0) return {};
  const std::string g = j.partition.empty() ? j.queue : j.partition;
  const int c = std::min(static_cast<int>(std::bit_width(static_cast<uint64_t>(gpus - 1))), 5);
  const std::string day =
      std::to_string(j.submit >= 0 ? j.submit / kDay : -((-j.submit + kDay - 1) / kDay));
  const std::string cls = std::to_string(c);
  std::vector<SimArtifact> out;
  const uint64_t m =
      Fnv1a64(g + "|model|" + cls + "|" + day) % static_cast<uint64_t>(rule_.models_per_class);
  const std::string model = g + "|model|" + cls + "|" + std::to_string(m);
  const double model_bytes = 2 * kGB * static_cast<double>(1 << c) * (1 + 3 * Unit(Fnv1a64(model)));
  out.push_back(Object(model, static_cast<int64_t>(model_bytes)));
  if (rule_.datasets) {
    const uint64_t d =
        Fnv1a64(g + "|data|" + cls + "|" + day) % static_cast<uint64_t>(rule_.datasets_per_group);
    const std::string data = g + "|data|" + std::to_string(d);
    out.push_back(Object(data, static_cast<int64_t>(8 * kGB * (1 + 7 * Unit(Fnv1a64(data))))));
  }
  return out;
}

ArtifactCatalogue AttachArtifacts(std::vector<TraceJob>* jobs, const ArtifactRule& rule) {
  ArtifactCatalogue catalogue(rule);
  for (TraceJob& j : *jobs) {
    j.artifacts = catalogue.For(j);
  }
  return catalogue;
}

}  // namespace hangar::sim
