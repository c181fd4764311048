#include "job/gpu_type_names.h"

#include <algorithm>

namespace hangar::job {

namespace {

void AddOnce(std::vector<std::string>* list, const std::string& name) {
  if (std::find(list->begin(), list->end(), name) == list->end()) list->push_back(name);
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

}  // namespace

Status ResolveGpuTypes(const cluster::GpuTypes& types, const cluster::Topology& t, JobSpec* spec) {
  for (auto& g : spec->tasks) {
    if (g.gpu.kind == GpuKind::kNone || g.gpu_models.empty()) continue;
    std::vector<std::string> models, unknown;
    for (const auto& name : g.gpu_models) {
      if (t.FindModel(name)) {
        AddOnce(&models, name);
      } else if (auto mapped = types.ModelsOf(name)) {
        for (const auto& m : *mapped) AddOnce(&models, m);
      } else {
        unknown.push_back(name);
      }
    }
    // Refused only where the site maps its GPU types: there a name that is neither is surely a
    // typo. Without gpu_types an unknown model is kept as written: the job waits as never
    // placeable and `hangar explain` says why (a node of that model may join later).
    if (models.empty() && !types.empty()) {
      std::string known;
      for (const auto& m : t.models()) {
        if (!m.empty()) known += (known.empty() ? "" : ", ") + m;
      }
      return Status::InvalidArgument(
          "task group '" + g.name + "' asks for GPU " + (unknown.size() == 1 ? "type " : "types ") +
          Join(unknown) +
          ", which this cluster has neither as a model nor as a GPU type; its GPU types "
          "(cluster.yaml's gpu_types) "
          "are: " +
          types.Names() + "; its models are: " + (known.empty() ? "none" : known) +
          "; ask for one of them, or have an admin map the type in gpu_types");
    }
    for (const auto& u : unknown) AddOnce(&models, u);  // matches no node, as written
    g.gpu_models = std::move(models);
  }
  return Status::Ok();
}

}  // namespace hangar::job
