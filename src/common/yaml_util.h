// Helpers for reading declarative YAML files with errors that point at file:line and say what to
// write instead. yaml-cpp does the parsing; this only adds the messages.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hangar {

// The allowed key closest to `key` by edit distance when it is close enough to be a typo
// (at most a third of the key's length, at least 1), else empty.
std::string ClosestKey(std::string_view key, std::span<const std::string_view> allowed);

// UnknownKeys' lines as one error (one line each), or Ok when there are none.
Status JoinUnknownKeys(const std::vector<std::string>& lines);

class YamlSource {
 public:
  // `name` is what errors call the document: a file path, or "request body".
  explicit YamlSource(std::string name) : name_(std::move(name)) {}

  // Parses text; a syntax error becomes "name:line:col: <yaml-cpp's message>".
  StatusOr<YAML::Node> Parse(std::string_view text) const;
  // Reads and parses a file; a missing file says so.
  static StatusOr<YAML::Node> LoadFile(const std::string& path);

  // "name:line" for the node (or just "name" when the node has no position).
  std::string Where(const YAML::Node& node) const;
  Status Error(const YAML::Node& node, std::string_view message) const;

  // Fails when `map` is not a map, or holds keys outside `allowed`: one line per unknown key,
  // with the closest allowed key when it looks like a typo, and the allowed ones.
  Status CheckKeys(const YAML::Node& map, std::string_view what,
                   std::span<const std::string_view> allowed) const;
  Status CheckKeys(const YAML::Node& map, std::string_view what,
                   std::initializer_list<std::string_view> allowed) const {
    return CheckKeys(map, what, std::span<const std::string_view>(allowed.begin(), allowed.size()));
  }

  // Appends CheckKeys' line for each key of `map` (a map) outside `allowed`, so a caller can
  // report the unknown keys of several maps in one error.
  void UnknownKeys(const YAML::Node& map, std::string_view what,
                   std::span<const std::string_view> allowed, std::vector<std::string>* out) const;
  void UnknownKeys(const YAML::Node& map, std::string_view what,
                   std::initializer_list<std::string_view> allowed,
                   std::vector<std::string>* out) const {
    UnknownKeys(map, what, std::span<const std::string_view>(allowed.begin(), allowed.size()), out);
  }

  // Scalar accessors. A missing optional key gives std::nullopt; a present key of the wrong
  // type is an error naming the key and the expected form.
  StatusOr<std::optional<std::string>> OptString(const YAML::Node& map, std::string_view key) const;
  StatusOr<std::string> String(const YAML::Node& map, std::string_view key) const;
  StatusOr<std::optional<int64_t>> OptInt(const YAML::Node& map, std::string_view key, int64_t min,
                                          int64_t max) const;
  StatusOr<int64_t> Int(const YAML::Node& map, std::string_view key, int64_t min,
                        int64_t max) const;
  StatusOr<std::optional<bool>> OptBool(const YAML::Node& map, std::string_view key) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

}  // namespace hangar
