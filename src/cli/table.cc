#include "cli/table.h"

#include <algorithm>

#include "common/time.h"

namespace hangar::cli {

std::string Table::Render() const {
  std::vector<size_t> width;
  for (const auto& r : rows_) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows_) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string Ago(long long then_ms, long long now_ms) {
  if (then_ms <= 0) return "-";
  return FormatDuration(std::max(0LL, now_ms - then_ms) / 1000 * 1000) + " ago";
}

}  // namespace hangar::cli
