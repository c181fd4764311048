#include "sim/fgd/csv_rows.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace hangar::sim::fgd {

namespace {

void SplitFields(std::string_view line, std::vector<std::string_view>* out) {
  out->clear();
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out->push_back(line.substr(start));
      return;
    }
    out->push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

}  // namespace

Status CsvRows::ReadHeader(const std::vector<std::string_view>& required) {
  std::string_view line;
  if (!NextLine(&line)) return Error("the file is empty; expected a header row");
  SplitFields(line, &header_);
  for (auto name : required) {
    if (!Column(name)) return Error("the header has no '" + std::string(name) + "' column");
  }
  return Status::Ok();
}

std::optional<size_t> CsvRows::Column(std::string_view name) const {
  auto it = std::find(header_.begin(), header_.end(), name);
  if (it == header_.end()) return std::nullopt;
  return static_cast<size_t>(it - header_.begin());
}

StatusOr<bool> CsvRows::Next() {
  std::string_view line;
  do {
    if (!NextLine(&line)) return false;
  } while (line.empty());
  SplitFields(line, &fields_);
  if (fields_.size() != header_.size()) {
    return Error("expected " + std::to_string(header_.size()) +
                 " comma-separated fields as in the header, found " +
                 std::to_string(fields_.size()));
  }
  return true;
}

StatusOr<int64_t> CsvRows::Int(size_t column, int64_t lo, int64_t hi) const {
  const std::string_view f = fields_[column];
  const std::string name(header_[column]);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  if (f.empty() || ec != std::errc() || end != f.data() + f.size()) {
    return Error(name + " '" + std::string(f) + "' is not a whole number");
  }
  if (v < lo || v > hi) {
    return Error(name + " is " + std::to_string(v) + "; it must be between " + std::to_string(lo) +
                 " and " + std::to_string(hi));
  }
  return v;
}

StatusOr<std::optional<double>> CsvRows::Decimal(size_t column) const {
  const std::string f(fields_[column]);
  if (f.empty()) return std::optional<double>();
  char* end = nullptr;
  const double v = std::strtod(f.c_str(), &end);
  if (end != f.c_str() + f.size() || !std::isfinite(v)) {
    return Error("column " + std::string(header_[column]) + ": '" + f + "' is not a number");
  }
  return std::optional<double>(v);
}

Status CsvRows::Error(const std::string& what) const {
  return Status::InvalidArgument(std::string(source_) + ":" + std::to_string(line_) + ": " + what);
}

bool CsvRows::NextLine(std::string_view* line) {
  if (pos_ >= text_.size()) return false;
  size_t end = text_.find('\n', pos_);
  if (end == std::string_view::npos) end = text_.size();
  *line = text_.substr(pos_, end - pos_);
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  pos_ = end + 1;
  ++line_;
  return true;
}

}  // namespace hangar::sim::fgd
