#include "cli/table.h"

#include <algorithm>
#include <cstdio>

#include "common/time.h"

namespace hangar::cli {

std::string EscapeControl(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char hex[8];
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned char>(text[++i]));
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void Table::Add(std::vector<std::string> row) {
  for (auto& cell : row) {
    if (std::any_of(cell.begin(), cell.end(), [](char ch) {
          const auto c = static_cast<unsigned char>(ch);
          return c < 0x20 || c == 0x7f || c == 0xc2;
        })) {
      cell = EscapeControl(cell);
    }
  }
  rows_.push_back(std::move(row));
}

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
