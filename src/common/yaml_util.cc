#include "common/yaml_util.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace hangar {

StatusOr<YAML::Node> YamlSource::Parse(std::string_view text) const {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument(name_ + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": not valid YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(name_ + ": not valid YAML: " + e.what());
  }
}

StatusOr<YAML::Node> YamlSource::LoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open the file; check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  return YamlSource(path).Parse(ss.str());
}

std::string YamlSource::Where(const YAML::Node& node) const {
  if (!node.IsDefined() || node.Mark().is_null()) return name_;
  return name_ + ":" + std::to_string(node.Mark().line + 1);
}

Status YamlSource::Error(const YAML::Node& node, std::string_view message) const {
  return Status::InvalidArgument(Where(node) + ": " + std::string(message));
}

Status YamlSource::CheckKeys(const YAML::Node& map, std::string_view what,
                             std::span<const std::string_view> allowed) const {
  if (!map.IsMap()) return Error(map, std::string(what) + " must be a map of key: value");
  for (const auto& kv : map) {
    std::string key = kv.first.as<std::string>("");
    bool ok = false;
    for (auto a : allowed) ok = ok || a == key;
    if (!ok) {
      std::string list;
      for (auto a : allowed) {
        if (!list.empty()) list += ", ";
        list += a;
      }
      return Error(kv.first, "unknown field '" + key + "' in " + std::string(what) +
                                 "; the fields are: " + list);
    }
  }
  return Status::Ok();
}

StatusOr<std::optional<std::string>> YamlSource::OptString(const YAML::Node& map,
                                                           std::string_view key) const {
  YAML::Node n = map[std::string(key)];
  if (!n.IsDefined() || n.IsNull()) return std::optional<std::string>();
  if (!n.IsScalar()) return Error(n, "'" + std::string(key) + "' must be a single value");
  return std::optional<std::string>(n.Scalar());
}

StatusOr<std::string> YamlSource::String(const YAML::Node& map, std::string_view key) const {
  HANGAR_ASSIGN_OR_RETURN(auto v, OptString(map, key));
  if (!v || v->empty()) return Error(map, "'" + std::string(key) + "' is required");
  return *v;
}

StatusOr<std::optional<int64_t>> YamlSource::OptInt(const YAML::Node& map, std::string_view key,
                                                    int64_t min, int64_t max) const {
  HANGAR_ASSIGN_OR_RETURN(auto s, OptString(map, key));
  if (!s) return std::optional<int64_t>();
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  YAML::Node n = map[std::string(key)];
  if (ec != std::errc() || p != s->data() + s->size()) {
    return Error(n, "'" + std::string(key) + "' must be a whole number, not '" + *s + "'");
  }
  if (v < min || v > max) {
    return Error(n, "'" + std::string(key) + "' must be between " + std::to_string(min) +
                        " and " + std::to_string(max) + ", not " + std::to_string(v));
  }
  return std::optional<int64_t>(v);
}

StatusOr<int64_t> YamlSource::Int(const YAML::Node& map, std::string_view key, int64_t min,
                                  int64_t max) const {
  HANGAR_ASSIGN_OR_RETURN(auto v, OptInt(map, key, min, max));
  if (!v) return Error(map, "'" + std::string(key) + "' is required");
  return *v;
}

StatusOr<std::optional<bool>> YamlSource::OptBool(const YAML::Node& map,
                                                  std::string_view key) const {
  HANGAR_ASSIGN_OR_RETURN(auto s, OptString(map, key));
  if (!s) return std::optional<bool>();
  if (*s == "true" || *s == "yes" || *s == "on") return std::optional<bool>(true);
  if (*s == "false" || *s == "no" || *s == "off") return std::optional<bool>(false);
  return Error(map[std::string(key)], "'" + std::string(key) + "' must be true or false");
}

}  // namespace hangar
