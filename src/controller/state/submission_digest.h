// What an idempotent submission remembers of its request, to tell a retry from another request
// under the same Idempotency-Key. Stored for a day, so it must mean the same after an upgrade:
// SHA-256, never std::hash.
#pragma once

#include <string>
#include <string_view>

namespace hangar::controller {

struct SubmissionDigest {
  std::string sha256;  // "sha256:<hex>" of the body, a newline and the count: what is stored
  // std::hash of the same, as controllers before SHA-256 stored it (a decimal number). Compared
  // only with such stored digests, which expire within the key's day; never stored again.
  std::string legacy;

  static SubmissionDigest Of(std::string_view body, long count);
  // Whether `stored` (what RememberSubmission kept) was made from the same request.
  bool Matches(const std::string& stored) const;
};

}  // namespace hangar::controller
