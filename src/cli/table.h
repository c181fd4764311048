// Plain text tables for people: columns padded to their widest cell.
#pragma once

#include <string>
#include <vector>

namespace hangar::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// "3m ago", "2h ago" from a time in ms, relative to now.
std::string Ago(long long then_ms, long long now_ms);

}  // namespace hangar::cli
