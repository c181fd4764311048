#include "cluster/gpu_types.h"

#include <algorithm>
#include <cctype>

namespace hangar::cluster {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsTypeName(std::string_view s) {
  return !s.empty() && s.size() <= 63 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

std::string ModelList(const Topology& t) {
  std::string known;
  for (const auto& m : t.models()) {
    if (!m.empty()) known += (known.empty() ? "" : ", ") + m;
  }
  return known.empty() ? "none (no node has GPUs)" : known;
}

}  // namespace

std::optional<std::vector<std::string>> GpuTypes::ModelsOf(std::string_view type) const {
  auto it = types.find(Lower(type));
  if (it == types.end()) return std::nullopt;
  return it->second;
}

std::string GpuTypes::Names() const {
  std::string out;
  for (const auto& [name, models] : types) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

StatusOr<GpuTypes> ParseGpuTypes(const YamlSource& src, const YAML::Node& node, const Topology& t) {
  if (!node.IsMap()) {
    return src.Error(node,
                     "gpu_types must be a map of Slurm GPU type: model (or a list of models), e.g. "
                     "{a100: A100-SXM-80GB}");
  }
  GpuTypes out;
  for (const auto& kv : node) {
    const std::string type = kv.first.as<std::string>("");
    if (!IsTypeName(type)) {
      return src.Error(
          kv.first, "gpu_types: '" + type.substr(0, 80) +
                        "' is not a GPU type name; write letters, digits, '_', '-' or '.' as Slurm "
                        "does (a100, A100_40GB)");
    }
    std::vector<std::string> models;
    if (kv.second.IsScalar()) {
      models.push_back(kv.second.as<std::string>(""));
    } else if (kv.second.IsSequence() && kv.second.size() > 0) {
      for (const auto& m : kv.second) models.push_back(m.IsScalar() ? m.as<std::string>("") : "");
    } else {
      return src.Error(kv.second, "gpu_types." + type + " must be a model or a list of models");
    }
    for (const auto& m : models) {
      if (!t.FindModel(m) || m.empty()) {
        return src.Error(kv.second,
                         "gpu_types." + type + ": '" + m.substr(0, 80) +
                             "' is not the gpu_model of any node; the models are: " + ModelList(t));
      }
    }
    if (!out.types.emplace(Lower(type), std::move(models)).second) {
      return src.Error(kv.first,
                       "gpu_types: '" + type +
                           "' is given twice (types match without regard to case); keep one");
    }
  }
  return out;
}

}  // namespace hangar::cluster
