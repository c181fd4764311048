#include "controller/state/job_filter.h"

namespace hangar::controller {

bool NameMatches(const std::string& name, const std::string& pattern) {
  if (pattern.empty()) return true;
  if (pattern.back() == '*')
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return name == pattern;
}

bool MatchesFilter(const FilterFacts& j, const JobFilter& f) {
  if (f.array && j.array_id != f.array) return false;
  if (!f.user.empty() && j.spec.user != f.user) return false;
  if (!f.queue.empty() && j.spec.queue != f.queue) return false;
  if (!NameMatches(j.spec.name, f.name)) return false;
  if (!f.state.empty()) {
    if (f.state == "held") {
      if (!j.held || j.state != job::JobState::kPending) return false;
    } else if (job::JobStateName(j.state) != f.state) {
      return false;
    }
  }
  if (f.since && j.submitted < f.since) return false;
  if (f.until && j.submitted >= f.until) return false;
  return true;
}

}  // namespace hangar::controller
