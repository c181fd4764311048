// A minimal reader for the simple CSVs of the openb traces and FGD's results: a header row,
// then rows of plain comma-separated fields (no quoting). Columns are found by header name, and
// every error names the file and line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hangar::sim::fgd {

class CsvRows {
 public:
  // `text` must outlive this object; `source` names the file in errors.
  CsvRows(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  // Reads the header row; fails when one of `required` is missing.
  Status ReadHeader(const std::vector<std::string_view>& required);
  std::optional<size_t> Column(std::string_view name) const;
  size_t width() const { return header_.size(); }

  // Moves to the next non-blank row; false at the end. Fails on a row of the wrong width.
  StatusOr<bool> Next();

  std::string_view Field(size_t column) const { return fields_[column]; }
  // The whole number in `column`, which must lie in [lo, hi].
  StatusOr<int64_t> Int(size_t column, int64_t lo, int64_t hi) const;
  // The decimal number in `column`; nullopt when the field is empty.
  StatusOr<std::optional<double>> Decimal(size_t column) const;

  int line() const { return line_; }
  // InvalidArgument "source:line: what".
  Status Error(const std::string& what) const;

 private:
  bool NextLine(std::string_view* line);

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
  int line_ = 0;
  std::vector<std::string_view> header_;
  std::vector<std::string_view> fields_;
};

}  // namespace hangar::sim::fgd
