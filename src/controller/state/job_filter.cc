#include "controller/state/job_filter.h"

namespace hangar::controller {

bool NameMatches(const std::string& name, const std::string& pattern) {
  if (pattern.empty()) return true;
  if (pattern.back() == '*')
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return name == pattern;
}

}  // namespace hangar::controller
