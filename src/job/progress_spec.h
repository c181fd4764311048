// What a job asks of the progress its tasks report (`hangar progress`, docs/progress.md):
//
//   progress:
//     hang_timeout: 10m      # no progress this long while its tasks run: the job is hung
//     on_hang: restart       # restart (checkpoint signal, then requeued whole) | fail | notify
//     straggler_factor: 1.5  # a rank whose step time stays above 1.5x the gang's median ...
//     straggler_reports: 5   # ... for 5 reports in a row is named a straggler
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "common/status.h"
#include "common/time.h"

namespace hangar::job {

enum class HangAction : uint8_t { kRestart, kFail, kNotify };
std::string_view HangActionName(HangAction a);  // "restart", "fail", "notify"

struct ProgressSpec {
  static constexpr int kMaxStragglerReports = 1000;
  Duration hang_timeout = 0;  // 0: no hang detection
  HangAction on_hang = HangAction::kRestart;
  int64_t straggler_factor_milli = 0;  // 1500: 1.5x the median; 0: no straggler detection
  int straggler_reports = 5;
  bool empty() const { return hang_timeout == 0 && straggler_factor_milli == 0; }
};

// From the job file's `progress:` map (as JSON; numbers may come as numbers or text). The error
// names the field and what to write.
StatusOr<ProgressSpec> ProgressSpecFromJson(const nlohmann::json& j);
// The same map, in the form ProgressSpecFromJson reads back ({} when empty).
nlohmann::json ProgressSpecToJson(const ProgressSpec& p);

}  // namespace hangar::job
