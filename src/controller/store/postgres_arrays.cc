#include "controller/store/postgres_arrays.h"

namespace hangar::controller::pg {
namespace {

// The length of the well-formed UTF-8 sequence at s[i], or 0 when it is not one.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c >= 0x01 && c < 0x80) return 1;
  size_t n = 0;
  uint32_t min = 0;
  if ((c & 0xE0) == 0xC0)
    n = 2, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    n = 3, min = 0x800;
  else if ((c & 0xF8) == 0xF0)
    n = 4, min = 0x10000;
  else
    return 0;
  if (i + n > s.size()) return 0;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

void ArrayParams::Separate(size_t column) {
  if (columns_[column].size() > 1) columns_[column] += ',';
}

void ArrayParams::Text(size_t column, std::string_view value) {
  Separate(column);
  std::string& out = columns_[column];
  out.reserve(out.size() + value.size() + 2);
  out += '"';
  for (size_t i = 0; i < value.size();) {
    const size_t n = Utf8Length(value, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (value[i] == '"' || value[i] == '\\') out += '\\';
    out.append(value.data() + i, n);
    i += n;
  }
  out += '"';
}

void ArrayParams::Int(size_t column, int64_t value) {
  Separate(column);
  columns_[column] += std::to_string(value);
}

std::vector<std::string> ArrayParams::Take() {
  std::vector<std::string> out = std::move(columns_);
  columns_.clear();
  for (auto& c : out) c += '}';
  return out;
}

}  // namespace hangar::controller::pg
