#include "common/yaml_util.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace hangar {

StatusOr<YAML::Node> YamlSource::Parse(std::string_view text) const {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument(name_ + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) +
                                   ": not valid YAML: " + e.msg);
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

std::string ClosestKey(std::string_view key, std::span<const std::string_view> allowed) {
  // Levenshtein distance, one row at a time.
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_d = std::max<size_t>(1, key.size() / 3) + 1;
  for (auto a : allowed) {
    const size_t d = distance(key, a);
    if (d < best_d) {
      best_d = d;
      best = std::string(a);
    }
  }
  return best;
}

void YamlSource::UnknownKeys(const YAML::Node& map, std::string_view what,
                             std::span<const std::string_view> allowed,
                             std::vector<std::string>* out) const {
  if (!map.IsMap()) return;
  std::string list;
  for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>("");
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    const std::string near = ClosestKey(key, allowed);
    out->push_back(Where(kv.first) + ": unknown field '" + key + "' in " + std::string(what) +
                   (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                   "; the fields are: " + list);
  }
}

Status YamlSource::CheckKeys(const YAML::Node& map, std::string_view what,
                             std::span<const std::string_view> allowed) const {
  if (!map.IsMap()) return Error(map, std::string(what) + " must be a map of key: value");
  std::vector<std::string> unknown;
  UnknownKeys(map, what, allowed, &unknown);
  return JoinUnknownKeys(unknown);
}

Status JoinUnknownKeys(const std::vector<std::string>& lines) {
  if (lines.empty()) return Status::Ok();
  std::string all;
  for (const auto& l : lines) all += (all.empty() ? "" : "\n") + l;
  return Status::InvalidArgument(all);
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
    return Error(n, "'" + std::string(key) + "' must be between " + std::to_string(min) + " and " +
                        std::to_string(max) + ", not " + std::to_string(v));
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
