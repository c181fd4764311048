// Small formatting helpers for reason sentences (internal to the health module).
#pragma once

#include <cstdio>
#include <string>

namespace hangar::health {

// `v` with `digits` decimals: Fixed(30.72, 1) == "30.7".
inline std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A count that may have been scaled to a window: whole numbers print without decimals.
inline std::string Count(double v) {
  double rounded = static_cast<double>(static_cast<long long>(v + 0.5));
  return Fixed(v, v - rounded < 0.05 && rounded - v < 0.05 ? 0 : 1);
}

// 0x48 -> "0x48".
inline std::string Hex(unsigned long long v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", v);
  return buf;
}

// 0.3 -> "30.0%".
inline std::string Percent(double fraction) { return Fixed(fraction * 100, 1) + "%"; }

}  // namespace hangar::health
