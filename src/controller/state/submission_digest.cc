#include "controller/state/submission_digest.h"

#include <functional>

#include "common/sha256.h"

namespace hangar::controller {

SubmissionDigest SubmissionDigest::Of(std::string_view body, long count) {
  std::string request(body);
  request += "\n" + std::to_string(count);
  return {"sha256:" + Sha256Hex(request), std::to_string(std::hash<std::string>()(request))};
}

bool SubmissionDigest::Matches(const std::string& stored) const {
  if (stored.rfind("sha256:", 0) == 0) return stored == sha256;
  return !stored.empty() && stored == legacy;
}

}  // namespace hangar::controller
