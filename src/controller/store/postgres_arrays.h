// Rows for one statement, sent as one array parameter per column (PostgreSQL's array literal,
// '{"a","b"}') and unpacked on the server by unnest(): any number of rows in one statement, with
// no per-row round trip and no JSON to build on the controller's thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hangar::controller::pg {

class ArrayParams {
 public:
  explicit ArrayParams(size_t columns) : columns_(columns, "{") {}
  // Appends a text element. PostgreSQL's text holds UTF-8 without NUL: a NUL or a byte that is
  // not UTF-8 is stored as U+FFFD, rather than failing the batch.
  void Text(size_t column, std::string_view value);
  void Int(size_t column, int64_t value);
  // The columns' literals, closed; the object is empty afterwards.
  std::vector<std::string> Take();

 private:
  void Separate(size_t column);
  std::vector<std::string> columns_;
};

}  // namespace hangar::controller::pg
