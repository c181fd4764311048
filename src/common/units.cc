#include "common/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace hangar {
namespace {

// Splits "12.5Gi" into 12.5 and "Gi". Returns false when there is no leading number.
bool SplitNumber(std::string_view text, double* value, std::string_view* unit) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + i, *value);
  if (ec != std::errc() || p != text.data() + i) return false;
  size_t j = i;
  while (j < text.size() && text[j] == ' ') ++j;
  *unit = text.substr(j);
  return std::isfinite(*value) && *value >= 0;
}

// Rounds to an integer amount, refusing what no machine has (and what would overflow int64).
StatusOr<int64_t> Bounded(std::string_view text, double v, double max, const char* what,
                          const char* bound) {
  if (!(v <= max)) {
    return Status::InvalidArgument("'" + std::string(text) + "' is more " + what +
                                   " than any machine has (at most " + bound +
                                   "); check the number and its unit");
  }
  return static_cast<int64_t>(std::llround(v));
}

}  // namespace

StatusOr<int64_t> ParseMemoryMiB(std::string_view text) {
  double v = 0;
  std::string_view unit;
  if (!SplitNumber(text, &v, &unit)) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a memory size; write it like 512Mi, 80Gi or 2Ti");
  }
  double mib;
  if (unit.empty() || unit == "Mi" || unit == "M" || unit == "MB" || unit == "MiB")
    mib = v;
  else if (unit == "Ki" || unit == "K" || unit == "KB" || unit == "KiB")
    mib = v / 1024;
  else if (unit == "Gi" || unit == "G" || unit == "GB" || unit == "GiB")
    mib = v * 1024;
  else if (unit == "Ti" || unit == "T" || unit == "TB" || unit == "TiB")
    mib = v * 1024 * 1024;
  else {
    return Status::InvalidArgument("'" + std::string(text) + "' has an unknown unit '" +
                                   std::string(unit) + "'; use Mi, Gi or Ti");
  }
  return Bounded(text, mib, 1024.0 * 1024 * 1024 * 1024, "memory", "1024Pi");
}

StatusOr<int64_t> ParseMilliCpu(std::string_view text) {
  double v = 0;
  std::string_view unit;
  if (!SplitNumber(text, &v, &unit) || (!unit.empty() && unit != "m")) {
    return Status::InvalidArgument(
        "'" + std::string(text) +
        "' is not a CPU amount; write cores (8, 2.5) or millicores (500m)");
  }
  return Bounded(text, unit == "m" ? v : v * 1000, 1e12, "CPU", "a billion cores");
}

StatusOr<int64_t> ParseMilliGpu(std::string_view text) {
  double v = 0;
  std::string_view unit;
  if (!SplitNumber(text, &v, &unit) || (!unit.empty() && unit != "m")) {
    return Status::InvalidArgument(
        "'" + std::string(text) +
        "' is not a GPU share; write a fraction (0.25) or milli-GPU (250m)");
  }
  return Bounded(text, unit == "m" ? v : v * 1000, 1e9, "GPU", "a million GPUs");
}

std::string FormatMemoryMiB(int64_t mib) {
  char buf[48];
  if (mib >= 1024 * 1024 && mib % (1024 * 1024) == 0) {
    std::snprintf(buf, sizeof buf, "%lldTi", static_cast<long long>(mib / (1024 * 1024)));
  } else if (mib >= 1024 && mib % 1024 == 0) {
    std::snprintf(buf, sizeof buf, "%lldGi", static_cast<long long>(mib / 1024));
  } else if (mib >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1fGi", static_cast<double>(mib) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%lldMi", static_cast<long long>(mib));
  }
  return buf;
}

std::string FormatMilli(int64_t milli) {
  char buf[32];
  if (milli % 1000 == 0) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(milli / 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(milli) / 1000.0);
  }
  return buf;
}

}  // namespace hangar
