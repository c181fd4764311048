// Parsing and printing of the quantities people write in YAML: memory ("80Gi", "512Mi",
// "80GB"), CPU ("8", "2.5", "500m") and GPU fractions ("0.25", "250m").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hangar {

// Memory to MiB. Accepts Ki/Mi/Gi/Ti (binary), K/M/G/T and KB/MB/GB/TB (decimal, as vendors
// label GPUs: "80GB" is read as 80 GiB since that is what an 80 GB card reports), or a bare
// number of MiB. Fractions such as "1.5Gi" are allowed.
StatusOr<int64_t> ParseMemoryMiB(std::string_view text);
// CPU to milli-cores: "8" -> 8000, "2.5" -> 2500, "500m" -> 500.
StatusOr<int64_t> ParseMilliCpu(std::string_view text);
// A GPU share to milli-GPU: "0.25" -> 250, "250m" -> 250, "1" -> 1000.
StatusOr<int64_t> ParseMilliGpu(std::string_view text);

std::string FormatMemoryMiB(int64_t mib);  // "80Gi", "512Mi", "1.5Ti"
std::string FormatMilli(int64_t milli);    // "8", "2.5", "0.25"

}  // namespace hangar
