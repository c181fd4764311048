// Self-contained HTML reports for `hangar sim`: one file with the data and the chart library
// inline, so it opens offline and can be mailed around.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace hangar::sim {

// From the JSON `hangar sim replay --json` writes: the metrics, the JCT CDF, queue length and GPU
// utilisation over time.
std::string RenderReplayReport(const nlohmann::json& replay);
// From the JSON `hangar sim fgd --json` writes: the allocation and fragmentation curves against
// the published FGD reference (when present).
std::string RenderFgdReport(const nlohmann::json& fgd);
Status WriteReport(const std::string& path, const std::string& html);
// Writes `j` as indented JSON to `path` (the `--json FILE` of every `hangar sim` command); the
// error names the file and checks the write, not only the open (a full disk fails it too).
Status WriteJsonFile(const std::string& path, const nlohmann::json& j, int indent = 2);
// Whether `path`'s folder exists and may be written, said before a long run rather than after it
// ("" passes: no file asked).
Status CheckWritableFolder(const std::string& path);

}  // namespace hangar::sim
