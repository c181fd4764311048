#include "agent/gpu/fault_script.h"

#include <array>
#include <charconv>
#include <fstream>
#include <sstream>

#include "common/yaml_util.h"

namespace hangar::agent {
namespace {

struct KindInfo {
  FaultKind kind;
  std::string_view name;
  std::string_view field;  // the kind's own field besides at/gpu/node/kind ("" for none)
  bool timed;              // takes `duration`
};

constexpr std::array<KindInfo, 8> kKinds = {{
    {FaultKind::kXid, "xid", "code", false},
    {FaultKind::kThermalThrottle, "thermal_throttle", "", true},
    {FaultKind::kPcieDowngrade, "pcie_downgrade", "gen", true},
    {FaultKind::kEccSbe, "ecc_sbe", "count", false},
    {FaultKind::kEccDbe, "ecc_dbe", "count", false},
    {FaultKind::kNvlinkDown, "nvlink_down", "", true},
    {FaultKind::kFallOffBus, "fall_off_bus", "", false},
    {FaultKind::kSlow, "slow", "factor", true},
}};

const KindInfo& Info(FaultKind kind) {
  for (const auto& k : kKinds) {
    if (k.kind == kind) return k;
  }
  return kKinds[0];
}

StatusOr<const KindInfo*> ParseKind(const YamlSource& src, const YAML::Node& entry) {
  HANGAR_ASSIGN_OR_RETURN(std::string name, src.String(entry, "kind"));
  std::string all;
  for (const auto& k : kKinds) {
    if (k.name == name) return &k;
    all += (all.empty() ? "" : ", ") + std::string(k.name);
  }
  return src.Error(entry["kind"], "unknown fault kind '" + name + "'; the kinds are: " + all);
}

// A field that belongs to other kinds is a mistake worth naming.
Status CheckFieldsForKind(const YamlSource& src, const YAML::Node& entry, const KindInfo& kind) {
  for (std::string_view field : {"code", "count", "gen", "width", "factor", "duration"}) {
    if (!entry[std::string(field)].IsDefined()) continue;
    const bool own = field == kind.field || (field == "width" && kind.field == "gen") ||
                     (field == "duration" && kind.timed);
    if (!own) {
      return src.Error(entry[std::string(field)], "'" + std::string(field) +
                                                      "' does not apply to a fault of kind " +
                                                      std::string(kind.name));
    }
  }
  return Status::Ok();
}

StatusOr<Duration> ParseDurationField(const YamlSource& src, const YAML::Node& entry,
                                      std::string_view key, Duration fallback) {
  HANGAR_ASSIGN_OR_RETURN(auto text, src.OptString(entry, key));
  if (!text) return fallback;
  auto d = ParseDuration(*text);
  if (!d.ok())
    return src.Error(entry[std::string(key)],
                     "'" + std::string(key) + "': " + d.status().message());
  return *d;
}

StatusOr<double> ParseFactor(const YamlSource& src, const YAML::Node& entry) {
  HANGAR_ASSIGN_OR_RETURN(auto text, src.OptString(entry, "factor"));
  if (!text)
    return src.Error(entry, "a slow fault needs 'factor', e.g. factor: 0.7 (70% of normal speed)");
  double v = 0;
  auto [p, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || p != text->data() + text->size() || !(v > 0 && v <= 1)) {
    return src.Error(entry["factor"],
                     "'factor' must be a number above 0 and at most 1, not '" + *text + "'");
  }
  return v;
}

Status ParseTarget(const YamlSource& src, const YAML::Node& entry, int gpu_count, Fault& f) {
  HANGAR_ASSIGN_OR_RETURN(auto node, src.OptBool(entry, "node"));
  HANGAR_ASSIGN_OR_RETURN(auto gpu, src.OptInt(entry, "gpu", 0, 1 << 20));
  if (node.value_or(false) == gpu.has_value()) {
    return src.Error(entry,
                     "a fault needs exactly one of 'gpu: N' (one GPU) or 'node: true' (every GPU)");
  }
  if (gpu && *gpu >= gpu_count) {
    return src.Error(entry["gpu"],
                     "gpu " + std::to_string(*gpu) + " does not exist: this node has " +
                         std::to_string(gpu_count) + " GPUs" +
                         (gpu_count ? " (0-" + std::to_string(gpu_count - 1) + ")" : ""));
  }
  f.gpu = gpu ? static_cast<int>(*gpu) : -1;
  return Status::Ok();
}

Status ParseKindFields(const YamlSource& src, const YAML::Node& entry, Fault& f) {
  switch (f.kind) {
    case FaultKind::kXid: {
      HANGAR_ASSIGN_OR_RETURN(int64_t code, src.Int(entry, "code", 1, 65535));
      f.code = static_cast<uint64_t>(code);
      break;
    }
    case FaultKind::kEccSbe:
    case FaultKind::kEccDbe: {
      HANGAR_ASSIGN_OR_RETURN(auto count, src.OptInt(entry, "count", 1, 1'000'000));
      f.count = static_cast<uint64_t>(count.value_or(1));
      break;
    }
    case FaultKind::kPcieDowngrade: {
      HANGAR_ASSIGN_OR_RETURN(auto gen, src.OptInt(entry, "gen", 1, 6));
      HANGAR_ASSIGN_OR_RETURN(auto width, src.OptInt(entry, "width", 1, 32));
      if (!gen && !width)
        return src.Error(
            entry, "a pcie_downgrade fault needs 'gen' and/or 'width', e.g. gen: 3, width: 4");
      f.gen = static_cast<uint32_t>(gen.value_or(0));
      f.width = static_cast<uint32_t>(width.value_or(0));
      break;
    }
    case FaultKind::kSlow: {
      HANGAR_ASSIGN_OR_RETURN(f.factor, ParseFactor(src, entry));
      break;
    }
    default:
      break;
  }
  return Status::Ok();
}

StatusOr<Fault> ParseFault(const YamlSource& src, const YAML::Node& entry, int gpu_count) {
  HANGAR_RETURN_IF_ERROR(src.CheckKeys(
      entry, "a fault",
      {"at", "gpu", "node", "kind", "code", "count", "gen", "width", "factor", "duration"}));
  Fault f;
  f.where = src.Where(entry);
  HANGAR_ASSIGN_OR_RETURN(const KindInfo* kind, ParseKind(src, entry));
  f.kind = kind->kind;
  HANGAR_RETURN_IF_ERROR(CheckFieldsForKind(src, entry, *kind));
  HANGAR_ASSIGN_OR_RETURN(f.at, ParseDurationField(src, entry, "at", 0));
  HANGAR_ASSIGN_OR_RETURN(f.duration, ParseDurationField(src, entry, "duration", 0));
  HANGAR_RETURN_IF_ERROR(ParseTarget(src, entry, gpu_count, f));
  HANGAR_RETURN_IF_ERROR(ParseKindFields(src, entry, f));
  return f;
}

}  // namespace

std::string_view FaultKindName(FaultKind kind) { return Info(kind).name; }

StatusOr<std::vector<Fault>> ParseFaultScript(std::string_view text, const std::string& name,
                                              int gpu_count) {
  YamlSource src(name);
  HANGAR_ASSIGN_OR_RETURN(YAML::Node doc, src.Parse(text));
  std::vector<Fault> faults;
  if (!doc.IsDefined() || doc.IsNull()) return faults;  // an empty script breaks nothing
  YAML::Node list = doc;
  if (doc.IsMap()) {
    HANGAR_RETURN_IF_ERROR(src.CheckKeys(doc, "a fault script", {"faults"}));
    list = doc["faults"];
    if (list.IsNull()) return faults;
  }
  if (!list.IsSequence()) {
    return src.Error(list,
                     "a fault script is a list of faults (or 'faults:' holding one), e.g. "
                     "- {at: 30s, gpu: 3, kind: xid, code: 79}");
  }
  for (const auto& entry : list) {
    HANGAR_ASSIGN_OR_RETURN(Fault f, ParseFault(src, entry, gpu_count));
    faults.push_back(std::move(f));
  }
  return faults;
}

StatusOr<std::vector<Fault>> LoadFaultScript(const std::string& path, int gpu_count) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open the fault script; check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseFaultScript(ss.str(), path, gpu_count);
}

}  // namespace hangar::agent
